"""Properties of the SQL92 filter beyond the table: generated expressions, raw property strings, the compile cache."""

from __future__ import annotations

import gc
import traceback
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from processors.filter import ConsumerFilterCache, Sql92EvaluationError, Sql92ParseError, compile_sql92, parse
from remoting.codec.message_properties import decode_properties

NAMES = ("a", "b", "c")
TEXTS = ("1", "7", "x", "2.5", "true")

operands = st.one_of(
    st.sampled_from(NAMES),
    st.sampled_from(("1", "7", "-3", "2.5", "3000000000", "'x'", "'7'")),
)


@st.composite
def comparisons(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(NAMES))
    shape = draw(st.integers(0, 5))
    if shape == 0:
        op = draw(st.sampled_from(("=", "<>")))
        return f"{name} {op} {draw(operands)}"
    if shape == 1:
        op = draw(st.sampled_from(("<", "<=", ">", ">=")))
        return f"{name} {op} {draw(st.sampled_from(('1', '7', '-3', '2.5', '3000000000')))}"
    if shape == 2:
        word = draw(st.sampled_from(("BETWEEN", "NOT BETWEEN")))
        return f"{name} {word} 1 AND 7"
    if shape == 3:
        word = draw(st.sampled_from(("IN", "NOT IN")))
        items = draw(st.lists(st.sampled_from(("'x'", "'7'", "'1'")), min_size=1, max_size=3))
        return f"{name} {word} ({', '.join(items)})"
    if shape == 4:
        return f"{name} IS {draw(st.sampled_from(('NULL', 'NOT NULL')))}"
    return draw(st.sampled_from(("TRUE", "FALSE", "NULL", name)))


conditions = st.recursive(
    comparisons(),
    lambda inner: st.one_of(
        st.builds(lambda e: f"NOT ({e})", inner),
        st.builds(lambda left, right: f"({left}) AND ({right})", inner, inner),
        st.builds(lambda left, right: f"({left}) OR ({right})", inner, inner),
    ),
    max_leaves=8,
)
messages = st.dictionaries(st.sampled_from(NAMES), st.sampled_from(TEXTS), max_size=3)


def three_valued(expression: str, props: dict[str, str]) -> bool | str | None:
    try:
        return compile_sql92(expression).evaluate(props)
    except Sql92EvaluationError:
        return "raises"


@settings(max_examples=300, deadline=None)
@given(conditions, messages)
def test_generated_expressions_parse_render_and_evaluate_three_valued(expression: str, props: dict[str, str]) -> None:
    tree = parse(expression)
    assert parse(tree.sql()) == tree
    result = three_valued(expression, props)
    negated = three_valued(f"NOT ({expression})", props)
    if result == "raises":
        assert negated == "raises"
    else:
        assert negated == (None if result is None else not result)
        assert three_valued(f"({expression}) AND ({expression})", props) == result
        excluded_middle = three_valued(f"({expression}) OR NOT ({expression})", props)
        assert excluded_middle == (None if result is None else True)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab12.'()=<>!,-+ *\n/EINOTDLRSUBWAFL"), max_size=30))
def test_any_text_parses_or_fails_with_a_parse_error(text: str) -> None:
    try:
        tree = parse(text)
    except Sql92ParseError as error:
        assert 0 <= error.position <= len(text)
        return
    assert parse(tree.sql()) == tree
    assert parse(text + " )") == tree  # what follows a complete expression is ignored, as by SelectorParser.jj


def test_raw_properties_in_java_and_ali_ons_form_match_alike() -> None:
    f = compile_sql92("region = 'eu' AND n > 3")
    java = "region\x01eu\x02n\x015"
    ali_ons = java + "\x02"
    assert f.matches_raw(java) and f.matches_raw(ali_ons.encode()) and f.matches_raw(memoryview(java.encode()))
    assert not f.matches_raw("region\x01us\x02n\x015")
    assert not f.matches_raw("")
    assert f.properties == frozenset({"region", "n"})


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ab7x\x01\x02", max_size=24))
def test_raw_lookup_agrees_with_decoding_every_property(raw: str) -> None:
    decoded = decode_properties(raw)
    for expression in ("a = '7'", "a IS NULL", "b IS NOT NULL", "a = b", "b IN ('7', 'x\x01a')"):
        f = compile_sql92(expression)
        assert f.matches_raw(raw) == f.matches(decoded), expression
        assert f.matches_raw(raw.encode()) == f.matches(decoded), expression


def test_compiling_the_same_text_twice_shares_one_filter() -> None:
    assert compile_sql92("a = 'shared'") is compile_sql92("a = 'shared'")


