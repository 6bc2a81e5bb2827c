"""`prefixkit lsp`: the linter's language server, started as a real `prefixkit lsp`
process and driven over stdio by pygls's LSP client, as an editor drives it.

One server process serves the module's tests (each on its own documents), because
starting one costs a second or two; shutting down has a process of its own.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types
from prefixkit.linter import lint_source
from pygls.lsp.client import LanguageClient

from tests.linter.conftest import write

pytestmark = pytest.mark.asyncio(loop_scope="module")

PREFIXKIT = Path(sys.executable).parent / "prefixkit"
TIMEOUT = 20.0

# The clock in a system prompt with reusable instructions after it: PFX001 at 3:22-3:33.
CLOCK = (
    "import time\n"
    "def ask(client, question):\n"
    "    system = f'Now: {time.time()}. You are a support agent. Follow the refund policy.'\n"
    "    return client.messages.create(system=system, messages=[question])\n"
)
# The same prompt without the clock: no finding.
STATIC = (
    "def ask(client, question):\n"
    "    system = 'You are a support agent. Follow the refund policy.'\n"
    "    return client.messages.create(system=system, messages=[question])\n"
)
# A set joined into a system prompt: PFX004 at 3:36, whose safe fix wraps it in sorted().
SET_ORDER = (
    "TOOLS = {'search', 'refund'}\n"
    "def ask(client, question):\n"
    "    system = 'Tools: ' + ', '.join(TOOLS) + '. You are a support agent.'\n"
    "    return client.messages.create(system=system, messages=[question])\n"
)


class Editor(LanguageClient):
    """pygls's client, keeping every publishDiagnostics it receives per document.

    (pygls's client decorators and `stop` carry no annotations: hence two type ignores.)
    """

    def __init__(self) -> None:
        super().__init__("prefixkit-tests", "1")
        self.published: dict[str, asyncio.Queue[types.PublishDiagnosticsParams]] = {}
        self.returncode: int | None = None
        self.versions: dict[str, int] = {}

        @self.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)  # type: ignore[untyped-decorator]
        def publish(client: Editor, params: types.PublishDiagnosticsParams) -> None:
            client.queue(params.uri).put_nowait(params)

    def queue(self, uri: str) -> asyncio.Queue[types.PublishDiagnosticsParams]:
        return self.published.setdefault(uri, asyncio.Queue())

    async def server_exit(self, server: asyncio.subprocess.Process) -> None:
        self.returncode = server.returncode

    async def start(self, root: Path) -> None:
        await self.start_io(str(PREFIXKIT), "lsp", cwd=root)
        await asyncio.wait_for(
            self.initialize_async(
                types.InitializeParams(
                    capabilities=types.ClientCapabilities(),
                    root_uri=root.as_uri(),
                    workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="project")],
                )
            ),
            TIMEOUT,
        )
        self.initialized(types.InitializedParams())

    async def diagnostics(self, uri: str) -> list[types.Diagnostic]:
        """The next diagnostics the server publishes for `uri`."""
        params = await asyncio.wait_for(self.queue(uri).get(), TIMEOUT)
        return list(params.diagnostics)

    async def open(self, path: Path, text: str) -> list[types.Diagnostic]:
        uri = path.as_uri()
        self.versions[uri] = 1
        self.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id="python", version=1, text=text
                )
            )
        )
        return await self.diagnostics(uri)

    async def replace(self, path: Path, text: str) -> list[types.Diagnostic]:
        uri = path.as_uri()
        self.versions[uri] += 1
        self.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(
                    uri=uri, version=self.versions[uri]
                ),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
        return await self.diagnostics(uri)

    async def actions(self, path: Path, diagnostic: types.Diagnostic) -> list[types.CodeAction]:
        answer = await asyncio.wait_for(
            self.text_document_code_action_async(
                types.CodeActionParams(
                    text_document=types.TextDocumentIdentifier(uri=path.as_uri()),
                    range=diagnostic.range,
                    context=types.CodeActionContext(diagnostics=[diagnostic]),
                )
            ),
            TIMEOUT,
        )
        return [action for action in answer or [] if isinstance(action, types.CodeAction)]


def apply(text: str, edits: Sequence[types.TextEdit]) -> str:
    """`text` with LSP edits applied (the texts here are ASCII: UTF-16 units are characters)."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(position: types.Position) -> int:
        return starts[position.line] + position.character

    for edit in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
    return text


def edits_of(action: types.CodeAction, path: Path) -> list[types.TextEdit]:
    assert action.edit is not None and action.edit.changes is not None
    return [e for e in action.edit.changes[path.as_uri()] if isinstance(e, types.TextEdit)]


def span(diagnostic: types.Diagnostic) -> tuple[int, int, int, int]:
    start, end = diagnostic.range.start, diagnostic.range.end
    return (start.line, start.character, end.line, end.character)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project without linter settings; the server's working folder."""
    root = tmp_path_factory.mktemp("lsp_project")
    write(root / "pyproject.toml", "[project]\nname = 'demo'\n")
    return root


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def editor(project: Path) -> AsyncIterator[Editor]:
    client = Editor()
    await client.start(project)
    yield client
    await client.shutdown_async(None)
    client.exit(None)
    await asyncio.wait_for(client.stop(), TIMEOUT)  # type: ignore[no-untyped-call]


async def test_opening_a_file_publishes_its_finding_with_the_rule_code_and_span(
    editor: Editor, project: Path
) -> None:
    path = write(project / "opened.py", CLOCK)
    (diagnostic,) = await editor.open(path, CLOCK)
    assert diagnostic.code == "PFX001"
    assert diagnostic.source == "prefixkit"
    assert diagnostic.severity == types.DiagnosticSeverity.Warning
    assert span(diagnostic) == (2, 21, 2, 32)  # `time.time()`, 0-based
    assert "time.time()" in diagnostic.message


async def test_the_editor_text_is_linted_not_the_file_on_disk(
    editor: Editor, project: Path
) -> None:
    path = write(project / "unsaved.py", STATIC)
    assert [d.code for d in await editor.open(path, CLOCK)] == ["PFX001"]


async def test_a_file_not_saved_yet_is_linted_too(editor: Editor, project: Path) -> None:
    assert [d.code for d in await editor.open(project / "new.py", CLOCK)] == ["PFX001"]


async def test_changing_the_text_to_the_fixed_prompt_clears_the_diagnostic(
    editor: Editor, project: Path
) -> None:
    path = write(project / "changed.py", CLOCK)
    assert len(await editor.open(path, CLOCK)) == 1
    assert await editor.replace(path, STATIC) == []


async def test_closing_a_document_clears_its_diagnostics(editor: Editor, project: Path) -> None:
    path = write(project / "closed.py", CLOCK)
    assert len(await editor.open(path, CLOCK)) == 1
    editor.text_document_did_close(
        types.DidCloseTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=path.as_uri())
        )
    )
    assert await editor.diagnostics(path.as_uri()) == []


