"""The compiled routing decision and replay (setup.py builds them with Cython): they are
what runs, they decide exactly like the Python sources, and a build older than its
sources is refused."""

import importlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from prefixkit.engine_adapter import StaleBuildError, compiled, load_trace
from prefixkit.engine_adapter.compiled import MANIFEST, check_build, stale_modules
from prefixkit.engine_adapter.replay import replay
from prefixkit.engine_adapter.replay.policies import POLICY_NAMES

from tests.conftest import MOONCAKE_TRACE

LOAD = replay.LoadParams(prefill_s_per_block=0.002, decode_s_per_token=0.03)


def test_the_installed_decision_and_replay_are_compiled_and_current() -> None:
    names = set()
    for package in compiled.COMPILED_PACKAGES:
        folder = compiled.ROOT / package
        recorded = json.loads((folder / MANIFEST).read_text())
        for name in recorded:
            module = importlib.import_module(f"prefixkit.engine_adapter.{package}.{name}")
            assert compiled.is_compiled(module.__file__), module.__file__
            names.add(f"{package}.{name}")
        assert stale_modules(folder) == []
    assert names == {
        "routing.policy",
        "routing.reuse",
        "replay.cache_sim",
        "replay.replica_load",
        "replay.policies",
        "replay.replay",
    }


@pytest.fixture
def python_sources(tmp_path: Path) -> Iterator[ModuleType]:
    """The replay module from the engine adapter's .py files alone."""
    module = compiled.python_replay(tmp_path)
    assert not compiled.is_compiled(module.__file__)
    yield module
    for name in [
        n for n in sys.modules if n == "replay_sources" or n.startswith("replay_sources.")
    ]:
        del sys.modules[name]


@pytest.mark.parametrize("capacity", [500, None])
def test_compiled_replay_decides_exactly_like_the_python_sources(
    python_sources: ModuleType, capacity: int | None
) -> None:
    trace = load_trace(MOONCAKE_TRACE).head(2000)
    for policy in POLICY_NAMES:
        fast = replay.replay(trace, policy, 8, capacity, LOAD, max_tree_blocks=2000)
        slow = python_sources.replay(
            trace, policy, 8, capacity, python_sources.LoadParams(0.002, 0.03), max_tree_blocks=2000
        )
        assert fast.assignments == slow.assignments, policy
        assert fast.as_json() == slow.as_json(), policy


def _built(tmp_path: Path, sources: dict[str, str]) -> Path:
    for name, text in sources.items():
        (tmp_path / f"{name}.py").write_text(text)
    digests = {name: compiled._digest(tmp_path / f"{name}.py") for name in sources}
    (tmp_path / MANIFEST).write_text(json.dumps(digests))
    return tmp_path


def test_a_fresh_build_is_not_stale(tmp_path: Path) -> None:
    assert stale_modules(_built(tmp_path, {"cache_sim": "A = 1\n", "replay": "B = 2\n"})) == []


def test_nothing_compiled_means_nothing_stale(tmp_path: Path) -> None:
    (tmp_path / "replay.py").write_text("B = 2\n")
    assert stale_modules(tmp_path) == []


def test_a_source_edited_or_removed_after_the_build_is_stale(tmp_path: Path) -> None:
    package = _built(tmp_path, {"cache_sim": "A = 1\n", "replay": "B = 2\n", "trace": "C = 3\n"})
    (package / "replay.py").write_text("B = 3\n")
    (package / "trace.py").unlink()
    assert stale_modules(package) == ["replay", "trace"]


def test_a_stale_build_is_refused_with_the_rebuild_command(tmp_path: Path) -> None:
    package = _built(tmp_path, {"cache_sim": "A = 1\n"})
    (package / "cache_sim.py").write_text("A = 2\n")
    with pytest.raises(StaleBuildError, match=r"cache_sim\.py changed.*`make`.*pip install -e \."):
        check_build(package)


def test_a_stale_build_carries_the_stale_modules_and_their_sources(tmp_path: Path) -> None:
    package = _built(tmp_path, {"cache_sim": "A = 1\n", "replay": "B = 2\n"})
    (package / "cache_sim.py").write_text("A = 2\n")
    with pytest.raises(StaleBuildError) as caught:
        check_build(package)
    assert caught.value.modules == (f"prefixkit.engine_adapter.{package.name}.cache_sim",)
    assert caught.value.sources == (package / "cache_sim.py",)


@pytest.mark.slow  # a Cython build of every compiled module
def test_a_failed_compile_leaves_the_python_sources_in_charge(tmp_path: Path) -> None:
    # a compiler that builds some modules, then fails on routing/reuse: the wheel
    # still builds, with no compiled module at all (they cimport each other)
    root = Path(__file__).parents[2]
    source = tmp_path / "source"
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split()
    for name in tracked:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / name, source / name)
    compiler = tmp_path / "cc"
    compiler.write_text('#!/bin/sh\ncase "$*" in *routing/reuse*) exit 1 ;; esac\nexec gcc "$@"\n')
    compiler.chmod(0o755)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(tmp_path), str(source)],
        env={**os.environ, "CC": str(compiler)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "compiling the routing decision and the trace replay failed" in output
    assert "reinstall to compile them" in output
    (wheel,) = tmp_path.glob("prefixkit-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "prefixkit/engine_adapter/replay/cache_sim.py" in names
    assert [n for n in names if n.endswith((".so", MANIFEST))] == []
