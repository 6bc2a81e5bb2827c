"""Errors raised by the engine adapter; the whole tree of prefixkit's errors is drawn
in `prefixkit.sdk.errors`.

Configuration errors (`ValueError`: fix the input and run again, exit code 2 from the
command line) and runtime failures (`RuntimeError`: something failed while running,
exit code 3). Every message names the offending value and says what to change; every
error also carries that data as keyword-only attributes, so a program can act on it
(`exc.port`, `exc.log_tail`, ...).
"""

from __future__ import annotations

from pathlib import Path

from prefixkit.sdk import PrefixkitError

__all__ = [
    "DeploymentConfigError",
    "EngineConfigError",
    "EngineInstallError",
    "GatewayConfigError",
    "ModelPrepareError",
    "PortInUseError",
    "ReplicaStartError",
    "RouterStartError",
    "StaleBuildError",
    "TraceError",
    "WarmupError",
]


class EngineConfigError(PrefixkitError, ValueError):
    """An engine configuration that would fail at launch, caught before launching (odd
    CPU block size, GPU-only option on CPU, missing model or interpreter).

    `field`: the offending setting, an `EngineConfig` field (``block_size``, ``model``,
    ``python``...) or a command-line option (``--model``); when the message lists several
    problems, the first one's. `value`: its value (None when the setting is missing)."""

    def __init__(self, message: str, *, field: str, value: object = None) -> None:
        super().__init__(message)
        self.field = field
        self.value = value


class DeploymentConfigError(PrefixkitError, ValueError):
    """A deployment whose parts do not fit together (ports that collide, a router option
    without that router, the precise router without KV events or a reproducible hash).

    `parts`: the settings in conflict (e.g. ``("port", "router_port")``, ``("router",
    "kv_events")``), the first problem's when the message lists several; `port`: the
    port two parts would share (None when no port is involved)."""

    def __init__(self, message: str, *, parts: tuple[str, ...], port: int | None = None) -> None:
        super().__init__(message)
        self.parts = parts
        self.port = port


class GatewayConfigError(PrefixkitError, ValueError):
    """Tenant API keys or the salt secret are missing or malformed.

    `setting`: the configuration item at fault (``tenants``, ``secret``,
    ``PREFIXKIT_TENANT_KEYS``, ``PREFIXKIT_SALT_SECRET``, ``tenant_ids``); `tenant`: the
    tenant concerned, if one; `path`: the tenants file, if one. API keys and the secret
    are never carried."""

    def __init__(
        self,
        message: str,
        *,
        setting: str,
        tenant: str | None = None,
        path: Path | None = None,
    ) -> None:
        super().__init__(message)
        self.setting = setting
        self.tenant = tenant
        self.path = path


class TraceError(PrefixkitError, ValueError):
    """A trace file cannot be read: wrong shape, missing field, or no tokenizer.

    `path`: the trace file; `line`: the 1-based line at fault (None when the file as a
    whole is, or the tokenizer its prompts need)."""

    def __init__(self, message: str, *, path: Path, line: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line


class EngineInstallError(PrefixkitError, RuntimeError):
    """The embedded vLLM engine, or the Ray engine, could not be installed or does not pass
    verification.

    `venv`: the engine's virtualenv; `step`: the step that failed (e.g. ``"[3/5]
    installing torch==2.13.0 (CPU)"``, ``"verifying"``); `output_tail`: the last lines of
    the failed command's output ('' when there is none)."""

    def __init__(self, message: str, *, venv: Path, step: str, output_tail: str = "") -> None:
        super().__init__(message)
        self.venv = venv
        self.step = step
        self.output_tail = output_tail


class ModelPrepareError(PrefixkitError, RuntimeError):
    """The embedded model could not be prepared (converter environment or conversion).

    `step`: the step that failed; `output_tail`: the last lines of its output ('' when
    there is none)."""

    def __init__(self, message: str, *, step: str, output_tail: str = "") -> None:
        super().__init__(message)
        self.step = step
        self.output_tail = output_tail


class ReplicaStartError(PrefixkitError, RuntimeError):
    """A replica exited, or did not answer /health in time; the message ends with its log tail.

    `replica`: its index (None when the replicas are not told apart, as on Ray); `url`:
    its base URL (or the deployment's); `log_tail`: the last lines of its log."""

    def __init__(self, message: str, *, replica: int | None, url: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.replica = replica
        self.url = url
        self.log_tail = log_tail


class PortInUseError(PrefixkitError, RuntimeError):
    """A port the deployment needs is taken by another process.

    `port`: the port; `host`: the address it was to be bound on."""

    def __init__(self, message: str, *, port: int, host: str) -> None:
        super().__init__(message)
        self.port = port
        self.host = host


class RouterStartError(PrefixkitError, RuntimeError):
    """A router (SMG, or a worker of the precise router) exited or did not become ready
    during start-up.

    `router`: which router (``"smg"`` or ``"precise"``); `url`: where it was to answer; `log_tail`: the
    last lines of its log ('' when it has none)."""

    def __init__(self, message: str, *, router: str, url: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.router = router
        self.url = url
        self.log_tail = log_tail


class StaleBuildError(PrefixkitError, ImportError):
    """A compiled module was built from a source that has changed since: rebuild.

    `modules`: the stale modules' dotted names; `sources`: their .py files."""

    def __init__(
        self, message: str, *, modules: tuple[str, ...], sources: tuple[Path, ...]
    ) -> None:
        super().__init__(message)
        self.modules = modules
        self.sources = sources


class WarmupError(PrefixkitError, RuntimeError):
    """A warm-up request failed: its replica or gateway is unreachable or answered an error,
    or a prompt has nothing to warm.

    `url`: the target's URL (None for a prompt with nothing to warm); `status`: the HTTP
    status it answered (None when it did not answer); `prompt`: the prompt version
    concerned (``"support@v4"``), if one."""

    def __init__(
        self,
        message: str,
        *,
        url: str | None,
        status: int | None = None,
        prompt: str | None = None,
    ) -> None:
        super().__init__(message)
        self.url = url
        self.status = status
        self.prompt = prompt
