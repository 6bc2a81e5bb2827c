"""`prefixkit lint` on Jupyter notebooks saved in nbformat 4 layout (tests/linter/notebooks/).

The notebooks are written the way Jupyter saves them (`nbformat.write`: one
space of indentation, sorted keys, UTF-8 kept as is, a source line per item),
with outputs, execution counts, cell ids and kernel metadata.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from prefixkit.cli.main import main
from prefixkit.linter import LintConfig, NotebookError, lint_source
from prefixkit.linter.notebook import parse_notebook

NOTEBOOKS = Path(__file__).parent / "notebooks"


@pytest.fixture
def project(project: Path) -> Path:
    """The project, holding the notebooks of tests/linter/notebooks/."""
    for notebook in NOTEBOOKS.glob("*.ipynb"):
        shutil.copy(notebook, project / notebook.name)
    return project


def lint(*argv: str) -> int:
    return main(["lint", "--no-cache", *argv])


def test_findings_name_the_cell_and_the_row_in_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert lint("support_prompts.ipynb") == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("support_prompts.ipynb:cell 3:2:73: PFX004 [*] ")
    assert out[1].startswith("support_prompts.ipynb:cell 3:3:22: PFX001 ")
    # the request the value reaches is named by its cell too
    assert "reaches `system=` (cell 4, line 5)" in out[1]


def test_json_output_carries_the_cell(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lint("--format", "json", "support_prompts.ipynb")
    items = json.loads(capsys.readouterr().out)
    assert [(i["code"], i["cell"], i["location"]["row"]) for i in items] == [
        ("PFX004", 3, 2),
        ("PFX001", 3, 3),
    ]


def test_full_output_quotes_the_line_of_the_cell(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lint("--format", "full", "support_prompts.ipynb")
    out = capsys.readouterr().out
    assert "--> support_prompts.ipynb:cell 3:3:22" in out
    assert '3 | SYSTEM = f"Today is {datetime.now():%Y-%m-%d %H:%M}.' in out


def test_markdown_raw_and_non_python_cells_are_not_linted(project: Path) -> None:
    # the markdown cell says {{ current_date }}, the raw cell {now}, the %%bash cell
    # {{ not python }}: none is Python code, so none is reported or fails to parse
    text = (project / "support_prompts.ipynb").read_text(encoding="utf-8")
    findings = lint_source(text, project / "support_prompts.ipynb", LintConfig(root=project))
    assert {f.cell for f in findings} == {3}


def test_magics_are_neutralised_without_moving_rows(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # !pip, files = !ls, %load_ext, an indented %time, client?, %%time, %%writefile
    assert lint("--format", "json", "magics.ipynb") == 1
    items = json.loads(capsys.readouterr().out)
    assert [(i["code"], i["cell"], i["location"]) for i in items] == [
        ("PFX001", 2, {"row": 5, "column": 32})
    ]


def test_module_has_one_row_per_cell_row() -> None:
    notebook = parse_notebook((NOTEBOOKS / "magics.ipynb").read_text(encoding="utf-8"))
    module = notebook.module().splitlines()
    assert module[:9] == [
        "import time",
        "",
        "pass",
        "files = None",
        "pass",
        "",
        "if files:",
        "    pass",
        "pass",
    ]
    assert len(module) == sum(len(cell.lines) for cell in notebook.cells)


def test_a_cell_that_does_not_parse_is_reported_and_the_others_are_linted(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = json.loads((project / "support_prompts.ipynb").read_text(encoding="utf-8"))
    broken: dict[str, object] = {
        "cell_type": "code",
        "execution_count": None,
        "id": "x",
        "metadata": {},
    }
    document["cells"].insert(1, {**broken, "outputs": [], "source": ["def f(:\n", "    pass"]})
    (project / "support_prompts.ipynb").write_text(json.dumps(document, indent=1), "utf-8")
    lint("--format", "json", "support_prompts.ipynb")
    items = json.loads(capsys.readouterr().out)
    assert [(i["code"], i["cell"]) for i in items] == [
        ("PFX000", 2),
        ("PFX004", 4),
        ("PFX001", 4),
    ]
    assert items[0]["message"].startswith("cannot parse this cell: ")


def test_a_notebook_is_measured_by_its_code_not_its_outputs(project: Path) -> None:
    document = json.loads((project / "support_prompts.ipynb").read_text(encoding="utf-8"))
    image = {"data": {"image/png": "A" * 20_000}, "metadata": {}, "output_type": "display_data"}
    document["cells"][3]["outputs"].append(image)
    (project / "support_prompts.ipynb").write_text(json.dumps(document, indent=1), "utf-8")
    (project / "pyproject.toml").write_text(
        "[tool.prefixkit.lint]\nmax-file-size = 10000\n", encoding="utf-8"
    )
    assert lint("support_prompts.ipynb") == 1  # 24 kB of JSON, 1 kB of code: linted
    (project / "pyproject.toml").write_text(
        "[tool.prefixkit.lint]\nmax-file-size = 500\n", encoding="utf-8"
    )
    assert lint("support_prompts.ipynb") == 0  # its code is over 500 bytes: skipped


def test_fix_changes_only_the_fixed_source_line(project: Path) -> None:
    path = project / "support_prompts.ipynb"
    before = path.read_bytes()
    assert lint("--fix", "support_prompts.ipynb") == 1  # the clock has no fix
    after = path.read_bytes()
    changed = [
        (old, new)
        for old, new in zip(before.splitlines(), after.splitlines(), strict=True)
        if old != new
    ]
    assert changed == [
        (
            b'    "TOOLS = [{\\"name\\": name, \\"input_schema\\": {\\"type\\": \\"object\\"}}'
            b' for name in TOOL_NAMES]\\n",',
            b'    "TOOLS = [{\\"name\\": name, \\"input_schema\\": {\\"type\\": \\"object\\"}}'
            b' for name in sorted(TOOL_NAMES)]\\n",',
        )
    ]
    assert after.endswith(b"}\n")
    assert "café".encode() in after  # outputs keep their UTF-8 as Jupyter wrote it


def test_fix_is_idempotent(project: Path) -> None:
    path = project / "support_prompts.ipynb"
    lint("--fix", "support_prompts.ipynb")
    once = path.read_bytes()
    lint("--fix", "support_prompts.ipynb")
    assert path.read_bytes() == once


def test_fix_keeps_an_indent_of_two_and_escaped_unicode(project: Path) -> None:
    # a notebook saved by another tool: indent 2, \u escapes, a cell source as one string
    document = json.loads((project / "support_prompts.ipynb").read_text(encoding="utf-8"))
    document["cells"][2]["source"] = "".join(document["cells"][2]["source"])
    path = project / "other.ipynb"
    before = json.dumps(document, indent=2, ensure_ascii=True)
    path.write_text(before, encoding="utf-8")
    lint("--fix", "other.ipynb")
    after = path.read_text(encoding="utf-8")
    assert after == before.replace("for name in TOOL_NAMES]", "for name in sorted(TOOL_NAMES)]")


def test_noqa_in_a_cell_silences_its_line(project: Path) -> None:
    document = json.loads((project / "magics.ipynb").read_text(encoding="utf-8"))
    source = document["cells"][1]["source"]
    source[-1] = source[-1] + "  # noqa: PFX001"
    (project / "magics.ipynb").write_text(json.dumps(document, indent=1), encoding="utf-8")
    assert lint("magics.ipynb") == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"cells": [', "not valid JSON (line 1, column 12"),
        ('{"metadata": {}}', "no `cells` list"),
        ('{"cells": [], "nbformat": 3}', "nbformat 3 is not supported"),
    ],
)
def test_unreadable_notebook_is_a_finding_not_a_crash(
    project: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    (project / "broken.ipynb").write_text(text, encoding="utf-8")
    assert lint("--format", "json") == 1
    captured = capsys.readouterr()
    items = json.loads(captured.out)
    broken = [i for i in items if i["filename"] == "broken.ipynb"]
    assert [i["code"] for i in broken] == ["PFX000"]
    assert expected in broken[0]["message"]
    assert {i["filename"] for i in items} >= {"magics.ipynb", "support_prompts.ipynb"}
    assert "Traceback" not in captured.err


def test_a_notebook_error_names_the_notebook() -> None:
    with pytest.raises(NotebookError) as caught:
        parse_notebook('{"cells": [', Path("analysis.ipynb"))
    assert (caught.value.path, caught.value.cell) == (Path("analysis.ipynb"), None)


def test_a_notebook_error_in_one_cell_names_the_cell() -> None:
    text = json.dumps({"cells": [{"cell_type": "markdown", "source": ""}, ["x = 1"]]})
    with pytest.raises(NotebookError) as caught:
        parse_notebook(text, Path("analysis.ipynb"))
    assert (caught.value.path, caught.value.cell) == (Path("analysis.ipynb"), 2)


def test_a_notebook_in_another_language_has_nothing_to_lint(project: Path) -> None:
    document = json.loads((project / "magics.ipynb").read_text(encoding="utf-8"))
    document["metadata"]["kernelspec"]["language"] = "R"
    document["metadata"]["language_info"]["name"] = "R"
    (project / "magics.ipynb").write_text(json.dumps(document), encoding="utf-8")
    assert lint("magics.ipynb") == 0


def test_checkpoints_are_not_linted(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / ".ipynb_checkpoints").mkdir()
    shutil.move(project / "magics.ipynb", project / ".ipynb_checkpoints" / "magics.ipynb")
    lint()
    assert ".ipynb_checkpoints" not in capsys.readouterr().out


def test_a_shell_line_continued_with_a_backslash_is_neutralised_whole() -> None:
    cell: dict[str, object] = {
        "cell_type": "code",
        "metadata": {},
        "outputs": [],
        "execution_count": None,
    }
    source = ["!pip install -q \\\n", "    anthropic==0.40.0 \\\n", "    httpx\n", "x = 1"]
    notebook = parse_notebook(json.dumps({"cells": [{**cell, "source": source}], "nbformat": 4}))
    assert notebook.module() == "pass\n\n\nx = 1\n"


def _notebook(*cells: tuple[list[str], dict[str, object]]) -> str:
    base: dict[str, object] = {"cell_type": "code", "outputs": [], "execution_count": None}
    return json.dumps(
        {"cells": [{**base, "source": s, "metadata": m} for s, m in cells], "nbformat": 4}
    )


def test_a_cell_is_parsed_on_its_own_so_its_error_does_not_spill_into_the_next(
    tmp_path: Path,
) -> None:
    # a function with only a comment: CPython would blame the next cell's first line
    text = _notebook(
        (["def get_price(company):\n", "    # look it up"], {}),
        (["print('hi')\n", "x = 'unterminated\n"], {}),
        (["y = 1"], {}),
    )
    findings = lint_source(text, tmp_path / "nb.ipynb", LintConfig(root=tmp_path))
    assert [(f.code, f.cell, f.start.row) for f in findings] == [("PFX000", 1, 2), ("PFX000", 2, 2)]
    assert "detected at line 2" in findings[1].message


def test_automagic_installs_and_cells_marked_as_another_language_are_not_python(
    tmp_path: Path,
) -> None:
    text = _notebook(
        (["pip install anthropic\n", "conda install -y numpy"], {}),
        (
            ["This cell is prose, marked plaintext by VS Code."],
            {"vscode": {"languageId": "plaintext"}},
        ),
    )
    assert lint_source(text, tmp_path / "nb.ipynb", LintConfig(root=tmp_path)) == []


def _declaring(version: str | None, cell: str) -> str:
    document = json.loads(_notebook(([cell], {})))
    if version is not None:
        document["metadata"] = {"language_info": {"name": "python", "version": version}}
    return json.dumps(document)


@pytest.mark.parametrize("version", ["3.13.2", None])
def test_newer_grammar_parses_in_a_notebook_declaring_a_newer_python_or_none(
    tmp_path: Path, version: str | None
) -> None:
    text = _declaring(version, 'row = {"k": 1}\nprint(f"value: {row["k"]}")\n')
    assert lint_source(text, tmp_path / "nb.ipynb", LintConfig(root=tmp_path)) == []


def test_newer_grammar_is_an_error_in_a_notebook_declaring_an_older_python(
    tmp_path: Path,
) -> None:
    text = _declaring("3.8.10", "print(f\"{'\\n'.join(['a', 'b'])}\")\n")
    (finding,) = lint_source(text, tmp_path / "nb.ipynb", LintConfig(root=tmp_path))
    assert finding.code == "PFX000"
    assert "on Python 3.8, the version the notebook declares" in finding.message
