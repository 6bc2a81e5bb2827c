"""The local miss explanation: the static-prefix guard's memory of each prompt name's last
request names what changed when a response reads fewer cached tokens than it should."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from prefixkit.sdk import CacheStats, MissReason, Prompt, Segment, StaticPrefixGuard
from prefixkit.sdk.miss_explanation import MAX_BLOCKS

TEXTS = st.text(alphabet="abcdefgh ", min_size=1, max_size=40).map(str.strip).filter(bool)


def anthropic(cached: int, written: int, uncached: int = 20) -> CacheStats:
    return CacheStats.from_usage(
        {
            "input_tokens": uncached,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": written,
        }
    )


def prompt(statics: list[str], question: str = "Hi", name: str = "support") -> Prompt:
    return Prompt(
        system=[Segment.static(text, name=f"part{i}") for i, text in enumerate(statics)],
        messages=[Segment.dynamic(question)],
        name=name,
    )


def test_the_first_request_of_a_name_explains_nothing() -> None:
    guard = StaticPrefixGuard()
    assert guard.observe(prompt(["a"]), anthropic(0, 0), model="m", provider="anthropic") is None


def test_a_full_hit_explains_nothing() -> None:
    guard = StaticPrefixGuard()
    guard.observe(prompt(["a"]), anthropic(0, 2000), model="m", provider="anthropic", now=0)
    miss = guard.observe(
        prompt(["a"], "new question"), anthropic(2000, 0), model="m", provider="anthropic", now=1
    )
    assert miss is None


def test_a_changed_static_segment_is_named_with_the_tokens_lost() -> None:
    guard = StaticPrefixGuard()
    guard.observe(
        prompt(["rules", "Today is Monday."]),
        anthropic(0, 2000),
        model="m",
        provider="anthropic",
        now=0,
    )
    miss = guard.observe(
        prompt(["rules", "Today is Tuesday."]),
        anthropic(0, 2000),
        model="m",
        provider="anthropic",
        now=1,
    )
    assert miss is not None
    assert (miss.reason, miss.source, miss.segment) == (MissReason.STATIC_TEXT, "local", "part1")
    assert miss.missed_tokens == 2000
    assert "part1" in miss.detail


def test_a_model_switch_is_named() -> None:
    guard = StaticPrefixGuard()
    guard.observe(prompt(["a"]), anthropic(0, 2000), model="one", provider="anthropic", now=0)
    miss = guard.observe(
        prompt(["a"]), anthropic(0, 2000), model="two", provider="anthropic", now=1
    )
    assert miss is not None and miss.reason is MissReason.MODEL


def test_tools_in_another_order_are_named_as_such() -> None:
    tools = [{"name": "search", "description": "s"}, {"name": "fetch", "description": "f"}]
    first = Prompt(tools=tools, system="rules", name="agent", sort_tools=False)
    second = Prompt(tools=tools[::-1], system="rules", name="agent", sort_tools=False)
    guard = StaticPrefixGuard()
    guard.observe(first, anthropic(0, 3000), model="m", provider="anthropic", now=0)
    miss = guard.observe(second, anthropic(0, 3000), model="m", provider="anthropic", now=1)
    assert miss is not None and miss.reason is MissReason.TOOLS_ORDER


def test_an_unchanged_prompt_after_the_ttl_expired() -> None:
    guard = StaticPrefixGuard()
    guard.observe(prompt(["a"]), anthropic(0, 2000), model="m", provider="anthropic", now=0)
    miss = guard.observe(
        prompt(["a"]), anthropic(0, 2000), model="m", provider="anthropic", now=301
    )
    assert miss is not None and miss.reason is MissReason.TTL_EXPIRED


def test_an_unchanged_prompt_within_the_ttl_went_to_another_replica() -> None:
    guard = StaticPrefixGuard()
    guard.observe(prompt(["a"]), anthropic(0, 2000), model="m", provider="anthropic", now=0)
    miss = guard.observe(prompt(["a"]), anthropic(0, 2000), model="m", provider="anthropic", now=10)
    assert miss is not None and miss.reason is MissReason.REPLICA


def test_a_new_question_on_openai_is_not_a_miss() -> None:
    """OpenAI caches the whole prompt; the next request's new question caps what it can read."""
    guard = StaticPrefixGuard()
    usage = {"prompt_tokens": 3000, "prompt_tokens_details": {"cached_tokens": 0}}
    guard.observe(
        prompt(["a" * 200], "q" * 100),
        CacheStats.from_usage(usage),
        model="gpt-5",
        provider="openai",
        now=0,
    )
    usage = {"prompt_tokens": 3000, "prompt_tokens_details": {"cached_tokens": 1920}}
    miss = guard.observe(
        prompt(["a" * 200], "r" * 100),
        CacheStats.from_usage(usage),
        model="gpt-5",
        provider="openai",
        now=1,
    )
    assert miss is None


