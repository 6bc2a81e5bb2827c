"""Output formats of `prefixkit lint`: concise, full, json, github, sarif.

All are pure functions of the findings (and, for `full`, the file texts).
JSON follows ruff's shape: a list of objects with `code`, `message`,
`filename`, `cell` (a notebook's 1-based cell number, else null), `location` /
`end_location` (`{row, column}`, 1-based; in a notebook, within the cell),
`fix` (null or `{applicability, message, edits}`) and `url`. SARIF is version
2.1.0 with one run whose driver lists every rule. A notebook's findings read
`nb.ipynb:cell 3:12:5` in the text formats.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .finding import Finding, Position
from .summary import RunSummary

__all__ = ["FORMATS", "render", "render_statistics", "source_key"]

FORMATS = ("concise", "full", "json", "github", "sarif")
_DOCS_URL = "https://github.com/prefixkit/prefixkit/blob/main/docs/rules.md"
_SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _url(code: str) -> str:
    return f"{_DOCS_URL}#{code.lower()}"


def _location(position: Position) -> dict[str, int]:
    return {"row": position.row, "column": position.column}


def _marker(f: Finding, unsafe_fixes: bool) -> str:
    return " [*]" if f.fix is not None and f.fix.applies(unsafe_fixes) else ""


def _concise(findings: Sequence[Finding], unsafe_fixes: bool) -> str:
    lines = [f"{f.location}: {f.code}{_marker(f, unsafe_fixes)} {f.message}" for f in findings]
    return "\n".join(lines + _summary(findings, unsafe_fixes))


def _summary(findings: Sequence[Finding], unsafe_fixes: bool) -> list[str]:
    if not findings:
        return ["All checks passed!"]
    fixable = sum(1 for f in findings if f.fix is not None and f.fix.applies(unsafe_fixes))
    hidden = sum(1 for f in findings if f.fix is not None and not f.fix.applies(unsafe_fixes))
    plural = "s" if len(findings) != 1 else ""
    lines = [f"Found {len(findings)} error{plural}."]
    if fixable:
        lines.append(f"[*] {fixable} fixable with the `--fix` option.")
    if hidden:
        fixes = "fix" if hidden == 1 else "fixes"
        lines.append(f"{hidden} hidden {fixes} can be enabled with the `--unsafe-fixes` option.")
    return lines


def _full(findings: Sequence[Finding], texts: Mapping[str, str], unsafe_fixes: bool) -> str:
    blocks = []
    for f in findings:
        marker = _marker(f, unsafe_fixes)
        lines = [
            f"{f.code}{marker} {f.message}",
            f"  --> {f.location}",
        ]
        source = texts.get(source_key(f), "").splitlines()
        if 0 < f.start.row <= len(source):
            gutter = len(str(f.start.row))
            line = source[f.start.row - 1]
            width = (
                f.end.column - f.start.column
                if f.end.row == f.start.row
                else len(line) - f.start.column + 1
            )
            lines += [
                f"{' ' * gutter} |",
                f"{f.start.row} | {line}",
                f"{' ' * gutter} | {' ' * (f.start.column - 1)}{'^' * max(width, 1)}",
            ]
        if f.fix:
            lines.append(f"  = help: {f.fix.message}")
        blocks.append("\n".join(lines))
    return "\n\n".join([*blocks, "\n".join(_summary(findings, unsafe_fixes))])


def _json_object(f: Finding) -> dict[str, Any]:
    fix = None
    if f.fix is not None:
        fix = {
            "applicability": f.fix.applicability,
            "message": f.fix.message,
            "edits": [
                {
                    "content": edit.content,
                    "location": _location(edit.start),
                    "end_location": _location(edit.end),
                }
                for edit in f.fix.edits
            ],
        }
    return {
        "code": f.code,
        "message": f.message,
        "filename": f.filename,
        "cell": f.cell,
        "location": _location(f.start),
        "end_location": _location(f.end),
        "fix": fix,
        "url": _url(f.code),
    }


def _github(findings: Sequence[Finding]) -> str:
    def escape(text: str) -> str:
        return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    return "\n".join(
        f"::error title=prefixkit ({f.code}),file={f.filename},line={f.start.row},"
        f"col={f.start.column},endLine={f.end.row},endColumn={f.end.column}::"
        f"{escape(f'{f.location}: {f.code} {f.message}')}"
        for f in findings
    )


def _sarif(findings: Sequence[Finding]) -> dict[str, Any]:
    from .rules import ALL_RULES

    rules = [
        {
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary()},
            "helpUri": _url(rule.code),
            "properties": {"fixable": rule.fixable()},
        }
        for rule in ALL_RULES
    ]
    index = {rule.code: position for position, rule in enumerate(ALL_RULES)}
    results = [
        {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": "error",
            "message": {"text": f.message if f.cell is None else f"cell {f.cell}: {f.message}"},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": f.filename.replace("\\", "/")},
                        "region": {
                            "startLine": f.start.row,
                            "startColumn": f.start.column,
                            "endLine": f.end.row,
                            "endColumn": f.end.column,
                        },
                    }
                }
            ],
        }
        for f in findings
    ]
    return {
        "$schema": _SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "prefixkit",
                        "informationUri": _DOCS_URL,
                        "rules": rules,
                    }
                },
                "results": results,
            }
        ],
    }


def source_key(finding: Finding) -> str:
    """The key of the text a `full` finding quotes: the file, or `file:cell N`."""
    return finding.filename if finding.cell is None else f"{finding.filename}:cell {finding.cell}"


def render_statistics(fmt: str, summary: RunSummary) -> str:
    """The run's counts: a JSON object with `--format json`, else lines of text."""
    if fmt == "json":
        return json.dumps(summary.as_json(), indent=2, sort_keys=True)
    from .rules import rule_for_code

    lines = [
        f"{count:5d}\t{code}\t{rule_for_code(code).name}"
        for code, count in summary.findings.items()
    ]
    return "\n".join([*lines, summary.line()])


def render(
    fmt: str,
    findings: Sequence[Finding],
    texts: Mapping[str, str] | None = None,
    unsafe_fixes: bool = False,
) -> str:
    """The findings in output format `fmt` (one of `FORMATS`), without a final newline.

    `unsafe_fixes`: count unsafe fixes as applicable (`--unsafe-fixes`).
    """
    if fmt == "concise":
        return _concise(findings, unsafe_fixes)
    if fmt == "full":
        return _full(findings, texts or {}, unsafe_fixes)
    if fmt == "json":
        return json.dumps([_json_object(f) for f in findings], indent=2, sort_keys=True)
    if fmt == "github":
        return _github(findings)
    if fmt == "sarif":
        return json.dumps(_sarif(findings), indent=2, sort_keys=True)
    raise ValueError(f"unknown output format {fmt!r}; choose one of {', '.join(FORMATS)}")
