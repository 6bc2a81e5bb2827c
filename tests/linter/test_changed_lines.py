"""Parsing `git diff` output into changed line sets, and keeping findings on them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from prefixkit.linter.changed_lines import ChangedLines, parse_diff
from prefixkit.linter.finding import Finding, Position

MODIFIED = """\
diff --git a/app.py b/app.py
index 1111111..2222222 100644
--- a/app.py
+++ b/app.py
@@ -3 +3 @@ def ask():
-    old = 1
+    new = 1
@@ -10,0 +11,2 @@ def other():
+    a = 1
+    b = 2
@@ -20,2 +21,0 @@
-    gone = 1
-    gone = 2
"""


def finding(filename: str, row: int, cell: int | None = None) -> Finding:
    return Finding("PFX001", "m", filename, Position(row, 1), Position(row, 2), cell=cell)


def test_added_and_modified_rows_are_changed_and_deletions_add_none() -> None:
    assert parse_diff(MODIFIED).rows == {"app.py": frozenset({3, 11, 12})}


def test_rows_are_counted_through_context_lines() -> None:
    text = (
        "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n"
        "@@ -5,4 +5,5 @@\n keep\n-drop\n+put\n keep\n+extra\n keep\n"
        "\\ No newline at end of file\n"
    )
    assert parse_diff(text).rows == {"m.py": frozenset({6, 8})}


def test_a_new_file_has_every_row_changed_and_a_deleted_one_none() -> None:
    text = (
        "diff --git a/new.py b/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/new.py\n"
        "@@ -0,0 +1,2 @@\n+x = 1\n+y = 2\n"
        "diff --git a/old.py b/old.py\ndeleted file mode 100644\n--- a/old.py\n+++ /dev/null\n"
        "@@ -1 +0,0 @@\n-z = 1\n"
    )
    assert parse_diff(text).rows == {"new.py": frozenset({1, 2})}


def test_an_added_line_that_looks_like_a_header_is_a_row() -> None:
    text = "diff --git a/p.md b/p.md\n--- a/p.md\n+++ b/p.md\n@@ -1,0 +2,1 @@\n+++ b/x\n"
    assert parse_diff(text).rows == {"p.md": frozenset({2})}


def test_quoted_paths_are_unquoted() -> None:
    text = (
        'diff --git "a/my app.py" "b/my app.py"\n--- "a/my app.py"\n+++ "b/my app\\303\\251.py"\n'
        "@@ -1 +1 @@\n-a\n+b\n"
    )
    assert parse_diff(text).rows == {"my appé.py": frozenset({1})}


def test_a_changed_notebook_and_a_binary_file_are_wholly_changed() -> None:
    text = (
        "diff --git a/nb.ipynb b/nb.ipynb\n--- a/nb.ipynb\n+++ b/nb.ipynb\n"
        '@@ -40 +40 @@\n-   "x = 1"\n+   "x = 2"\n'
        "diff --git a/logo.png b/logo.png\nBinary files a/logo.png and b/logo.png differ\n"
    )
    changed = parse_diff(text)
    assert changed.whole == {"nb.ipynb", "logo.png"}
    assert changed.changed("nb.ipynb", 1)


def test_keep_holds_findings_whose_start_row_changed() -> None:
    changed = parse_diff(MODIFIED).with_whole(["untracked.py"])
    findings = [finding("app.py", 3), finding("app.py", 4), finding("untracked.py", 99)]
    assert changed.keep(findings, lambda name: name) == [findings[0], findings[2]]


def test_keep_holds_a_notebook_finding_when_its_notebook_changed() -> None:
    changed = ChangedLines({"nb.ipynb": frozenset({40})})
    findings = [finding("nb.ipynb", 2, cell=3), finding("other.ipynb", 2, cell=3)]
    assert changed.keep(findings, lambda name: name) == [findings[0]]


@given(
    st.lists(
        st.tuples(st.integers(1, 50), st.lists(st.sampled_from("+- "), min_size=1, max_size=8)),
        max_size=6,
    )
)
def test_every_added_line_and_nothing_else_is_a_changed_row(
    hunks: list[tuple[int, list[str]]],
) -> None:
    lines = ["diff --git a/f.py b/f.py", "--- a/f.py", "+++ b/f.py"]
    expected: set[int] = set()
    start = 1
    for gap, kinds in hunks:
        start += gap
        lines.append(f"@@ -{start},9 +{start},9 @@")
        row = start
        for kind in kinds:
            lines.append(f"{kind}line")
            if kind == "+":
                expected.add(row)
            if kind != "-":
                row += 1
        start = row
    assert parse_diff("\n".join(lines) + "\n").rows == {"f.py": frozenset(expected)}