async def test_the_fix_code_action_edit_applied_removes_the_finding(
    editor: Editor, project: Path
) -> None:
    path = write(project / "fixable.py", SET_ORDER)
    (diagnostic,) = await editor.open(path, SET_ORDER)
    assert diagnostic.code == "PFX004"
    (fix,) = [a for a in await editor.actions(path, diagnostic) if "sorted" in a.title]
    assert fix.kind == types.CodeActionKind.QuickFix
    assert fix.is_preferred  # a safe fix
    fixed = apply(SET_ORDER, edits_of(fix, path))
    assert "', '.join(sorted(TOOLS))" in fixed
    assert lint_source(fixed, path) == []
    assert await editor.replace(path, fixed) == []


async def test_the_ignore_code_action_adds_a_noqa_comment_that_silences_the_finding(
    editor: Editor, project: Path
) -> None:
    path = write(project / "ignored.py", CLOCK)
    (diagnostic,) = await editor.open(path, CLOCK)
    (ignore,) = [a for a in await editor.actions(path, diagnostic) if "noqa" in a.title]
    ignored = apply(CLOCK, edits_of(ignore, path))
    assert ignored.splitlines()[2].endswith("policy.'  # noqa: PFX001")
    assert await editor.replace(path, ignored) == []


async def test_the_ignore_code_action_adds_the_code_to_an_existing_noqa_comment(
    editor: Editor, project: Path
) -> None:
    text = CLOCK.replace("policy.'\n", "policy.'  # noqa: PFX002\n")
    path = write(project / "noqa_list.py", text)
    (diagnostic,) = await editor.open(path, text)
    (ignore,) = [a for a in await editor.actions(path, diagnostic) if "noqa" in a.title]
    ignored = apply(text, edits_of(ignore, path))
    assert ignored.splitlines()[2].endswith("policy.'  # noqa: PFX002, PFX001")


