"""`prefixkit lsp`: the linter as a Language Server Protocol server (pygls, over stdio).

An editor starts `prefixkit lsp` and sends it the documents it opens. The server lints
each Python or prompt file's current text (the editor's buffer, not the file on disk) on
open, change and save, with the settings `prefixkit lint` would use for that path (the
nearest `[tool.prefixkit.lint]` or `prefixkit.toml` above it), and publishes one
diagnostic per finding: the rule code, the message, the finding's span. A file the
command line leaves out with `--force-exclude` (an excluded path, test code, a Markdown
file outside the prompt globs, one over `max-file-size`) gets no diagnostics.

Code actions, for the findings under the cursor: the finding's fix as a workspace edit
(an unsafe fix says so in its title), and, in Python, "ignore" through a `# noqa: CODE`
comment at the end of the finding's line (never inside a multi-line string). Prompt
files get no ignore action: any comment there is part of the prompt and of its lock hash.

Text that does not parse is one PFX000 diagnostic, as on the command line; settings or a
lock that cannot be read are one error diagnostic at the top of the document, naming the
problem. Closing a document clears its diagnostics. Saving any document lints every open
one again (an analysis may follow imports into the saved file; the saved file may be the
settings or the lock).

pygls and lsprotocol come with the `lint` extra; `prefixkit lsp` checks for them before
importing this module.
"""

from __future__ import annotations

import importlib.metadata
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types
from prefixkit.sdk import PrefixkitError
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from .config import ConfigResolver
from .discovery import discover, file_kind, is_test_path, relative_to_root
from .finding import Edit, Finding, Position
from .rule_codes import RULE_CODES

__all__ = [
    "SOURCE",
    "DocumentLint",
    "create_server",
    "lint_document",
    "noqa_edit",
    "run_stdio",
]

SOURCE = "prefixkit"
_LINTED_KINDS = frozenset({"python", "prompt"})
_TEMPLATE_SYNTAX = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)
_NOQA = re.compile(
    r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*))?", re.IGNORECASE
)


@dataclass(frozen=True)
class DocumentLint:
    """What the server found in one version of a document.

    `problem` is the message of settings or a lock that could not be read (then there
    are no findings); `kind` is `python`, `prompt` or None for a file not linted.
    """

    version: int | None
    kind: str | None
    findings: tuple[Finding, ...] = ()
    problem: str | None = None


def lint_document(path: Path, text: str, version: int | None = None) -> DocumentLint:
    """Lint `text` as the file at `path`, as `prefixkit lint --force-exclude path` would
    lint that text. A file not on disk yet is judged by its name (exclude patterns
    apply once it is saved).

    A `PrefixkitError` (invalid settings, a malformed lock) becomes `problem`.
    """
    # the rules and libcst load on the first lint, not before the editor's handshake
    from .lint_file import lint_source

    try:
        resolver = ConfigResolver(frozenset(RULE_CODES))
        config = resolver.for_path(path)
        if path.is_file():
            targets = discover([path], resolver, force_exclude=True).targets
            kind = targets[0].kind if targets else None
        elif not config.include_tests and is_test_path(relative_to_root(path, config.root)):
            kind = None  # not on disk yet: its name says whether it is test code
        else:
            kind = file_kind(path, config)
        if kind not in _LINTED_KINDS or len(text.encode("utf-8")) > config.max_file_size:
            return DocumentLint(version, None)
        findings = lint_source(text, path, config)  # its kind: what `path` says, as here
    except PrefixkitError as error:
        return DocumentLint(version, None, problem=str(error))
    if kind == "python" and _is_template(text, findings):
        return DocumentLint(version, None)
    return DocumentLint(version, kind, tuple(findings))


def _syntax_error_code() -> str:
    from .rules import SYNTAX_ERROR_CODE  # loaded by the lint that made the finding

    return SYNTAX_ERROR_CODE


def _is_template(text: str, findings: list[Finding]) -> bool:
    """A `.py` file that does not parse and holds Jinja syntax is a template (as
    `prefixkit lint` skips it)."""
    return any(f.code == _syntax_error_code() for f in findings) and bool(
        _TEMPLATE_SYNTAX.search(text)
    )


def _rows_ending_inside_a_token(text: str) -> frozenset[int] | None:
    """1-based rows whose end lies inside a token (a multi-line string) or that continue
    with a backslash: a comment appended there would change the code. None: the text
    does not tokenize."""
    rows: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            rows.update(range(token.start[0], token.end[0]))
    except (tokenize.TokenError, SyntaxError):
        return None
    for row, line in enumerate(text.splitlines(), start=1):
        if line.rstrip().endswith("\\"):
            rows.add(row)
    return frozenset(rows)


def noqa_edit(text: str, finding: Finding) -> Edit | None:
    """The edit that silences `finding` in Python `text` with a `# noqa` comment.

    The comment goes at the end of the finding's first line, or its last when the first
    ends inside a string; a `# noqa: CODES` already there gets the code added. None when
    neither line can take a comment (or the text does not tokenize).
    """
    inside = _rows_ending_inside_a_token(text)
    if inside is None:
        return None
    lines = text.splitlines()
    for row in dict.fromkeys((finding.start.row, finding.end.row)):
        if row in inside or not 1 <= row <= len(lines):
            continue
        line = lines[row - 1]
        existing = _NOQA.search(line)
        if existing is not None and existing.group("codes"):
            column = existing.end("codes") + 1
            return Edit(Position(row, column), Position(row, column), f", {finding.code}")
        content = line.rstrip()
        return Edit(
            Position(row, len(content) + 1),
            Position(row, len(line) + 1),
            f"  # noqa: {finding.code}",
        )
    return None


