"""What `pip install prefixkit` brings versus `pip install 'prefixkit[all]'`, and what
`import prefixkit.sdk` costs.

    .venv/bin/python bench/install_size.py [--runs 9] [--wheel dist/prefixkit-....whl]

1. Builds prefixkit's wheel from a copy of the tracked files of the working tree (with
   the compiled replay, as `pip install` builds it; `--wheel` reuses a built one).
2. Installs it into two throwaway virtualenvs made without pip (so only what prefixkit
   brings is counted), one with no extra and one with `[all]`, with this interpreter's
   pip (its cache makes the second run fast).
3. Prints each one's site-packages: size (sum of file sizes, .pyc included, MB = 10^6
   bytes), number of distributions (prefixkit included), the ratio, and the largest
   top-level entries of `[all]`.
4. Runs ``python -X importtime -c "import prefixkit.sdk"`` `--runs` times in each and
   prints the median cumulative time of prefixkit.sdk, and for the core the five
   imports below it with the largest median self time. With every extra installed the
   time must not grow: the SDK imports its heavy dependencies lazily.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]


def quiet(command: list[str]) -> None:
    """Run `command`; its output (setuptools' and pip's chatter) only if it fails."""
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{(result.stdout + result.stderr)[-3000:]}")


def build_wheel(work: Path) -> Path:
    source = work / "source"
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, source / name)
    quiet([*PIP, "wheel", "--no-deps", "-w", str(work / "dist"), str(source)])
    (wheel,) = (work / "dist").glob("prefixkit-*.whl")
    return wheel


def install(work: Path, name: str, requirement: str) -> Path:
    """A virtualenv without pip holding `requirement`; returns its site-packages."""
    venv = work / name
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    quiet([*PIP, "--python", str(venv / "bin" / "python"), "install", requirement])
    (site_packages,) = venv.glob("lib/python*/site-packages")
    return site_packages


@dataclass(frozen=True)
class Installed:
    bytes: int
    distributions: int
    largest: list[tuple[str, int]]


def measure(site_packages: Path) -> Installed:
    per_entry: dict[str, int] = defaultdict(int)
    for path in site_packages.rglob("*"):
        if path.is_file() and not path.is_symlink():
            per_entry[path.relative_to(site_packages).parts[0]] += path.stat().st_size
    return Installed(
        sum(per_entry.values()),
        len(list(site_packages.glob("*.dist-info"))),
        sorted(per_entry.items(), key=lambda item: -item[1])[:5],
    )


def import_times(python: Path) -> tuple[int, dict[str, int]]:
    """One `-X importtime` run: prefixkit.sdk's cumulative µs and the self µs of
    every import made under it."""
    stderr = subprocess.run(
        [str(python), "-X", "importtime", "-c", "import prefixkit.sdk"],
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    rows = []  # (self µs, cumulative µs, depth, name), children before their parent
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "[us]" in line:
            continue
        self_us, cumulative_us, label = line.removeprefix("import time:").split("|")
        name = label.rstrip().removeprefix(" ")
        depth = (len(name) - len(name.lstrip())) // 2
        rows.append((int(self_us), int(cumulative_us), depth, name.strip()))
    (at,) = [i for i, row in enumerate(rows) if row[3] == "prefixkit.sdk"]
    depth = rows[at][2]
    below = {}
    for self_us, _, row_depth, name in reversed(rows[:at]):
        if row_depth <= depth:
            break
        below[name] = self_us
    return rows[at][1], below


def median_imports(pythons: list[Path], runs: int) -> list[tuple[float, list[tuple[str, float]]]]:
    """Per interpreter: the median cumulative µs of prefixkit.sdk over `runs` runs and the
    five imports under it with the largest median self µs. The interpreters take turns,
    so that each sees the same load on a shared machine."""
    cumulative: list[list[int]] = [[] for _ in pythons]
    selves: list[dict[str, list[int]]] = [defaultdict(list) for _ in pythons]
    for _ in range(runs):
        for index, python in enumerate(pythons):
            total, below = import_times(python)
            cumulative[index].append(total)
            for name, self_us in below.items():
                selves[index][name].append(self_us)
    results = []
    for index in range(len(pythons)):
        medians = [(name, statistics.median(times)) for name, times in selves[index].items()]
        top = sorted(medians, key=lambda item: -item[1])[:5]
        results.append((statistics.median(cumulative[index]), top))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="importtime runs (median)")
    parser.add_argument("--wheel", type=Path, help="a built prefixkit wheel to install")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="prefixkit-install-size-") as tmp:
        work = Path(tmp)
        wheel = args.wheel.resolve() if args.wheel else build_wheel(work)
        print(f"wheel: {wheel.name} ({wheel.stat().st_size / 1e6:.1f} MB)")
        core_site = install(work, "core", str(wheel))
        all_site = install(work, "all", f"{wheel}[all]")
        core, everything = measure(core_site), measure(all_site)
        print()
        print(f"{'':24}{'prefixkit':>12}{'prefixkit[all]':>16}{'ratio':>8}")
        print(
            f"{'site-packages (MB)':24}{core.bytes / 1e6:12.1f}{everything.bytes / 1e6:16.1f}"
            f"{everything.bytes / core.bytes:8.1f}"
        )
        print(
            f"{'distributions':24}{core.distributions:12d}{everything.distributions:16d}"
            f"{everything.distributions / core.distributions:8.1f}"
        )
        for label, installed in (("prefixkit", core), ("prefixkit[all]", everything)):
            largest = ", ".join(f"{name} {size / 1e6:.1f}" for name, size in installed.largest)
            print(f"largest in {label} (MB): {largest}")
        (core_us, top), (all_us, _) = median_imports(
            [core_site.parents[2] / "bin" / "python", all_site.parents[2] / "bin" / "python"],
            args.runs,
        )
        print()
        print(
            f"import prefixkit.sdk, median of {args.runs} runs (-X importtime, cumulative): "
            f"{core_us:,.0f} µs with the core, {all_us:,.0f} µs with [all]"
        )
        print("top 5 imports under it (core, median self µs):")
        for name, self_us in top:
            print(f"  {self_us:>8,.0f}  {name}")


if __name__ == "__main__":
    main()