async def test_no_ignore_action_puts_a_comment_inside_a_multi_line_string(
    editor: Editor, project: Path
) -> None:
    text = (
        "import time\n"
        "def ask(client, question):\n"
        "    system = f'''You are a support agent.\n"
        "    Now: {time.time()}.\n"
        "    Follow the refund policy.'''\n"
        "    return client.messages.create(system=system, messages=[question])\n"
    )
    path = write(project / "multiline.py", text)
    (diagnostic,) = await editor.open(path, text)
    assert diagnostic.range.start.line == 3
    assert [a.title for a in await editor.actions(path, diagnostic) if "noqa" in a.title] == []


async def test_text_that_does_not_parse_is_one_pfx000_diagnostic(
    editor: Editor, project: Path
) -> None:
    path = write(project / "broken.py", "def broken(:\n")
    (diagnostic,) = await editor.open(path, "def broken(:\n")
    assert diagnostic.code == "PFX000"
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    assert diagnostic.range.start.line == 0


async def test_columns_are_utf16_code_units_by_default(editor: Editor, project: Path) -> None:
    text = CLOCK.replace("f'Now:", "f'\N{GRINNING FACE} Now:")  # 1 code point, 2 UTF-16 units
    path = write(project / "emoji.py", text)
    (diagnostic,) = await editor.open(path, text)
    assert span(diagnostic) == (2, 24, 2, 35)


async def test_the_project_settings_apply(editor: Editor, project: Path) -> None:
    write(project / "quiet" / "pyproject.toml", "[tool.prefixkit.lint]\nignore = ['PFX001']\n")
    path = write(project / "quiet" / "app.py", CLOCK)
    assert await editor.open(path, CLOCK) == []


async def test_invalid_settings_are_one_error_diagnostic_naming_the_key(
    editor: Editor, project: Path
) -> None:
    write(project / "typo" / "pyproject.toml", "[tool.prefixkit.lint]\nselct = ['PFX']\n")
    path = write(project / "typo" / "app.py", CLOCK)
    (diagnostic,) = await editor.open(path, CLOCK)
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    assert "selct" in diagnostic.message
    assert diagnostic.code is None


async def test_test_code_is_left_out_as_prefixkit_lint_leaves_it_out(
    editor: Editor, project: Path
) -> None:
    path = write(project / "tests" / "test_agent.py", CLOCK)
    assert await editor.open(path, CLOCK) == []


async def test_test_code_not_saved_yet_is_left_out_too(editor: Editor, project: Path) -> None:
    assert await editor.open(project / "tests" / "test_new.py", CLOCK) == []


async def test_a_prompt_file_gets_the_prompt_rules(editor: Editor, project: Path) -> None:
    text = (
        "You are a support agent. Today is {{ current_date }}.\n"
        "Answer in English, cite the policy section you rely on, and never promise a refund or a delivery date yourself.\n"
    )
    path = write(project / "prompts" / "support.md", text)
    (diagnostic,) = await editor.open(path, text)
    assert diagnostic.code == "PFX101"
    assert diagnostic.range.start.line == 0


async def test_saving_lints_the_open_documents_again_with_the_saved_settings(
    editor: Editor, project: Path
) -> None:
    settings = write(project / "later" / "pyproject.toml", "[project]\nname = 'later'\n")
    path = write(project / "later" / "app.py", CLOCK)
    assert [d.code for d in await editor.open(path, CLOCK)] == ["PFX001"]
    write(settings, "[tool.prefixkit.lint]\nignore = ['PFX001']\n")
    editor.text_document_did_save(
        types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=settings.as_uri())
        )
    )
    assert await editor.diagnostics(path.as_uri()) == []


async def test_shutdown_then_exit_ends_the_server_with_status_0(project: Path) -> None:
    client = Editor()
    await client.start(project)
    await asyncio.wait_for(client.shutdown_async(None), TIMEOUT)
    client.exit(None)
    await asyncio.wait_for(client.stop(), TIMEOUT)  # type: ignore[no-untyped-call]
    assert client.returncode == 0
