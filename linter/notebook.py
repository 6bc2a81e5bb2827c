"""Jupyter notebooks (`.ipynb`, nbformat 4) as one Python module, the way ruff lints them.

The code cells are joined into one module, each cell ending with a newline,
so a row of the module is a row of exactly one cell. IPython syntax that
libcst cannot parse is neutralised without moving anything: a line magic or
shell escape (`%pip install x`, `!ls`, `files = !ls`, `obj?`) becomes `pass`
(or `files = None`) at the same indentation, and a cell whose first line is a
cell magic is blanked (`%%bash`, `%%writefile`, ...) except for the magics
that run the cell as Python (`%%time`, `%%capture`, ...), whose first line
alone is blanked. Markdown and raw cells are not code and are skipped. A cell
that does not parse is reported and left out, and the other cells are linted.
A cell is checked with the interpreter's grammar and, when the notebook
declares a newer Python (`metadata.language_info.version`) or none, with
libcst's, which covers newer grammars (PEP 701 f-strings such as
`f"{x["k"]}"`); a notebook declaring an older Python gets no such second try.

Findings on the module are mapped back to (cell, row in cell); fixes are
applied to the cells' own source and written back by replacing only the JSON
text of each changed cell's `source`, so outputs, metadata, key order and the
indentation the notebook was saved with stay byte for byte as they were.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefixkit.sdk import PrefixkitError

from .finding import Edit, Finding, Position, apply_edits

__all__ = ["Notebook", "NotebookError", "parse_notebook"]

# cell magics whose body is still Python
_PYTHON_CELL_MAGICS = frozenset(
    {"time", "timeit", "capture", "prun", "debug", "python", "python3", "ipython", "pypy"}
)
_LINE_MAGIC = re.compile(
    r"^(?P<indent>[ \t]*)(?:(?P<target>[\w.,\s\[\]]*?\w\s*=\s*)?[%!]"
    # IPython's automagic runs these without the %
    r"|(?:pip3?|conda|mamba|micromamba|uv(?:\s+pip)?)\s+(?:install|uninstall)\b)"
)
_HELP = re.compile(r"^(?P<indent>[ \t]*)[%?]*[\w.]+\?{1,2}\s*$")
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_LINE_REFERENCE = re.compile(r"\bline (\d+)\b")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")


class NotebookError(PrefixkitError, ValueError):
    """A `.ipynb` file that is not a notebook prefixkit can read.

    Attributes:
        path: the notebook, or None when its text was read without one.
        cell: the 1-based number (among all cells) of the cell at fault, or None when
            the notebook as a whole cannot be read.
    """

    def __init__(self, message: str, *, path: Path | None, cell: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.cell = cell


@dataclass(frozen=True)
class _Cell:
    index: int  # position among all cells, 0-based
    lines: tuple[str, ...]  # the cell's source, each line with its newline (last maybe not)
    span: tuple[int, int] | None  # where the JSON text of `source` is in the file
    # each item of a `source` list: (its value, its JSON text); None when a plain string
    raw_items: tuple[tuple[str, str], ...] | None


def _neutralise(lines: Sequence[str]) -> list[str]:
    """The cell's lines with IPython-only syntax replaced, one output line per line."""
    if lines and lines[0].startswith("%%"):
        name = lines[0][2:].split(maxsplit=1)[0] if lines[0][2:].strip() else ""
        if name not in _PYTHON_CELL_MAGICS:
            return ["\n" for _ in lines]
        return ["\n", *_neutralise_lines(lines[1:])]
    return _neutralise_lines(lines)


def _neutralise_lines(lines: Sequence[str]) -> list[str]:
    out = []
    continued = False  # the line before was a magic ending in a backslash
    for line in lines:
        ending = "\n" if line.endswith("\n") else ""
        body = line.rstrip("\r\n")
        out.append(ending if continued else _neutralise_line(line, body, ending))
        continued = out[-1] != line and body.endswith("\\")
    return out


def _neutralise_line(line: str, body: str, ending: str) -> str:
    magic = _LINE_MAGIC.match(body)
    if magic is not None:
        target = magic.group("target")
        replacement = f"{target}None" if target else "pass"
        return f"{magic.group('indent')}{replacement}{ending}"
    help_line = _HELP.match(body)
    if help_line is not None and not body.lstrip().startswith("#"):
        return f"{help_line.group('indent')}pass{ending}"
    return line


