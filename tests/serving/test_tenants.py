"""Tenants: keys and the salt secret from a TOML file or the environment, and the salt
each tenant's requests get (no engine needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prefixkit.engine_adapter import GatewayConfigError
from prefixkit.engine_adapter.serving.refused import Refused
from prefixkit.engine_adapter.serving.tenants import (
    Caller,
    Tenants,
    load_operators,
    load_secret,
    load_tenants,
)
from prefixkit.sdk import tenant_salt


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


def test_a_shared_key_error_carries_the_tenant_and_the_file(tmp_path: Path) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text('[tenants]\nacme = "same"\nglobex = "same"\n')
    with pytest.raises(GatewayConfigError) as caught:
        load_tenants(path, environ={})
    assert (caught.value.setting, caught.value.tenant, caught.value.path) == (
        "tenants",
        "globex",
        path,
    )
    assert "same" not in vars(caught.value).values()  # the API key itself is not carried


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
        Tenants({}, "secret-0123456789abcdef")


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('tenants = "key-acme"\n', "`tenants` must be a table of tenant id = API key"),
        ("[tenants]\nacme = 5\n", r"\[tenants\] acme: give an API key or a list of API keys"),
        ("[tenants]\nacme = [5]\n", "tenant id and API key must be non-empty strings"),
        ('[tenants]\nacme = {key = "k"}\n', "got dict"),
    ],
)
def test_a_malformed_tenants_table_is_a_config_error_naming_it(
    tmp_path: Path, toml: str, message: str
) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text(toml)
    with pytest.raises(GatewayConfigError, match=message):
        load_tenants(path, environ={})


def test_a_known_key_names_its_tenant_and_an_unknown_one_none() -> None:
    tenants = Tenants({"key-acme": "acme"}, "secret-0123456789abcdef")
    assert tenants.tenant_of("key-acme") == "acme"
    assert tenants.tenant_of("key-acme-but-longer") is None
    assert tenants.tenant_of("") is None


def test_a_client_salt_is_replaced_by_the_tenants_own() -> None:
    secret = "secret-0123456789abcdef"
    tenants = Tenants({"key-acme": "acme"}, secret)
    salted = tenants.salted(b'{"prompt": "hi", "cache_salt": "forged"}', "acme")
    assert json.loads(salted) == {"prompt": "hi", "cache_salt": tenant_salt("acme", secret)}
    assert json.loads(tenants.salted(b'{"cache_salt": "forged"}', None)) == {}


def test_a_body_that_is_not_a_json_object_is_never_salted_nor_passed_on() -> None:
    tenants = Tenants({"key-acme": "acme"}, "secret-0123456789abcdef")
    with pytest.raises(Refused, match="must be a JSON object, got an array"):
        tenants.salted(b"[1, 2]", "acme")


def test_operators_come_from_the_file_and_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text('[tenants]\nacme = "k1"\n[operators]\nops = "op-1"\n')
    assert load_operators(path, {"PREFIXKIT_OPERATOR_KEYS": "oncall=op-2"}) == {
        "op-1": "ops",
        "op-2": "oncall",
    }


def test_an_operator_key_is_an_operator_and_no_tenant() -> None:
    tenants = Tenants({"k1": "acme"}, "secret-0123456789abcdef", {"op-1": "ops"})
    assert tenants.caller_of("op-1") == Caller("ops", operator=True)
    assert tenants.caller_of("k1") == Caller("acme")
    assert tenants.tenant_of("op-1") is None
    assert tenants.operator_key() == "op-1"


def test_a_key_that_is_both_a_tenants_and_an_operators_is_refused() -> None:
    with pytest.raises(
        GatewayConfigError, match="belongs to tenant 'acme' and to an operator"
    ) as caught:
        Tenants({"same": "acme"}, "secret-0123456789abcdef", {"same": "ops"})
    assert caught.value.setting == "operators"


def test_a_tenants_file_is_read_from_a_path_given_as_text(tmp_path: Path) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text('secret = "from-the-file-0123456789"\n[tenants]\nacme = "k1"\n')
    assert Tenants.load(str(path), environ={}).tenant_of("k1") == "acme"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"secret = 12345678901234567\n", "`secret` must be a string"),
        (b"[tenants]\nacme = '\xff\xfe'\n", "is not UTF-8 text"),
    ],
)
def test_a_secret_or_file_that_cannot_be_read_is_named(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "tenants.toml"
    path.write_bytes(content)
    with pytest.raises(GatewayConfigError, match=message):
        Tenants.load(path, environ={"PREFIXKIT_TENANT_KEYS": "acme=k1"})


def test_tenants_never_print_their_keys_or_secret() -> None:
    shown = repr(
        Tenants({"key-acme-secret": "acme"}, "the-salt-secret-0123456789", {"op-key-x": "ops"})
    )
    assert "key-acme-secret" not in shown and "the-salt-secret" not in shown
    assert "op-key-x" not in shown
