"""PFX101 reads a prompt template as what it renders: properties over generated templates."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from prefixkit.linter import Finding, LintConfig, lint_source
from prefixkit.linter.rules.pfx101_templates import names, scan
from prefixkit.sdk.tokenizer import TiktokenTokenizer

ROOT = Path("/prefixkit-property-project")  # never written: lint_source reads the text given
CONFIG = LintConfig(root=ROOT, select=("PFX101",))

# Names from every class PFX101 tells apart: volatile, identity, request content, stable.
NAMES = st.sampled_from(
    [
        "current_date",
        "now",
        "timestamp",
        "request_uuid",
        "user.name",
        "customer_email",
        "session_id",
        "user_question",
        "issue_context",
        "user_goal",
        "product_name",
        "tone",
        "runtime.date",
    ]
)
STATIC = st.text(alphabet="abcdefghij klmnop,.:;\n", max_size=120)
SUFFIXES = st.sampled_from([".j2", ".md", ".txt"])


def _placeholder(name: str, style: int, suffix: str) -> str:
    if suffix == ".j2":
        return [f"{{{{ {name} }}}}", f"{{% if {name} %}}x{{% endif %}}", f"{{{{ {name} | e }}}}"][
            style % 3
        ]
    return [f"{{{{ {name} }}}}", f"${{{name}}}", f"{{{name}}}"][style % 3]


@st.composite
def templates(draw: st.DrawFn) -> tuple[str, str]:
    """A template (its text and file suffix): static text and placeholders, interleaved."""
    suffix = draw(SUFFIXES)
    parts = []
    for _ in range(draw(st.integers(0, 5))):
        parts.append(draw(STATIC))
        parts.append(_placeholder(draw(NAMES), draw(st.integers(0, 2)), suffix))
    parts.append(draw(STATIC))
    return "".join(parts), suffix


def lint(text: str, suffix: str) -> list[Finding]:
    return lint_source(text, ROOT / "prompts" / f"system{suffix}", CONFIG)


def placeholders(findings: list[Finding]) -> list[str]:
    """What each finding reports: the placeholder it quotes."""
    return [finding.message.split("`")[1] for finding in findings]


@given(
    templates(),
    st.lists(NAMES, min_size=1, max_size=3),
    st.integers(0, 2),
    st.integers(0, 10_000),
    st.booleans(),
)
def test_a_comment_holding_any_placeholder_never_adds_a_finding(
    template: tuple[str, str], inside: list[str], style: int, where: int, html: bool
) -> None:
    text, suffix = template
    body = " ".join(_placeholder(name, style, suffix) for name in inside)
    comment = f"<!-- {body} -->" if html or suffix != ".j2" else f"{{# {body} #}}"
    # at a line start, so the comment splits no placeholder and no word
    starts = [0] + [i + 1 for i, char in enumerate(text) if char == "\n"]
    at = starts[where % len(starts)]
    before = placeholders(lint(text, suffix))
    after = placeholders(lint(text[:at] + comment + text[at:], suffix))
    assert after == before


@given(templates(), st.text(alphabet="abcdefghij klmnop,.:;\n", min_size=1, max_size=400))
def test_static_text_appended_after_a_reported_placeholder_keeps_it_reported(
    template: tuple[str, str], appended: str
) -> None:
    text, suffix = template
    before = [(f.start.row, f.start.column) for f in lint(text, suffix)]
    after = [(f.start.row, f.start.column) for f in lint(text + "\n" + appended, suffix)]
    assert before == [] or after == before


POLICY = (
    "Work through the checklist below in order and say which step you are on.\n"
    "Quote the policy section you rely on, with its number, and never promise a refund.\n"
)


def test_a_date_is_reported_once_static_text_follows_it_with_the_count() -> None:
    assert lint("Today is {{ current_date }}.\n", ".md") == []
    (finding,) = lint("Today is {{ current_date }}.\n" + POLICY, ".md")
    tokenizer = TiktokenTokenizer("cl100k_base")  # the SDK's offline tokenizer
    tokens = sum(tokenizer.count(line) for line in (".\n" + POLICY).splitlines(keepends=True))
    assert f"the {tokens} tokens of static text after it (to line 3)" in finding.message


def test_static_text_after_the_requests_content_is_not_counted() -> None:
    text = "Today is {{ current_date }}.\nQuestion: {{ user_question }}\n" + POLICY
    assert lint(text, ".md") == []


def test_request_content_named_for_the_user_is_not_per_user_data() -> None:
    assert lint("Goal: {{ user_goal }}\n" + POLICY, ".j2") == []
    (finding,) = lint("Plan: {{ user.plan }}\n" + POLICY, ".j2")
    assert "per-user or per-request data" in finding.message


def test_a_jinja_file_reads_filters_tests_and_strings_as_no_names() -> None:
    assert names('created | date("%Y") if note is defined else "today"') == [["created"], ["note"]]
    assert names("render(item, default=fallback)") == [["render"], ["item"], ["fallback"]]


def test_the_scanner_tells_comments_raw_blocks_and_escaped_braces_apart() -> None:
    jinja = "{# {{ now }} #}{% raw %}{{ now }}{% endraw %}{{ now }}"
    assert [(p.kind, jinja[p.start : p.end]) for p in scan(jinja, jinja=True)] == [
        ("comment", "{# {{ now }} #}"),
        ("tag", "{% raw %}"),
        ("text", "{{ now }}"),
        ("tag", "{% endraw %}"),
        ("output", "{{ now }}"),
    ]
    generic = 'JSON {{"a": 1}} for {question} and {{ .Date }}'
    assert [(p.kind, p.expression) for p in scan(generic, jinja=False)] == [
        ("text", ""),
        ("output", "question"),
        ("text", ""),
        ("output", ".Date"),
    ]