class _Scanner:
    """Finds where each cell's `source` value is in the notebook's JSON text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.sources: list[tuple[int, int, tuple[tuple[str, str], ...] | None]] = []

    def skip(self, index: int) -> int:
        match = _WHITESPACE.match(self.text, index)
        return match.end() if match else index

    def string(self, index: int) -> tuple[str, int]:
        """The JSON string starting at `index` and the index after it."""
        value, end = _DECODER.raw_decode(self.text, index)
        if not isinstance(value, str):
            raise ValueError(f"expected a string at offset {index}")
        return value, end

    def value(self, index: int, path: tuple[str | int, ...]) -> int:
        """Scan one JSON value starting at `index`; the index after it."""
        index = self.skip(index)
        char = self.text[index : index + 1]
        if char == "{":
            index = self.skip(index + 1)
            if self.text.startswith("}", index):
                return index + 1
            while True:
                key, index = self.string(self.skip(index))
                index = self.skip(index) + 1  # the colon
                start = self.skip(index)
                index = self.value(index, (*path, key))
                if len(path) == 2 and path[0] == "cells" and key == "source":
                    self.sources.append((start, index, self.items(start, index)))
                index = self.skip(index)
                if self.text.startswith("}", index):
                    return index + 1
                index += 1  # the comma
        if char == "[":
            index = self.skip(index + 1)
            if self.text.startswith("]", index):
                return index + 1
            position = 0
            while True:
                index = self.value(index, (*path, position))
                position += 1
                index = self.skip(index)
                if self.text.startswith("]", index):
                    return index + 1
                index += 1
        if char == '"':
            return self.string(index)[1]
        for literal in ("true", "false", "null"):
            if self.text.startswith(literal, index):
                return index + len(literal)
        number = _NUMBER.match(self.text, index)
        if number is None:
            raise ValueError(f"unexpected {char!r} at offset {index}")
        return number.end()

    def items(self, start: int, end: int) -> tuple[tuple[str, str], ...] | None:
        """Each string of a `source` list with its JSON text (None for a plain string)."""
        if self.text[start] != "[":
            return None
        found = []
        index = self.skip(start + 1)
        while index < end - 1:
            value, item_end = self.string(index)
            found.append((value, self.text[index:item_end]))
            index = self.skip(item_end)
            index = self.skip(index + 1) if self.text.startswith(",", index) else index
        return tuple(found)


@dataclass(frozen=True)
class Notebook:
    """A parsed notebook: its text, its code cells, and the Python module they make."""

    text: str
    cells: tuple[_Cell, ...]
    python: tuple[int, int] | None = None  # the Python it declares (language_info.version)
    path: Path | None = None  # the file it was read from

    def module(self, blank: frozenset[int] = frozenset()) -> str:
        """The code cells as one module (IPython syntax neutralised, rows kept); the
        cells at positions `blank` (cells that do not parse) as empty lines."""
        parts = []
        for position, cell in enumerate(self.cells):
            lines = ["\n"] * len(cell.lines) if position in blank else _neutralise(cell.lines)
            if lines and not lines[-1].endswith("\n"):
                lines[-1] += "\n"
            parts.append("".join(lines))
        return "".join(parts)

    def cell_texts(self, filename: str) -> dict[str, str]:
        """Each code cell's source keyed `filename:cell N` (N 1-based, among all cells)."""
        return {f"{filename}:cell {cell.index + 1}": "".join(cell.lines) for cell in self.cells}

    def _starts(self) -> list[int]:
        """The module row (1-based) where each code cell starts."""
        starts = []
        row = 1
        for cell in self.cells:
            starts.append(row)
            row += len(cell.lines)
        return starts

    def syntax_error(self, position: int) -> tuple[str, int, int] | None:
        """(message, module row, column) when the cell at `position` does not compile on
        its own (Jupyter runs each cell as a module of its own), else None."""
        source = "".join(_neutralise(self.cells[position].lines))
        try:
            compile(source, "<cell>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        except SyntaxError as error:
            newer = _parses_on_newer_grammar(source)
            if newer and (self.python is None or self.python > sys.version_info[:2]):
                return None
            start = self._starts()[position]
            row = min(max(error.lineno or 1, 1), max(len(self.cells[position].lines), 1))
            # the message's own "line N" counts in the cell; findings count module rows
            message = _LINE_REFERENCE.sub(
                lambda match: f"line {start + int(match.group(1)) - 1}", error.msg
            )
            if newer and self.python is not None:
                major, minor = self.python
                message += (
                    f" (on Python {major}.{minor}, the version the notebook declares;"
                    " newer Pythons accept it)"
                )
            return message, start + row - 1, max(error.offset or 1, 1)
        except ValueError:
            return None
        return None

    def position_of(self, row: int) -> int:
        """The position in `cells` of the cell holding a module row."""
        return self._locate(row)[0]

    def _locate(self, row: int) -> tuple[int, int]:
        """(position in `cells`, row in that cell) of a module row."""
        starts = self._starts()
        for position in range(len(starts) - 1, -1, -1):
            if row >= starts[position]:
                return position, row - starts[position] + 1
        return 0, row

    def map_finding(self, finding: Finding) -> Finding:
        """A finding on the module, placed in its cell (cell numbers are 1-based)."""
        if not self.cells:
            return finding
        position, start_row = self._locate(finding.start.row)
        end_position, end_row = self._locate(finding.end.row)
        if end_position != position:
            lines = self.cells[position].lines
            end_row, end_column = len(lines), len(lines[-1].rstrip("\n")) + 1
        else:
            end_column = finding.end.column
        cell_number = self.cells[position].index + 1

        def in_cell(match: re.Match[str]) -> str:
            # rules name other rows of the module ("reaches `system=` (line 17)")
            other, row = self._locate(int(match.group(1)))
            number = self.cells[other].index + 1
            return f"line {row}" if number == cell_number else f"cell {number}, line {row}"

        return Finding(
            finding.code,
            _LINE_REFERENCE.sub(in_cell, finding.message),
            finding.filename,
            Position(start_row, finding.start.column),
            Position(end_row, end_column),
            finding.fix,
            cell=cell_number,
        )

    def _in_cell(self, edit: Edit) -> tuple[int, Edit] | None:
        """(position in `cells`, the edit in cell rows), or None when it crosses cells or
        touches a neutralised line."""
        position, start_row = self._locate(edit.start.row)
        end_position, end_row = self._locate(edit.end.row)
        cell = self.cells[position]
        neutral = _neutralise(cell.lines)
        rows = range(start_row - 1, min(end_row, len(cell.lines)))
        if end_position != position or any(neutral[r] != cell.lines[r] for r in rows):
            return None
        start, end = Position(start_row, edit.start.column), Position(end_row, edit.end.column)
        return position, Edit(start, end, edit.content)

    def apply(self, fixes: Sequence[Sequence[Edit]]) -> tuple[Notebook, int]:
        """The notebook with the fixes (module edits) applied to its cells, and how many
        fixes were applied: a fix with an edit that crosses cells or touches a
        neutralised line is left out whole."""
        per_cell: dict[int, list[Edit]] = {}
        applied = 0
        for fix in fixes:
            placed = [self._in_cell(edit) for edit in fix]
            if any(item is None for item in placed):
                continue
            for item in placed:
                if item is not None:
                    per_cell.setdefault(item[0], []).append(item[1])
            applied += 1
        if not per_cell:
            return self, 0
        new_cells = list(self.cells)
        pieces: list[str] = []
        cursor = 0
        for position, cell in enumerate(self.cells):
            if position not in per_cell:
                continue
            source = apply_edits("".join(cell.lines), per_cell[position])
            lines = tuple(source.splitlines(keepends=True))
            new_cells[position] = _Cell(cell.index, lines, cell.span, cell.raw_items)
            if cell.span is None:
                raise NotebookError(
                    "cannot write back a cell whose source was not found",
                    path=self.path,
                    cell=cell.index + 1,
                )
            start, end = cell.span
            pieces += [self.text[cursor:start], _encode_source(self.text, cell, lines)]
            cursor = end
        pieces.append(self.text[cursor:])
        text = "".join(pieces)
        return parse_notebook(text, self.path), applied


def _encode_source(text: str, cell: _Cell, lines: tuple[str, ...]) -> str:
    """The JSON text for a cell's new `source`, laid out as the old one was."""
    start, end = cell.span or (0, 0)
    old = text[start:end]
    ascii_only = not any(ord(char) > 127 for char in text)
    escaped = ascii_only and "\\u" in text

    def encode(line: str) -> str:
        return json.dumps(line, ensure_ascii=escaped)

    if cell.raw_items is None:
        return encode("".join(lines))
    # unchanged lines keep their JSON text exactly; new ones are encoded
    known = dict(cell.raw_items)
    items = [known.get(line) or encode(line) for line in lines]
    raw = [item for _, item in cell.raw_items]
    if not raw:
        return "[" + ", ".join(items) + "]"
    first = old.index(raw[0])
    opening = old[:first]
    if len(raw) > 1:
        after_first = first + len(raw[0])
        separator = old[after_first : old.index(raw[1], after_first)]
    else:
        indent = opening[opening.rfind("\n") :] if "\n" in opening else " "
        separator = "," + indent
    closing = old[old.rindex(raw[-1]) + len(raw[-1]) :]
    return opening + separator.join(items) + closing


def _source_lines(source: Any, path: Path | None, cell: int) -> tuple[str, ...]:
    if isinstance(source, str):
        return tuple(source.splitlines(keepends=True))
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        # nbformat keeps a newline at the end of every item but the last; join then split
        return tuple("".join(source).splitlines(keepends=True))
    raise NotebookError(
        f"cell {cell}: `source` must be a string or a list of strings", path=path, cell=cell
    )


def _python_cell(cell: dict[str, Any]) -> bool:
    """False for a code cell an editor marks as another language (VS Code's languageId)."""
    metadata = cell.get("metadata")
    editor = metadata.get("vscode") if isinstance(metadata, dict) else None
    language = editor.get("languageId") if isinstance(editor, dict) else None
    return not isinstance(language, str) or language.lower() in ("python", "ipython")


def _parses_on_newer_grammar(source: str) -> bool:
    """Whether libcst, whose parser covers the grammars of newer Pythons than this
    interpreter's, parses the cell (imported here: reading a notebook's cells for
    output does not load the parser)."""
    import libcst as cst

    try:
        cst.parse_module(source)
    except (cst.ParserSyntaxError, RecursionError):
        return False
    return True


def _declared_python(document: dict[str, Any]) -> tuple[int, int] | None:
    """(major, minor) of `metadata.language_info.version` ("3.13.2"), or None."""
    metadata = document.get("metadata")
    info = metadata.get("language_info") if isinstance(metadata, dict) else None
    version = info.get("version") if isinstance(info, dict) else None
    match = re.match(r"(\d+)\.(\d+)", version) if isinstance(version, str) else None
    return None if match is None else (int(match.group(1)), int(match.group(2)))


def _language(document: dict[str, Any]) -> str:
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        return "python"
    for key, field_name in (("kernelspec", "language"), ("language_info", "name")):
        section = metadata.get(key)
        if isinstance(section, dict) and isinstance(section.get(field_name), str):
            return str(section[field_name]).lower()
    return "python"


def parse_notebook(text: str, path: Path | None = None) -> Notebook:
    """Read a notebook's JSON text (nbformat 4; a notebook in another language has no
    code cells to lint), from the file at `path` when known. Raises `NotebookError`
    saying what is wrong."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(
            f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "a notebook must be nbformat 4 JSON as Jupyter saves it",
            path=path,
        ) from None
    if not isinstance(document, dict) or not isinstance(document.get("cells"), list):
        raise NotebookError(
            "not a Jupyter notebook: no `cells` list at the top level (nbformat 4 is needed)",
            path=path,
        )
    if document.get("nbformat", 4) != 4:
        raise NotebookError(
            f"nbformat {document.get('nbformat')} is not supported; "
            "open and save it with Jupyter to upgrade it to nbformat 4",
            path=path,
        )
    scanner = _Scanner(text)
    try:
        scanner.value(0, ())
    except (ValueError, IndexError) as exc:
        raise NotebookError(f"cannot locate the cells' sources: {exc}", path=path) from None
    spans = iter(scanner.sources)
    cells = []
    python = _language(document) in ("python", "python3", "ipython", "ipython3")
    for index, cell in enumerate(document["cells"]):
        if not isinstance(cell, dict):
            raise NotebookError(f"cell {index + 1} is not a JSON object", path=path, cell=index + 1)
        span = next(spans, None) if "source" in cell else None
        if cell.get("cell_type") != "code" or not python or not _python_cell(cell):
            continue
        lines = _source_lines(cell.get("source", ""), path, index + 1)
        location = None if span is None else (span[0], span[1])
        cells.append(_Cell(index, lines, location, None if span is None else span[2]))
    return Notebook(text, tuple(cells), _declared_python(document), path)