def _range(document: TextDocument, start: Position, end: Position) -> types.Range:
    """A finding's 1-based code-point span as an LSP range in the client's encoding."""
    span = types.Range(
        start=types.Position(line=start.row - 1, character=start.column - 1),
        end=types.Position(line=end.row - 1, character=end.column - 1),
    )
    return document.position_codec.range_to_client_units(document.lines, span)


def _diagnostic(document: TextDocument, finding: Finding) -> types.Diagnostic:
    syntax = finding.code == _syntax_error_code()
    return types.Diagnostic(
        range=_range(document, finding.start, finding.end),
        message=finding.message,
        severity=types.DiagnosticSeverity.Error if syntax else types.DiagnosticSeverity.Warning,
        code=finding.code,
        source=SOURCE,
    )


def _problem_diagnostic(problem: str) -> types.Diagnostic:
    top = types.Position(line=0, character=0)
    return types.Diagnostic(
        range=types.Range(start=top, end=top),
        message=f"prefixkit cannot lint this file: {problem}",
        severity=types.DiagnosticSeverity.Error,
        source=SOURCE,
    )


def _overlaps(a: types.Range, b: types.Range) -> bool:
    def key(position: types.Position) -> tuple[int, int]:
        return (position.line, position.character)

    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)


def _text_edits(document: TextDocument, edits: tuple[Edit, ...]) -> list[types.TextEdit]:
    return [
        types.TextEdit(range=_range(document, edit.start, edit.end), new_text=edit.content)
        for edit in edits
    ]


def _actions(
    document: TextDocument, result: DocumentLint, requested: types.Range
) -> list[types.CodeAction]:
    actions: list[types.CodeAction] = []
    for finding in result.findings:
        diagnostic = _diagnostic(document, finding)
        if not _overlaps(diagnostic.range, requested):
            continue
        if finding.fix is not None:
            safe = finding.fix.applicability == "safe"
            note = "" if safe else " (unsafe: may change what the program sends)"
            actions.append(
                types.CodeAction(
                    title=f"{finding.code}: {finding.fix.message}{note}",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    is_preferred=safe,
                    edit=types.WorkspaceEdit(
                        changes={document.uri: _text_edits(document, finding.fix.edits)}
                    ),
                )
            )
        ignore = (
            noqa_edit(document.source, finding)
            if result.kind == "python" and finding.code != _syntax_error_code()
            else None
        )
        if ignore is not None:
            actions.append(
                types.CodeAction(
                    title=f"{finding.code}: ignore on this line (# noqa: {finding.code})",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    edit=types.WorkspaceEdit(
                        changes={document.uri: _text_edits(document, (ignore,))}
                    ),
                )
            )
    return actions


class PrefixkitLanguageServer(LanguageServer):
    """The server, with the latest lint of each open document."""

    def __init__(self) -> None:
        super().__init__(
            name="prefixkit",
            version=importlib.metadata.version("prefixkit"),
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
        )
        self.results: dict[str, DocumentLint] = {}

    def lint(self, uri: str) -> DocumentLint:
        """Lint the open document `uri` (again, unless its version was linted) and
        publish its diagnostics."""
        document = self.workspace.get_text_document(uri)
        known = self.results.get(uri)
        if known is not None and document.version is not None and known.version == document.version:
            return known
        if document.path is None or not uri.startswith("file:"):
            result = DocumentLint(document.version, None)
        else:
            try:
                result = lint_document(Path(document.path), document.source, document.version)
            except Exception as exc:  # a linter failure must not take the editor's server down
                self.window_log_message(
                    types.LogMessageParams(
                        type=types.MessageType.Error,
                        message=f"prefixkit: internal error while linting {document.path}: "
                        f"{type(exc).__name__}: {exc}",
                    )
                )
                result = DocumentLint(document.version, None)
        self.results[uri] = result
        diagnostics = (
            [_problem_diagnostic(result.problem)]
            if result.problem is not None
            else [_diagnostic(document, finding) for finding in result.findings]
        )
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=uri, diagnostics=diagnostics, version=document.version
            )
        )
        return result

    def forget(self, uri: str) -> None:
        """Drop a closed document's result and clear its diagnostics."""
        self.results.pop(uri, None)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=[])
        )

    def lint_all_again(self) -> None:
        """Lint every open document afresh (settings, a lock or an imported module
        may have changed on disk)."""
        self.results.clear()
        for uri in list(self.workspace.text_documents):
            self.lint(uri)


def create_server() -> PrefixkitLanguageServer:
    """The language server with its features registered (not started)."""
    server = PrefixkitLanguageServer()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: PrefixkitLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.lint(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: PrefixkitLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.lint(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: PrefixkitLanguageServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.lint_all_again()

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: PrefixkitLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.forget(params.text_document.uri)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]),
    )
    def code_action(
        ls: PrefixkitLanguageServer, params: types.CodeActionParams
    ) -> list[types.CodeAction]:
        uri = params.text_document.uri
        result = ls.lint(uri)
        return _actions(ls.workspace.get_text_document(uri), result, params.range)

    return server


def run_stdio() -> None:
    """Serve one editor over stdin and stdout until it sends `exit`."""
    create_server().start_io()
