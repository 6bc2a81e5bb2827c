"""Tenant salts: one HMAC derivation, keyed by the given secret or PREFIXKIT_SALT_SECRET."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from prefixkit.engine_adapter import Tenants
from prefixkit.sdk import SaltError, salt_secret, tenant_salt
from prefixkit.sdk.salt import SALT_SECRET_VARIABLE

SECRET = "a-secret-of-sixteen-characters"


def test_the_salt_is_the_hmac_of_the_tenant_keyed_by_the_secret() -> None:
    expected = hmac.new(SECRET.encode(), b"acme", hashlib.sha256).hexdigest()
    assert tenant_salt("acme", SECRET) == expected


def test_without_a_secret_the_salt_is_keyed_by_the_environment_variable() -> None:
    environ = {SALT_SECRET_VARIABLE: SECRET}
    assert tenant_salt("acme", environ=environ) == tenant_salt("acme", SECRET)


def test_without_a_secret_the_process_environment_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PREFIXKIT_SALT_SECRET", SECRET)
    assert tenant_salt("acme") == tenant_salt("acme", SECRET)


def test_a_given_secret_wins_over_the_environment() -> None:
    environ = {SALT_SECRET_VARIABLE: "another-secret-entirely"}
    assert salt_secret(SECRET, environ) == SECRET.encode()


def test_the_sdk_and_the_gateway_derive_the_same_salt() -> None:
    tenants = Tenants.load(
        environ={"PREFIXKIT_TENANT_KEYS": "acme=key-acme", SALT_SECRET_VARIABLE: SECRET}
    )
    salted = tenants.salted(b'{"prompt": "hi"}', "acme")
    assert tenant_salt("acme", environ={SALT_SECRET_VARIABLE: SECRET}).encode() in salted


def test_no_secret_and_no_variable_names_both_ways_to_give_one() -> None:
    with pytest.raises(SaltError, match=r"salt_secret=\.\.\. or set PREFIXKIT_SALT_SECRET"):
        tenant_salt("acme", environ={})


def test_an_empty_secret_is_refused() -> None:
    with pytest.raises(SaltError, match="salt secret is empty"):
        tenant_salt("acme", b"")
    with pytest.raises(SaltError, match="no salt secret"):
        tenant_salt("acme", environ={SALT_SECRET_VARIABLE: ""})


def test_an_empty_tenant_is_refused() -> None:
    with pytest.raises(SaltError, match="tenant id is empty"):
        tenant_salt("", SECRET)
