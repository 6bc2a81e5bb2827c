"""Same inputs give byte-identical prompts in every process, whatever PYTHONHASHSEED is."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

# Built from sets and dicts whose iteration order depends on the hash seed (a dict's
# keys are sent in the order written, so one built from a set is sorted first, as
# the linter's PFX003 asks).
BUILD_AND_RENDER = r"""
import hashlib, sys
from prefixkit.sdk import Prompt, Segment, canonical_json, tenant_salt
names = {"search_docs", "open_ticket", "refund", "lookup_bucket", "escalate"}
tools = [
    {"name": n, "description": f"{n} tool", "input_schema": {"type": "object",
     "properties": {p: {"type": "string"} for p in sorted({"region", "bucket", "id"})}}}
    for n in names
]
documents = {f"doc-{i}": {"title": t, "tags": sorted({"eu", "billing", "s3"})}
             for i, t in enumerate(["prices", "limits", "restore"])}
prompt = Prompt(
    tools=tools,
    system=[Segment.static("You are Harbor.\r\nBe brief.  \n\n"), Segment.static(documents)],
    context=[Segment.session(canonical_json(documents))],
    messages=[Segment.dynamic("How much is egress?")],
    name="support",
)
out = prompt.render_text() + "\0" + prompt.static_prefix_digest + "\0" + tenant_salt("acme", "k")
sys.stdout.buffer.write(hashlib.sha256(out.encode()).hexdigest().encode() + b"\n")
sys.stdout.buffer.write(out.encode())
"""


def render_in_subprocess(hash_seed: str) -> bytes:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    result = subprocess.run(
        [sys.executable, "-c", BUILD_AND_RENDER], env=env, capture_output=True, check=True
    )
    return result.stdout


@pytest.fixture(scope="module")
def reference() -> bytes:
    return render_in_subprocess("0")


@pytest.mark.parametrize("hash_seed", ["1", "2", "12345", "random"])
def test_rendering_is_byte_identical_across_hash_seeds(reference: bytes, hash_seed: str) -> None:
    assert render_in_subprocess(hash_seed) == reference


def test_rendering_in_this_process_matches_a_fresh_process(
    reference: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    buffer = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(buffer))
    exec(BUILD_AND_RENDER, {})
    assert buffer.getvalue() == reference