def test_cache_compiles_a_subscription_version_once() -> None:
    cache = ConsumerFilterCache()
    first = cache.get("g", "T", 1, "a > 1")
    assert cache.get("g", "T", 1, "a > 1") is first
    assert cache.hits == 1
    assert cache.get("g", "T", 2, "a > 1").tree == first.tree
    assert cache.get("g", "T", 2, "a > 2").expression == "a > 2"  # same version, new text: recompiled
    assert len(cache) == 2


def test_cache_refuses_a_bad_expression_every_time() -> None:
    cache = ConsumerFilterCache()
    for _ in range(2):
        with pytest.raises(Sql92ParseError, match="position 3"):
            cache.get("g", "T", 1, "a >")


def test_cache_evicts_the_least_recently_used_subscription() -> None:
    cache = ConsumerFilterCache(capacity=2)
    cache.get("g1", "T", 1, "a > 1")
    cache.get("g2", "T", 1, "a > 1")
    cache.get("g1", "T", 1, "a > 1")  # g1 is now the most recent
    cache.get("g3", "T", 1, "a > 1")
    assert len(cache) == 2
    hits = cache.hits
    cache.get("g1", "T", 1, "a > 1")
    assert cache.hits == hits + 1
    cache.get("g2", "T", 1, "a > 1")
    assert cache.hits == hits + 1  # g2 was evicted and compiled again


def test_compiled_expressions_kept_are_bounded_by_their_size_not_only_their_count() -> None:
    """A client may send a 16 MB expression with each pull, and a new subVersion each time: keeping the last 1,024
    memoised (and 4,096 subscriptions) held gigabytes. What is kept is bounded by size too."""
    cache = ConsumerFilterCache()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for version in range(48):
            malformed = f"a{version} = = " + "x" * (1 << 20)  # 1 MB, refused at its second '='
            with pytest.raises(Sql92ParseError):
                compile_sql92(malformed)
            with pytest.raises(Sql92ParseError):
                cache.get("g", "T", version, malformed)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 24 << 20


def test_cache_needs_room() -> None:
    with pytest.raises(ValueError, match="at least one"):
        ConsumerFilterCache(capacity=0)


def test_deep_nesting_is_a_parse_error_not_a_crash() -> None:
    with pytest.raises(Sql92ParseError, match=r"nests (too deeply|deeper than)"):
        parse("(" * 2000 + "a = '1'" + ")" * 2000)
    with pytest.raises(Sql92ParseError, match="nests deeper than 200 levels"):
        parse("NOT " * 250 + "TRUE")


def test_long_chains_within_the_depth_limit_evaluate() -> None:
    chain = compile_sql92(" OR ".join(f"a = '{i}'" for i in range(150)))
    assert chain.matches({"a": "149"}) and not chain.matches({"a": "150"})
    assert compile_sql92("NOT " * 150 + "TRUE").evaluate({}) is True


def test_a_chain_of_thousands_of_or_and_and_terms_compiles_as_on_a_java_broker() -> None:
    """SelectorParser.jj reads ``x OR y OR ...`` in a loop and a Java broker evaluates the chain LogicExpression by
    LogicExpression, thousands deep on a pull thread's stack: a filter generated as a long chain of OR (IN takes
    strings only) is served. The nesting limit refused more than about 200 terms."""
    any_of = compile_sql92(" OR ".join(f"a = {i}" for i in range(3000)))
    assert any_of.matches({"a": "2999"}) and any_of.matches({"a": "0"})
    assert any_of.evaluate({"a": "3000"}) is False and any_of.evaluate({}) is None
    every = compile_sql92(" AND ".join(f"(p{i} IS NULL OR p{i} <> 'x')" for i in range(3000)))
    assert every.matches({}) and not every.matches({"p2999": "x"})
    assert every.evaluate({"p0": "y"}) is True
    nested = compile_sql92("a = 1 OR (" * 60 + "a = 2" + ")" * 60)  # a right-leaning OR chain inside parentheses
    assert nested.matches({"a": "2"}) and not nested.matches({"a": "3"})


def test_a_cached_parse_error_is_raised_afresh_so_tracebacks_do_not_pile_up() -> None:
    """The parse error of a bad expression is cached; raising that one object again on every pull chained each
    raise's frames onto its traceback, which the cache kept alive: a consumer retrying a bad SQL92 subscription grew
    the broker's memory without end."""
    cache = ConsumerFilterCache()
    raised: list[Sql92ParseError] = []
    for _ in range(50):
        for lookup in (lambda: compile_sql92("a > AND"), lambda: cache.get("g", "t", 1, "a > AND")):
            with pytest.raises(Sql92ParseError) as info:
                lookup()
            raised.append(info.value)
    assert len({id(error) for error in raised}) == len(raised)
    assert all(len(traceback.extract_tb(error.__traceback__)) <= 3 for error in raised)
    assert raised[-1].reason == raised[0].reason and raised[-1].position == raised[0].position
