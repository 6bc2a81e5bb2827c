"""`EngineConfig`: one vLLM replica's settings, validated, turned into argv and environment.

    config = EngineConfig(model=Path("~/.cache/prefixkit/models/SmolLM2-135M-Instruct"),
                          port=18000, block_size=32, kv_cache_space_gib=1)
    subprocess.Popen(config.argv(), env={**os.environ, **config.env()})

`argv()` is `[python, "-m", "vllm.entrypoints.openai.api_server", ...flags]`: vLLM is never
imported in-process; `python` is the engine's own interpreter (the embedded CPU engine's
virtualenv by default), so the CPU build and a GPU build are interchangeable. Prefix caching is
always on. `env()` holds only the variables the engine needs (CPU KV-cache size, thread
binding, offline hub, loopback for internal sockets); the launcher adds them to the parent's
environment and removes an inherited `PYTHONHASHSEED` unless `hash_seed` is set, because that
variable changes the block hashes' seed (`NONE_HASH`), which clients reproduce.

KV tiers below the GPU's (`kv_tiers`, parsed from ``--kv-tier`` texts such as
``"cpu:64GiB"`` or ``"disk:/mnt/nvme:500GiB"``; `prefixkit.engine_adapter.engine.kv_tiers`)
become one ``--kv-transfer-config`` for vLLM 0.32's connectors. With KV events on, the
native tiers publish their blocks on the same publisher as the GPU's, with ``medium``
``"CPU"`` or ``"STORAGE"`` (`kv_event_media` lists what the events will carry).

Combinations vLLM would reject, or that cannot work, raise `EngineConfigError` at
construction with a message that says what to change (CPU block size must be a multiple of
32; KV offloading and tiers, GPU memory utilisation and tensor parallelism are GPU-only; the
CPU KV cache size is CPU-only; KV-event endpoints must stay on this machine; a tier whose
keys do not carry ``cache_salt`` only with `single_tenant`). Checks that need I/O
(model directory, free port, interpreter) are in `prefixkit.engine_adapter.engine.replicas.preflight`.

Fields other helpers rely on: `model`, `served_model_name`, `host`, `port`, `device`,
`python`, `block_size`, `prefix_caching_hash_algo`, `enable_prompt_tokens_details`,
`max_model_len`, `dtype`, `kv_events_endpoint`, `kv_events_replay_endpoint`,
`kv_events_topic`, `kv_cache_space_gib`, `enforce_eager`, `num_gpu_blocks_override`,
`gpu_memory_utilization`, `tensor_parallel_size`, `kv_offloading_size`,
`kv_offloading_backend`, `kv_tiers`, `single_tenant`, `cpu_omp_threads_bind`,
`cpu_reserved_cores`, `hash_seed`, `dev_endpoints`; properties `name` (served model name),
`base_url` and `kv_event_media`; methods `argv()`, `env()`, `kv_events_config()`,
`kv_transfer_config()`, `derive(**changes)`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from prefixkit.sdk.deprecation import renamed_names
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ..errors import EngineConfigError
from ..problems import Problem, Problems, validation_problems
from .home import engine_python
from .kv_tiers import (
    MEDIUM_OF_KIND,
    KVTier,
    kv_tier_env,
    kv_tier_problems,
    kv_transfer_config,
    parse_kv_tiers,
)

__all__ = ["SERVER_MODULE", "EngineConfig", "PrefixCachingHashAlgo"]

SERVER_MODULE = "vllm.entrypoints.openai.api_server"

PrefixCachingHashAlgo = Literal["sha256", "sha256_cbor", "xxhash", "xxhash_cbor"]
"""vLLM's ``--prefix-caching-hash-algo`` choices. Clients reproduce only the first two
(`prefixkit.sdk.HashAlgo`); a router that computes block hashes needs one of them."""

__getattr__ = renamed_names(__name__, {"HashAlgo": "PrefixCachingHashAlgo"})

# vLLM's CPU attention backend accepts MultipleOf(32); FlashAttention on GPU MultipleOf(16).
_BLOCK_MULTIPLE = {"cpu": 32, "gpu": 16}
# A Unix socket path longer than this cannot be bound (sockaddr_un.sun_path is 108 bytes).
_MAX_IPC_PATH = 107
_LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}


class EngineConfig(BaseModel):
    """Settings of one vLLM replica (immutable; `derive(**changes)` makes a validated copy)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: Path = Field(description="local model directory (config.json, weights, tokenizer)")
    served_model_name: str | None = Field(
        default=None, description="name clients put in `model`; default: the directory name"
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    device: Literal["cpu", "gpu"] = "cpu"
    python: Path = Field(default_factory=engine_python, description="the engine's interpreter")
    block_size: int = Field(default=32, gt=0, description="tokens per KV block")
    prefix_caching_hash_algo: PrefixCachingHashAlgo = "sha256_cbor"
    enable_prompt_tokens_details: bool = True
    max_model_len: int | None = Field(default=None, gt=0)
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    kv_events_endpoint: str | None = Field(
        default=None, description="ZMQ PUB endpoint for KV cache events, e.g. ipc:///run/r0.ipc"
    )
    kv_events_replay_endpoint: str | None = None
    kv_events_topic: str = "kv"
    kv_cache_space_gib: int | None = Field(
        default=None, gt=0, description="CPU only: VLLM_CPU_KVCACHE_SPACE (GiB of KV cache)"
    )
    enforce_eager: bool = False
    num_gpu_blocks_override: int | None = Field(
        default=None, gt=0, description="fix the number of KV blocks (small caches in tests)"
    )
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    tensor_parallel_size: int = Field(default=1, ge=1)
    kv_offloading_size: float | None = Field(
        default=None, gt=0, description="GPU only: GiB of CPU RAM as a second KV tier"
    )
    kv_offloading_backend: Literal["native", "lmcache"] | None = None
    kv_tiers: tuple[KVTier, ...] = Field(
        default=(),
        description="GPU only: KV tiers below the GPU's, as --kv-tier texts ('cpu:64GiB', "
        "'disk:/mnt/nvme:500GiB', 'lmcache:tcp://HOST:PORT') or KVTier; fastest first",
    )
    single_tenant: bool = Field(
        default=False,
        description="the deployment serves one tenant: allows KV tiers whose keys do not "
        "carry cache_salt",
    )
    cpu_omp_threads_bind: str | None = Field(
        default=None, description="CPU only: VLLM_CPU_OMP_THREADS_BIND, e.g. '0-1'"
    )
    cpu_reserved_cores: int | None = Field(
        default=None, ge=0, description="CPU only: VLLM_CPU_NUM_OF_RESERVED_CPU"
    )
    hash_seed: str | None = Field(
        default=None, description="PYTHONHASHSEED for the engine (seeds the block hashes)"
    )
    dev_endpoints: bool = Field(
        default=False, description="VLLM_SERVER_DEV_MODE=1: enables /reset_prefix_cache"
    )
    tool_call_parser: str | None = Field(
        default=None,
        description="vLLM tool-call parser (e.g. 'pythonic', 'hermes'); turns on automatic "
        "tool choice, which vLLM also requires for a named tool_choice",
    )

    @field_validator("kv_tiers", mode="before")
    @classmethod
    def _parse_kv_tiers(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = (value,)
        if isinstance(value, list | tuple):
            return parse_kv_tiers(value)
        return value

    @model_validator(mode="after")
    def _check_combinations(self) -> EngineConfig:
        problems = _combination_problems(self)
        if problems:
            raise Problems(problems)
        return self

    def __init__(self, **fields: Any) -> None:
        """Validate; raises `EngineConfigError` listing every problem and its fix (its
        `field` and `value`: the first problem's)."""
        try:
            super().__init__(**fields)
        except ValidationError as error:
            problems = validation_problems(error)
            message = "invalid engine config: " + "; ".join(p.message for p in problems)
            first = problems[0]
            raise EngineConfigError(message, field=first.settings[0], value=first.value) from None

    def derive(self, **changes: Any) -> EngineConfig:
        """A validated copy with `changes` applied (pydantic's `model_copy` skips validation)."""
        return EngineConfig(**{**self.model_dump(), **changes})

    @property
    def name(self) -> str:
        """The served model name clients must send."""
        return self.served_model_name or self.model.name

    @property
    def base_url(self) -> str:
        """`http://host:port` of this replica's OpenAI-compatible server."""
        host = f"[{self.host}]" if ":" in self.host and not self.host.startswith("[") else self.host
        return f"http://{host}:{self.port}"

    def argv(self) -> list[str]:
        """The full command line: interpreter, server module, and every flag."""
        args = [
            str(self.python),
            "-m",
            SERVER_MODULE,
            "--model",
            str(self.model),
            "--served-model-name",
            self.name,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--enable-prefix-caching",
            "--block-size",
            str(self.block_size),
            "--prefix-caching-hash-algo",
            self.prefix_caching_hash_algo,
            "--dtype",
            self.dtype,
        ]
        if self.enable_prompt_tokens_details:
            args.append("--enable-prompt-tokens-details")
        if self.max_model_len is not None:
            args += ["--max-model-len", str(self.max_model_len)]
        if self.enforce_eager:
            args.append("--enforce-eager")
        if self.num_gpu_blocks_override is not None:
            args += ["--num-gpu-blocks-override", str(self.num_gpu_blocks_override)]
        if self.kv_events_endpoint is not None:
            args += ["--kv-events-config", json.dumps(self.kv_events_config())]
        if self.gpu_memory_utilization is not None:
            args += ["--gpu-memory-utilization", str(self.gpu_memory_utilization)]
        if self.tensor_parallel_size != 1:
            args += ["--tensor-parallel-size", str(self.tensor_parallel_size)]
        if self.kv_offloading_size is not None:
            args += ["--kv-offloading-size", str(self.kv_offloading_size)]
            args += ["--kv-offloading-backend", self.kv_offloading_backend or "native"]
        if self.kv_tiers:
            transfer = self.kv_transfer_config(kv_events=self.kv_events_endpoint is not None)
            args += ["--kv-transfer-config", json.dumps(transfer)]
        if self.tool_call_parser is not None:
            args += ["--enable-auto-tool-choice", "--tool-call-parser", self.tool_call_parser]
        return args

    def env(self) -> dict[str, str]:
        """Variables to add to the inherited environment when launching `argv()`."""
        env = {
            "HF_HUB_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "PYTHONUNBUFFERED": "1",
        }
        if self.host in _LOOPBACK_HOSTS:
            # keeps the engine's internal sockets on loopback too
            env["VLLM_HOST_IP"] = "127.0.0.1"
        if self.kv_cache_space_gib is not None:
            env["VLLM_CPU_KVCACHE_SPACE"] = str(self.kv_cache_space_gib)
        if self.cpu_omp_threads_bind is not None:
            env["VLLM_CPU_OMP_THREADS_BIND"] = self.cpu_omp_threads_bind
        if self.cpu_reserved_cores is not None:
            env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = str(self.cpu_reserved_cores)
        if self.hash_seed is not None:
            env["PYTHONHASHSEED"] = self.hash_seed
        if self.dev_endpoints:
            env["VLLM_SERVER_DEV_MODE"] = "1"
        env.update(kv_tier_env(self.kv_tiers))
        return env

    def kv_transfer_config(self, kv_events: bool) -> dict[str, object]:
        """The JSON object passed to `--kv-transfer-config` for `kv_tiers` (empty dict without
        tiers); `kv_events`: the engine publishes KV events (the native tiers then publish
        theirs on the same publisher)."""
        return kv_transfer_config(self.kv_tiers, kv_events)

    @property
    def kv_event_media(self) -> tuple[str, ...]:
        """The ``medium`` values this engine's KV events carry, fastest first: ``"GPU"``,
        then ``"CPU"`` and ``"STORAGE"`` for the native cpu and disk tiers (vLLM 0.32's
        names). Blocks held only by an LMCache tier are not in the events: a router sees
        them as misses."""
        media = ["GPU"]
        for tier in self.kv_tiers:
            medium = MEDIUM_OF_KIND[tier.kind]
            if medium is not None:
                media.append(medium)
        return tuple(media)

    def kv_events_config(self) -> dict[str, object]:
        """The JSON object passed to `--kv-events-config` (empty dict when events are off)."""
        if self.kv_events_endpoint is None:
            return {}
        config: dict[str, object] = {
            "enable_kv_cache_events": True,
            "publisher": "zmq",
            "endpoint": self.kv_events_endpoint,
            "topic": self.kv_events_topic,
        }
        if self.kv_events_replay_endpoint is not None:
            config["replay_endpoint"] = self.kv_events_replay_endpoint
        return config


def _combination_problems(config: EngineConfig) -> list[Problem]:
    problems: list[Problem] = []
    multiple = _BLOCK_MULTIPLE[config.device]
    if config.block_size % multiple:
        backend = "CPU attention" if config.device == "cpu" else "FlashAttention"
        nearest = max(multiple, round(config.block_size / multiple) * multiple)
        problems.append(
            Problem(
                ("block_size",),
                config.block_size,
                f"block_size {config.block_size} is not supported on {config.device.upper()}: "
                f"the {backend} backend needs a multiple of {multiple}; use block_size={nearest}",
            )
        )
    if config.device == "cpu":
        for name, value, why in (
            ("kv_offloading_size", config.kv_offloading_size, "vLLM's CPU build fails on it"),
            ("kv_offloading_backend", config.kv_offloading_backend, "offloading needs a GPU"),
            (
                "gpu_memory_utilization",
                config.gpu_memory_utilization,
                "on CPU the KV cache size is kv_cache_space_gib (VLLM_CPU_KVCACHE_SPACE)",
            ),
        ):
            if value is not None:
                problems.append(
                    Problem(
                        (name,), value, f"{name} is GPU-only ({why}): drop it or use device='gpu'"
                    )
                )
        if config.tensor_parallel_size != 1:
            problems.append(
                Problem(
                    ("tensor_parallel_size",),
                    config.tensor_parallel_size,
                    f"tensor_parallel_size={config.tensor_parallel_size} is GPU-only here: "
                    "on CPU run more replicas instead (tensor_parallel_size=1)",
                )
            )
    else:
        for name, setting in (
            ("kv_cache_space_gib", config.kv_cache_space_gib),
            ("cpu_omp_threads_bind", config.cpu_omp_threads_bind),
            ("cpu_reserved_cores", config.cpu_reserved_cores),
        ):
            if setting is not None:
                problems.append(
                    Problem(
                        (name,),
                        setting,
                        f"{name} is CPU-only: drop it for device='gpu' "
                        "(size the GPU KV cache with gpu_memory_utilization)",
                    )
                )
    if config.kv_tiers:
        problems += _kv_tier_problems(config)
    if config.kv_offloading_backend is not None and config.kv_offloading_size is None:
        problems.append(
            Problem(
                ("kv_offloading_backend",),
                config.kv_offloading_backend,
                "kv_offloading_backend is set but kv_offloading_size is not: "
                "set kv_offloading_size (GiB of CPU RAM) to enable offloading",
            )
        )
    for field, endpoint in (
        ("kv_events_endpoint", config.kv_events_endpoint),
        ("kv_events_replay_endpoint", config.kv_events_replay_endpoint),
    ):
        if endpoint is not None:
            problems += [
                Problem((field,), endpoint, message)
                for message in _endpoint_problems(field, endpoint)
            ]
    if config.kv_events_replay_endpoint is not None and config.kv_events_endpoint is None:
        problems.append(
            Problem(
                ("kv_events_replay_endpoint",),
                config.kv_events_replay_endpoint,
                "kv_events_replay_endpoint needs kv_events_endpoint: set both",
            )
        )
    if not config.name or config.name != config.name.strip():
        problems.append(
            Problem(
                ("served_model_name",),
                config.name,
                f"served model name {config.name!r} is empty or padded: give a plain name",
            )
        )
    return problems


def _kv_tier_problems(config: EngineConfig) -> list[Problem]:
    specs = [tier.spec for tier in config.kv_tiers]
    problems = [
        Problem(("kv_tiers",), spec, message)
        for spec, message in kv_tier_problems(config.kv_tiers, config.single_tenant)
    ]
    if config.device == "cpu":
        problems.append(
            Problem(
                ("kv_tiers",),
                specs,
                f"kv_tiers ({', '.join(specs)}) are GPU-only (vLLM's offloading connectors "
                "copy KV blocks between GPU memory and the lower tiers; its CPU build fails on "
                "them): drop kv_tiers or use device='gpu'",
            )
        )
    if config.kv_offloading_size is not None:
        problems.append(
            Problem(
                ("kv_offloading_size",),
                config.kv_offloading_size,
                "kv_offloading_size and kv_tiers both configure offloading: give the CPU tier "
                f"in kv_tiers ('cpu:{config.kv_offloading_size:g}GiB') and drop "
                "kv_offloading_size",
            )
        )
    return problems


def _endpoint_problems(field: str, endpoint: str) -> list[str]:
    scheme, _, rest = endpoint.partition("://")
    if scheme == "ipc":
        if not rest.startswith("/"):
            return [f"{field} {endpoint!r} must be an absolute ipc path, e.g. ipc:///tmp/r0.ipc"]
        if len(rest.encode()) > _MAX_IPC_PATH:
            return [
                f"{field} {endpoint!r} is longer than {_MAX_IPC_PATH} bytes, the limit of a "
                "Unix socket path: use a shorter run directory"
            ]
        return []
    if scheme == "tcp":
        host = urlsplit(endpoint).hostname or ""
        if host not in _LOOPBACK_HOSTS:
            return [
                f"{field} {endpoint!r} leaves this machine or binds every interface: "
                "use ipc:///path or tcp://127.0.0.1:PORT"
            ]
        return []
    return [f"{field} {endpoint!r} has scheme {scheme!r}: use ipc:///path or tcp://127.0.0.1:PORT"]
