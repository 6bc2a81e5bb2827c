"""Errors raised by the engine adapter; the whole tree of prefixkit's errors is drawn
in `prefixkit.sdk.errors`.

Configuration errors (`ValueError`: fix the input and run again, exit code 2 from the
command line) and runtime failures (`RuntimeError`: something failed while running,
exit code 3). Every message names the offending value and says what to change.
"""

from __future__ import annotations

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
    CPU block size, GPU-only option on CPU, missing model or interpreter)."""


class DeploymentConfigError(PrefixkitError, ValueError):
    """A deployment whose parts do not fit together (ports that collide, a router option
    without that router, the precise router without KV events or a reproducible hash)."""


class GatewayConfigError(PrefixkitError, ValueError):
    """Tenant API keys or the salt secret are missing or malformed."""


class TraceError(PrefixkitError, ValueError):
    """A trace file cannot be read: wrong shape, missing field, or no tokenizer."""


class EngineInstallError(PrefixkitError, RuntimeError):
    """The embedded vLLM engine could not be installed or does not pass verification."""


class ModelPrepareError(PrefixkitError, RuntimeError):
    """The embedded model could not be prepared (converter environment or conversion)."""


class ReplicaStartError(PrefixkitError, RuntimeError):
    """A replica exited, or did not answer /health in time; the message ends with its log tail."""


class PortInUseError(PrefixkitError, RuntimeError):
    """A port the deployment needs is taken by another process."""


class RouterStartError(PrefixkitError, RuntimeError):
    """The router (SMG) exited or did not become ready during start-up."""


class StaleBuildError(PrefixkitError, ImportError):
    """A compiled module was built from a source that has changed since: rebuild."""


class WarmupError(PrefixkitError, RuntimeError):
    """A warm-up request failed: its replica or gateway is unreachable or answered an error."""