def test_the_first_differing_vllm_block_is_named() -> None:
    guard = StaticPrefixGuard()
    usage = {"prompt_tokens": 64, "prompt_tokens_details": {"cached_tokens": 0}}
    guard.observe(
        prompt(["rules", "v1"]),
        CacheStats.from_usage(usage),
        model="m",
        provider="vllm",
        blocks=[b"a", b"b", b"c"],
        block_size=16,
        now=0,
    )
    usage = {"prompt_tokens": 64, "prompt_tokens_details": {"cached_tokens": 16}}
    miss = guard.observe(
        prompt(["rules", "v2"]),
        CacheStats.from_usage(usage),
        model="m",
        provider="vllm",
        blocks=[b"a", b"x", b"y"],
        block_size=16,
        now=1,
    )
    assert miss is not None
    assert (miss.reason, miss.segment, miss.block) == (MissReason.STATIC_TEXT, "part1", 1)


def test_a_miss_is_priced_where_the_model_is() -> None:
    guard = StaticPrefixGuard()
    guard.observe(
        prompt(["a"]), anthropic(0, 10_000), model="claude-sonnet-4-5", provider="anthropic", now=0
    )
    miss = guard.observe(
        prompt(["b"]), anthropic(0, 10_000), model="claude-sonnet-4-5", provider="anthropic", now=1
    )
    assert miss is not None and miss.missed_cost_usd is not None and miss.missed_cost_usd > 0


def test_the_guard_keeps_no_prompt_text_unless_asked() -> None:
    secret = "the customer's account number 1234"
    for keep in (False, True):
        guard = StaticPrefixGuard(keep_text=keep)
        guard.observe(prompt(["a"], secret), anthropic(0, 10), model="m", provider="anthropic")
        assert (secret in repr(guard._seen)) is keep


@given(
    statics=st.lists(TEXTS, min_size=1, max_size=5),
    questions=st.lists(TEXTS, min_size=2, max_size=4),
    written=st.integers(0, 100_000),
    gap=st.floats(0, 200),
)
def test_identical_prefixes_never_explain_a_miss_as_a_change(
    statics: list[str], questions: list[str], written: int, gap: float
) -> None:
    guard = StaticPrefixGuard()
    for step, question in enumerate(questions):
        miss = guard.observe(
            prompt(statics, question),
            anthropic(0, written),
            model="m",
            provider="anthropic",
            now=step * gap,
        )
        assert miss is None or miss.reason in (MissReason.TTL_EXPIRED, MissReason.REPLICA)


@given(statics=st.lists(TEXTS, min_size=1, max_size=6, unique=True), data=st.data())
def test_changing_exactly_one_segment_names_exactly_that_segment(
    statics: list[str], data: st.DataObject
) -> None:
    position = data.draw(st.integers(0, len(statics) - 1))
    changed = list(statics)
    changed[position] = data.draw(TEXTS.filter(lambda t: t != statics[position]))
    guard = StaticPrefixGuard()
    guard.observe(prompt(statics), anthropic(0, 5000), model="m", provider="anthropic", now=0)
    miss = guard.observe(
        prompt(changed), anthropic(0, 5000), model="m", provider="anthropic", now=1
    )
    assert miss is not None
    assert (miss.reason, miss.segment) == (MissReason.STATIC_TEXT, f"part{position}")


@given(names=st.lists(st.text(min_size=1, max_size=8), max_size=60), bound=st.integers(1, 10))
def test_the_memory_stays_bounded(names: list[str], bound: int) -> None:
    guard = StaticPrefixGuard(max_prompts=bound)
    for name in names:
        guard.observe(prompt(["a"], name=name), anthropic(0, 10), model="m", provider="anthropic")
        guard.check(prompt(["a"], name=name))
        assert len(guard) <= bound


def test_a_long_vllm_prompt_keeps_a_bounded_number_of_short_block_digests() -> None:
    guard = StaticPrefixGuard()
    blocks = [index.to_bytes(32, "big") for index in range(MAX_BLOCKS + 100)]
    usage = {"prompt_tokens": 16 * len(blocks), "prompt_tokens_details": {"cached_tokens": 0}}
    guard.observe(
        prompt(["a"]),
        CacheStats.from_usage(usage),
        model="m",
        provider="vllm",
        blocks=blocks,
        block_size=16,
    )
    kept = guard._seen["support"].last
    assert kept is not None
    assert len(kept.blocks) == MAX_BLOCKS and {len(b) for b in kept.blocks} == {8}


