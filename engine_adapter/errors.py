"""Errors raised by the engine adapter (all under `prefixkit.sdk.errors.PrefixkitError`).

    PrefixkitError
    ├── EngineConfigError (ValueError)     an EngineConfig combination vLLM would reject or
    │                                      that cannot work (odd CPU block size, GPU-only
    │                                      option on CPU, port in use, missing model)
    ├── EngineInstallError (RuntimeError)  installing or verifying the embedded vLLM failed
    ├── ModelPrepareError (RuntimeError)   preparing the embedded model failed
    ├── ReplicaStartError (RuntimeError)   a replica exited or stayed unhealthy during start-up
    ├── GatewayConfigError (ValueError)    tenant keys or the salt secret are missing or malformed
    └── RouterUnavailableError (RuntimeError)  more than one replica asked for, no router module

Every message names the offending value and says what to change.
"""

from __future__ import annotations

from prefixkit.sdk.errors import PrefixkitError

__all__ = [
    "EngineConfigError",
    "EngineInstallError",
    "GatewayConfigError",
    "ModelPrepareError",
    "ReplicaStartError",
    "RouterUnavailableError",
]


class EngineConfigError(PrefixkitError, ValueError):
    """An engine configuration that would fail at launch, caught before launching."""


class EngineInstallError(PrefixkitError, RuntimeError):
    """The embedded vLLM engine could not be installed or does not pass verification."""


class ModelPrepareError(PrefixkitError, RuntimeError):
    """The embedded model could not be prepared (converter environment or conversion)."""


class ReplicaStartError(PrefixkitError, RuntimeError):
    """A replica exited, or did not answer /health in time; the message ends with its log tail."""


class GatewayConfigError(PrefixkitError, ValueError):
    """Tenant API keys or the salt secret are missing or malformed."""


class RouterUnavailableError(PrefixkitError, RuntimeError):
    """Several replicas were requested but no router module is available to put in front."""
