"""Tenant keys and the salt secret: from a TOML file or the environment (no engine needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefixkit.engine_adapter.errors import GatewayConfigError
from prefixkit.engine_adapter.serving.gateway import create_gateway, load_secret, load_tenants


def test_keys_come_from_the_tenants_file(tmp_path: Path) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text('[tenants]\nacme = "k1"\nglobex = ["k2", "k3"]\n')
    assert load_tenants(path, environ={}) == {"k1": "acme", "k2": "globex", "k3": "globex"}


def test_keys_come_from_the_environment() -> None:
    environ = {"PREFIXKIT_TENANT_KEYS": "acme=k1, globex=k2"}
    assert load_tenants(None, environ) == {"k1": "acme", "k2": "globex"}


def test_file_and_environment_keys_are_merged(tmp_path: Path) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text('[tenants]\nacme = "k1"\n')
    merged = load_tenants(path, {"PREFIXKIT_TENANT_KEYS": "globex=k2"})
    assert merged == {"k1": "acme", "k2": "globex"}


def test_one_key_for_two_tenants_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text('[tenants]\nacme = "same"\nglobex = "same"\n')
    with pytest.raises(GatewayConfigError, match="already belongs to tenant 'acme'"):
        load_tenants(path, environ={})


def test_no_keys_at_all_says_how_to_configure_them() -> None:
    with pytest.raises(GatewayConfigError, match="PREFIXKIT_TENANT_KEYS"):
        load_tenants(None, environ={})


def test_malformed_environment_item_is_named() -> None:
    with pytest.raises(GatewayConfigError, match="'acme-k1' is not TENANT=KEY"):
        load_tenants(None, {"PREFIXKIT_TENANT_KEYS": "acme-k1"})


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text("[tenants\n")
    with pytest.raises(GatewayConfigError, match=r"tenants\.toml is not valid TOML"):
        load_tenants(path, environ={})


def test_secret_from_file_wins_over_environment(tmp_path: Path) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text('secret = "from-the-file-0123456789"\n')
    environ = {"PREFIXKIT_SALT_SECRET": "from-the-environment-0123"}
    assert load_secret(path, environ) == "from-the-file-0123456789"
    assert load_secret(None, environ) == "from-the-environment-0123"


def test_short_or_missing_secret_is_rejected() -> None:
    with pytest.raises(GatewayConfigError, match="PREFIXKIT_SALT_SECRET"):
        load_secret(None, {"PREFIXKIT_SALT_SECRET": "short"})
    with pytest.raises(GatewayConfigError, match="PREFIXKIT_SALT_SECRET"):
        load_secret(None, {})


def test_a_gateway_without_tenants_is_refused() -> None:
    with pytest.raises(GatewayConfigError, match="at least one API key"):
        create_gateway("http://127.0.0.1:1", {}, "secret-0123456789abcdef")