def test_a_segment_moved_to_a_new_version_is_named_a_roll_out() -> None:
    def rules(version: str, text: str) -> Prompt:
        return Prompt(
            system=[Segment.versioned(text, name="rules", version=version)],
            messages=[Segment.dynamic("Hi")],
            name="support",
        )

    guard = StaticPrefixGuard()
    stats = anthropic(0, 2000)
    guard.observe(rules("v3", "Refunds up to 500."), stats, model="m", provider="anthropic", now=0)
    miss = guard.observe(
        rules("v4", "Refunds up to 800."), stats, model="m", provider="anthropic", now=1
    )
    assert miss is not None
    assert (miss.reason, miss.segment) == (MissReason.STATIC_TEXT, "rules@v4")
    assert "from rules@v3 to rules@v4" in miss.detail and "warm" in miss.detail


def test_an_unnamed_static_segment_whose_text_changed_is_not_called_a_roll_out() -> None:
    def unnamed(text: str) -> Prompt:
        return Prompt(system=[Segment.static(text)], messages=[Segment.dynamic("Hi")], name="s")

    guard = StaticPrefixGuard()
    stats = anthropic(0, 2000)
    guard.observe(unnamed("Today is Monday."), stats, model="m", provider="anthropic", now=0)
    miss = guard.observe(
        unnamed("Tomorrow is Monday."), stats, model="m", provider="anthropic", now=1
    )
    assert miss is not None
    assert "moved from" not in miss.detail


def test_losing_exactly_one_vllm_block_is_named() -> None:
    """Blocks are the unit vLLM caches: one whole block lost is a miss, not rounding."""
    guard = StaticPrefixGuard()
    full = {"prompt_tokens": 64, "prompt_tokens_details": {"cached_tokens": 48}}
    for at, (statics, blocks) in enumerate(
        [(["rules", "v1"], [b"a", b"b", b"c", b"d"]), (["rules", "v1"], [b"a", b"b", b"c", b"d"])]
    ):
        guard.observe(
            prompt(statics),
            CacheStats.from_usage(full),
            model="m",
            provider="vllm",
            blocks=blocks,
            block_size=16,
            now=at,
        )
    one_short = {"prompt_tokens": 64, "prompt_tokens_details": {"cached_tokens": 32}}
    miss = guard.observe(
        prompt(["rules", "v2"]),
        CacheStats.from_usage(one_short),
        model="m",
        provider="vllm",
        blocks=[b"a", b"b", b"x", b"y"],
        block_size=16,
        now=2,
    )
    assert miss is not None
    assert (miss.reason, miss.block, miss.missed_tokens) == (MissReason.STATIC_TEXT, 2, 16)


def test_a_prompt_named_by_its_versioned_segment_is_compared() -> None:
    """No ``name=``: the name of its versioned segment (a registry prompt's) is the name the
    guard remembers it under, as the hit-rate monitor and the telemetry count it."""
    guard = StaticPrefixGuard()

    def unnamed(text: str) -> Prompt:
        system = Segment.versioned(text, version="v3", name="support")
        return Prompt(system=[system], messages=[Segment.dynamic("Hi")])

    guard.observe(
        unnamed("rules"), anthropic(0, 2000), model="claude-opus-4-1", provider="anthropic", now=0
    )
    miss = guard.observe(
        unnamed("rules, changed"),
        anthropic(0, 2000),
        model="claude-opus-4-1",
        provider="anthropic",
        now=1,
    )
    assert miss is not None and miss.reason is MissReason.STATIC_TEXT


def test_a_rewritten_unnamed_session_segment_is_named_by_the_new_text_once() -> None:
    guard = StaticPrefixGuard()

    def with_session(text: str) -> Prompt:
        return Prompt(
            system=[Segment.static("rules " * 300)],
            context=[Segment.session(text)],
            messages=[Segment.dynamic("Hi")],
            name="support",
        )

    guard.observe(with_session("AAAA"), anthropic(0, 2000), model="m", provider="anthropic", now=0)
    miss = guard.observe(
        with_session("BBBB"), anthropic(0, 2000), model="m", provider="anthropic", now=1
    )
    assert miss is not None and miss.reason is MissReason.SESSION
    assert miss.detail.startswith("the context session segment 'BBBB' differs")
    assert miss.segment == "session segment 'BBBB'"
