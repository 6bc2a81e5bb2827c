"""PromptRegistry and prefixkit.lock: versioned prompt files, verified by sha256."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prefixkit.sdk import (
    LockfileError,
    PromptDriftError,
    PromptNotFoundError,
    PromptRegistry,
    Stability,
    check_prompt_files,
    default_lock_path,
    read_lock,
    sha256_hex,
    write_lock,
)
from prefixkit.sdk.registry import prompt_digest


def test_lock_defaults_to_the_prompt_folders_parent(prompt_root: Path) -> None:
    update = write_lock(prompt_root)
    assert update.path == prompt_root.parent / "prefixkit.lock"
    assert default_lock_path(prompt_root) == update.path


def test_lock_pins_every_prompt_by_key_with_digest_and_text(prompt_root: Path) -> None:
    update = write_lock(prompt_root)
    lock = read_lock(update.path)
    assert sorted(lock.entries) == [
        "docs/pricing@2026-06",
        "greeting",
        "support@v1",
        "support@v2",
    ]
    entry = lock.entries["support@v2"]
    assert entry.file == "support@v2.md"
    assert entry.sha256 == sha256_hex(entry.text)
    assert entry.text == (prompt_root / "support@v2.md").read_text().rstrip("\n")


def test_writing_the_lock_twice_gives_identical_bytes(prompt_root: Path) -> None:
    path = write_lock(prompt_root).path
    first = path.read_bytes()
    update = write_lock(prompt_root)
    assert path.read_bytes() == first
    assert update.added == () and update.changed == () and update.removed == ()


def test_load_returns_a_static_system_segment_with_name_and_version(prompt_root: Path) -> None:
    write_lock(prompt_root)
    segment = PromptRegistry(prompt_root).load("support", version="v2")
    assert segment.stability is Stability.STATIC
    assert segment.role == "system"
    assert (segment.name, segment.version) == ("support", "v2")
    assert segment.label == "support@v2"
    assert segment.text.startswith("You are Harbor")


def test_load_finds_nested_and_unversioned_prompts(prompt_root: Path) -> None:
    write_lock(prompt_root)
    registry = PromptRegistry(prompt_root)
    assert registry.load("docs/pricing", version="2026-06").text.startswith("# Price list")
    assert registry.load("greeting").version is None


def test_line_endings_bom_and_trailing_whitespace_do_not_count_as_drift(
    prompt_root: Path,
) -> None:
    write_lock(prompt_root)
    path = prompt_root / "support@v1.md"
    text = path.read_text()
    noisy = "\ufeff" + text.replace("\n", "  \r\n") + "\r\n\r\n"
    path.write_bytes(noisy.encode("utf-8"))
    assert check_prompt_files(prompt_root) == []
    assert PromptRegistry(prompt_root).load("support", version="v1").text == text.rstrip("\n")


def test_edited_prompt_refuses_to_load_with_both_digests_and_a_diff(prompt_root: Path) -> None:
    write_lock(prompt_root)
    path = prompt_root / "support@v1.md"
    locked = prompt_digest(path.read_text())
    path.write_text(path.read_text().replace("three", "five"))
    with pytest.raises(PromptDriftError) as excinfo:
        PromptRegistry(prompt_root).load("support", version="v1")
    message = str(excinfo.value)
    assert locked in message
    assert prompt_digest(path.read_text()) in message
    assert "-Answer in plain English, in at most three short paragraphs." in message
    assert "+Answer in plain English, in at most five short paragraphs." in message
    assert "prefixkit lock" in message


def test_prompt_without_a_lock_entry_says_to_run_prefixkit_lock(prompt_root: Path) -> None:
    write_lock(prompt_root)
    (prompt_root / "support@v3.md").write_text("New instructions.\n")
    with pytest.raises(PromptDriftError, match=r"not in prefixkit\.lock: run `prefixkit lock`"):
        PromptRegistry(prompt_root).load("support", version="v3")


def test_missing_lock_file_says_to_run_prefixkit_lock(prompt_root: Path) -> None:
    with pytest.raises(LockfileError, match=r"no lock file at .*run `prefixkit lock`"):
        PromptRegistry(prompt_root).load("support", version="v1")


def test_missing_version_lists_the_versions_that_exist(prompt_root: Path) -> None:
    write_lock(prompt_root)
    with pytest.raises(PromptNotFoundError, match=r"no version 'v9'.*available: v1, v2"):
        PromptRegistry(prompt_root).load("support", version="v9")


def test_missing_prompt_lists_the_prompts_that_exist(prompt_root: Path) -> None:
    write_lock(prompt_root)
    with pytest.raises(PromptNotFoundError) as excinfo:
        PromptRegistry(prompt_root).load("billing", version="v1")
    assert "docs/pricing, greeting, support" in str(excinfo.value)


def test_malformed_lock_json_names_the_line_and_how_to_regenerate(prompt_root: Path) -> None:
    lock = default_lock_path(prompt_root)
    lock.write_text('{\n  "lock_version": 1,\n  "prompts": {,}\n}\n')
    with pytest.raises(LockfileError, match=r"line 3, column 15.*prefixkit lock"):
        read_lock(lock)


def test_lock_entry_with_a_wrong_field_names_the_key(prompt_root: Path) -> None:
    lock = default_lock_path(prompt_root)
    document = {"lock_version": 1, "prompts": {"greeting": {"file": "greeting.txt", "sha256": 7}}}
    lock.write_text(json.dumps(document))
    with pytest.raises(LockfileError, match=r"'prompts.greeting.sha256' must be a string"):
        read_lock(lock)


def test_hand_edited_locked_text_is_rejected(prompt_root: Path) -> None:
    path = write_lock(prompt_root).path
    document = json.loads(path.read_text())
    document["prompts"]["greeting"]["text"] = "Greet nobody."
    path.write_text(json.dumps(document))
    with pytest.raises(LockfileError, match=r"'prompts.greeting'.*does not match"):
        read_lock(path)


def test_check_reports_changed_unlocked_and_removed_prompts(prompt_root: Path) -> None:
    write_lock(prompt_root)
    (prompt_root / "greeting.txt").write_text("Greet the customer warmly.\n")
    (prompt_root / "support@v3.md").write_text("Newer instructions.\n")
    (prompt_root / "support@v1.md").unlink()
    drifts = {d.key: d for d in check_prompt_files(prompt_root)}
    assert {key: d.kind for key, d in drifts.items()} == {
        "greeting": "changed",
        "support@v1": "removed",
        "support@v3": "unlocked",
    }
    assert drifts["greeting"].expected != drifts["greeting"].actual
    assert "+Greet the customer warmly." in drifts["greeting"].diff


def test_registry_rereads_the_lock_after_it_changes(prompt_root: Path) -> None:
    write_lock(prompt_root)
    registry = PromptRegistry(prompt_root)
    registry.load("greeting")
    (prompt_root / "greeting.txt").write_text("Greet the customer warmly.\n")
    with pytest.raises(PromptDriftError):
        registry.load("greeting")
    write_lock(prompt_root)
    assert registry.load("greeting").text == "Greet the customer warmly."
