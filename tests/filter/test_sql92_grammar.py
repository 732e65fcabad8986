"""The SQL92 grammar test table: valid expressions with their three-valued result on a sample message, malformed ones
with the parser's message and position. No broker involved."""

from __future__ import annotations

import pytest

from processors.filter import Sql92EvaluationError, Sql92ParseError, compile_sql92, parse

#: The sample message's properties (as a broker sees them: every value is text).
SAMPLE = {
    "a": "7",
    "b": "abc",
    "price": "12.5",
    "region": "eu",
    "flag": "true",
    "big": "3000000000",
    "neg": "-3",
    "quote": "it's",
    "TAGS": "TagA",
}
#: Expected when RocketMQ's evaluation throws: the message does not match.
RAISES = "raises"

VALID: list[tuple[str, bool | str | None]] = [
    # comparisons on text and numbers
    ("a = '7'", True),
    ("a = 7", True),
    ("a = 7.0", True),
    ("a > 5", True),
    ("a >= 7", True),
    ("a < 7", False),
    ("a <= 6", False),
    ("a <> 7", False),
    ("a <> '8'", True),
    ("price > 12.0", True),
    ("price > 12", RAISES),  # '12.5' is not a Java int: compare with 12.0
    ("price > 1E1", True),
    ("a > .5", True),
    ("price > a", True),  # two texts under '>' are read as doubles
    ("b > 1", RAISES),
    ("b > a", RAISES),
    ("big > 2147483647", RAISES),  # an INT literal reads the text with Integer.valueOf
    ("big > 2147483648", True),  # a LONG literal with Long.valueOf
    ("neg < -2", True),
    ("neg = -3", True),
    ("a > +5", True),
    ("-a > 1", None),  # unary minus of text is NULL
    ("quote = 'it''s'", True),
    ("A = '7'", None),  # property names are case-sensitive
    # BETWEEN
    ("a BETWEEN 1 AND 7", True),
    ("price BETWEEN 10.0 AND 20.0", True),
    ("a NOT BETWEEN 1 AND 7", False),
    ("a NOT BETWEEN 8 AND 9", True),
    ("missing BETWEEN 1 AND 2", None),
    # IN
    ("region IN ('eu', 'us')", True),
    ("region NOT IN ('eu', 'us')", False),
    ("region IN ('apac')", False),
    ("missing IN ('x')", None),
    ("missing NOT IN ('x')", None),
    # IS [NOT] NULL
    ("missing IS NULL", True),
    ("missing IS NOT NULL", False),
    ("a IS NOT NULL", True),
    ("a IS NULL", False),
    # NULL comparisons are unknown
    ("missing = 'x'", None),
    ("missing <> 'x'", None),
    ("missing > 1", None),
    # AND / OR / NOT with three-valued logic
    ("NOT (a = '7')", False),
    ("NOT (missing = 'x')", None),
    ("a = '7' AND b = 'abc'", True),
    ("a = '7' AND missing = 'x'", None),
    ("a = '8' AND missing = 'x'", False),
    ("a = '7' OR missing = 'x'", True),
    ("a = '8' OR missing = 'x'", None),
    ("a = '8' OR b = 'abc'", True),
    ("NULL AND FALSE", False),
    ("NULL OR TRUE", True),
    ("NOT NULL", None),
    ("TAGS = 'TagA' AND (a > 6 OR b IS NULL)", True),
    ("a = '7' AND NOT (b IN ('x', 'y'))", True),
    ("a > 5 and b = 'abc' or false", True),  # keywords are case-insensitive
    # TRUE / FALSE / NULL literals and boolean casts
    ("TRUE", True),
    ("FALSE", False),
    ("NULL", None),
    ("flag = TRUE", True),  # Boolean.valueOf of the text
    ("b = TRUE", False),
    ("flag", False),  # a property as a condition: text is not a boolean
    ("missing", None),
    ("(a > 5) = TRUE", True),
    ("(a > 5) = 'x'", RAISES),
    # comments and layout
    ("a = 7 /* comment */ AND b = 'abc' -- trailing", True),
    ("a = 7\n  AND\tb = 'abc'", True),
]

MALFORMED: list[tuple[str, str, int]] = [
    ("", "empty expression", 0),
    ("   ", "empty expression", 3),
    ("a >", "found end of input", 3),
    ("a > 'x'", "value 'x' cannot be compared with '>'", 2),
    ("a > TRUE", "cannot be compared", 2),
    ("a > (b > 1)", "cannot be compared", 2),
    ("a = NULL", "NULL cannot be compared with '=' (use IS NULL)", 2),
    ("TRUE = 'x'", "TRUE cannot be compared with 'x'", 5),
    ("5", "expression 5 will not result in a boolean value", 0),
    ("'abc'", "will not result in a boolean value", 0),
    ("a AND 5", "expression 5 as an operand of AND will not result in a boolean value", 6),
    ("a IN (1)", "IN takes string literals only, found '1'", 6),
    ("a IN ()", "IN takes string literals only, found ')'", 6),
    ("a IN 'x'", "expected '(' after IN", 5),
    ("a IN ('x' 'y')", "expected ',' or ')' in the IN list", 10),
    ("5 IN ('x')", "expected a property for IN, got 5", 2),
    ("a BETWEEN 5 AND 1", "lower bound 5 must be less than or equal to upper bound 1", 2),
    ("a BETWEEN 1", "expected AND between the BETWEEN bounds", 11),
    ("a BETWEEN NULL AND 5", "BETWEEN bounds can not be NULL", 2),
    ("a BETWEEN 'x' AND 'y'", "cannot be compared with 'BETWEEN'", 2),
    ("a IS 5", "expected NULL or NOT NULL", 5),
    ("a IS NOT 5", "expected NULL but found '5'", 9),
    ("'abc", "unterminated string literal", 0),
    ("/* open", "unterminated comment", 0),
    ("a != 1", "unexpected character '!'", 2),
    ("a.b = 1", "unexpected character '.'", 1),
    ("(a > 1", "expected ')' but found end of input", 6),
    ("a > 0.0", "less than Double.MIN_VALUE", 4),
    ("a > 1e999", "greater than Double.MAX_VALUE", 4),
    ("a = 99999999999999999999", "does not fit in a long", 4),
    ("NOT", "found end of input", 3),
    ("a = 1 AND", "found end of input", 9),
    ("007 = a", "expression 0 will not result in a boolean value", 0),  # "0" "0" "7": an INT, then ignored
]


def outcome(expression: str) -> bool | str | None:
    f = compile_sql92(expression)
    try:
        return f.evaluate(SAMPLE)
    except Sql92EvaluationError:
        assert not f.matches(SAMPLE), "a failing evaluation never matches"
        return RAISES


def test_the_table_has_at_least_forty_expressions() -> None:
    assert len(VALID) + len(MALFORMED) >= 40
    assert len({e for e, _ in VALID} | {e for e, _, _ in MALFORMED}) == len(VALID) + len(MALFORMED)


@pytest.mark.parametrize(("expression", "expected"), VALID)
def test_valid_expression_evaluates_on_the_sample_message(expression: str, expected: bool | str | None) -> None:
    assert outcome(expression) == expected
    assert compile_sql92(expression).matches(SAMPLE) is (expected is True)


@pytest.mark.parametrize(("expression", "message", "position"), MALFORMED)
def test_malformed_expression_is_refused_with_the_position(expression: str, message: str, position: int) -> None:
    with pytest.raises(Sql92ParseError) as caught:
        compile_sql92(expression)
    error = caught.value
    assert message in error.reason
    assert error.position == position
    assert str(error).startswith("Invalid SQL92 expression: ")
    assert f"position {position}" in str(error)


@pytest.mark.parametrize(("expression", "_expected"), VALID)
def test_rendered_tree_parses_back_to_the_same_tree(expression: str, _expected: object) -> None:
    tree = parse(expression)
    assert parse(tree.sql()) == tree


def test_parse_error_names_line_and_column_of_a_multi_line_expression() -> None:
    with pytest.raises(Sql92ParseError) as caught:
        parse("a = 1\n  AND b >")
    error = caught.value
    assert (error.line, error.column, error.position) == (2, 10, 15)
    assert "at line 2, column 10 (position 15)" in str(error)


def test_not_binds_tighter_than_a_comparison_as_in_rocketmq() -> None:
    # (NOT a) > 1 is a condition compared with a number: refused, so users must write NOT (a > 1).
    with pytest.raises(Sql92ParseError, match="cannot be compared"):
        parse("NOT a > 1")
    assert compile_sql92("NOT (a > 1)").evaluate({"a": "0"}) is True


def test_integer_literals_are_int_or_long_by_range() -> None:
    assert compile_sql92("x = 2147483647").evaluate({"x": "2147483647"}) is True
    assert compile_sql92("x = 9223372036854775807").evaluate({"x": "9223372036854775807"}) is True
    assert compile_sql92("x = -9223372036854775807L").evaluate({"x": "-9223372036854775807"}) is True
    assert compile_sql92("x = 5L").evaluate({"x": "5"}) is True


@pytest.mark.parametrize("literal", ["1", "2147483648"])
def test_integers_of_any_length_are_read_as_java_reads_them(literal: str, caplog: pytest.LogCaptureFixture) -> None:
    """Integer.valueOf / Long.valueOf read any number of leading zeros and refuse a longer number (no match); a longer
    literal is a parse error. Python's int() refused more than 4,300 digits with a plain ValueError: a zero-padded 7
    did not match and logged a traceback for every such message, and such a literal escaped the parse errors (a pull
    answered SYSTEM_ERROR instead of SUBSCRIPTION_PARSE_FAILED)."""
    f = compile_sql92(f"x > {literal}")
    seven = "0" * 5_000 + ("3000000000" if literal == "2147483648" else "7")
    assert f.evaluate({"x": seven}) is True
    assert f.evaluate({"x": "-" + seven}) is False
    for text in ("9" * 5_000, "-" + "9" * 5_000, "0" * 5_000 + "9" * 20):
        with pytest.raises(Sql92EvaluationError):
            f.evaluate({"x": text})
        assert not f.matches({"x": text})
    assert not caplog.records
    with pytest.raises(Sql92ParseError, match="does not fit in a long"):
        compile_sql92("x > " + "1" * 5_000)


@pytest.mark.parametrize(
    ("expression", "value", "expected"),
    [
        ("x = 7", "+0000000000000000007", True),  # 20 characters: int() reads it directly
        ("x = 7", "000000000000000000007", True),  # 21: leading zeros stripped first
        ("x = -7", "-000000000000000000007", True),
        ("x = 2147483647", "00000000000000000002147483647", True),
        ("x > 1", "00000000000000000002147483648", None),  # past Integer.MAX_VALUE: NumberFormatException
        ("x = 9223372036854775807", "-9223372036854775808", False),  # 20 characters, a long
        ("x < 0", "-0009223372036854775808", None),  # Long.MIN_VALUE, but the literal 0 makes it an int
        ("x < 2147483648", "-0009223372036854775808", True),  # a long literal: Long.valueOf
        ("x > 2147483648", "+0009223372036854775808", None),  # Long.MAX_VALUE + 1
        ("x > 2147483648", "00000000000000000010000000000000000000", None),  # 20 digits after the zeros
    ],
)
def test_integer_text_either_side_of_twenty_characters(expression: str, value: str, expected: bool | None) -> None:
    """Text up to a sign and 19 digits goes straight to ``int()`` (the hot path of ``a > 5``), longer text has its
    leading zeros stripped first; both read as Integer.valueOf / Long.valueOf do, None standing for their
    NumberFormatException (no match)."""
    f = compile_sql92(expression)
    if expected is None:
        with pytest.raises(Sql92EvaluationError):
            f.evaluate({"x": value})
    else:
        assert f.evaluate({"x": value}) is expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("a = missing", False),
        ("a <> missing", True),
        ("'x' = missing", False),
        ("'x' <> missing", True),
        ("missing = other", True),
        ("missing <> other", False),
        ("missing = a", None),
        ("missing <> a", None),
        ("(a = missing) = FALSE", True),
    ],
)
def test_equality_with_an_absent_operand_is_rocketmqs(expression: str, expected: bool | None) -> None:
    """ComparisonExpression.doCreateEqual: an absent left side is unknown, an absent right side alone is FALSE, both
    absent is TRUE; ``<>`` is NOT of that. ``'red' <> color`` matches a message without ``color`` on a Java broker;
    it used to be unknown here (no match) whichever side was absent."""
    assert compile_sql92(expression).evaluate(SAMPLE) is expected


def test_equality_evaluates_its_right_side_even_when_the_left_is_absent() -> None:
    """Java evaluates both sides of ``=`` before looking at either: a right side that throws makes the message fail
    even when the left side is absent, so an OR around it cannot rescue it."""
    with pytest.raises(Sql92EvaluationError):
        compile_sql92("(missing = (b > 5)) OR a = '7'").evaluate(SAMPLE)


def test_double_comparison_reads_java_double_text() -> None:
    f = compile_sql92("x > 1.5")
    assert [f.matches({"x": text}) for text in ("2", " 2 ", "2e0", "2.0d", "Infinity", "NaN", "1_0", "0x10")] == [
        True,
        True,
        True,
        True,
        True,
        True,  # Java orders NaN above every number
        False,
        False,
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0x1.8p1", True),  # 3.0
        ("0X10P0d", True),  # 16.0, a d suffix as after a decimal
        ("0x.8p1", False),  # 1.0
        ("-0x1p0", False),
        ("0x1p5000", True),  # too large: Infinity, as Java's hex parse gives
        ("0x1p-5000", False),  # too small: 0.0
        ("0x1p", RAISES),  # no exponent digits
        ("0x.p1", RAISES),  # no hex digit
        ("0x1.8", RAISES),  # a hex float needs its binary exponent
        ("NaNd", RAISES),  # nothing may follow NaN or Infinity
        ("Infinityf", RAISES),
        ("-InfinityD", RAISES),
    ],
)
def test_double_comparison_reads_text_exactly_as_double_value_of(text: str, expected: bool | str) -> None:
    """``Double.valueOf`` (ComparisonExpression's conversion of text compared with a double, in
    filter/src/main/java/org/apache/rocketmq/filter/expression/ComparisonExpression.java) reads the hexadecimal
    floating-point form (``0x1.8p1``, overflowing to Infinity) and still refuses a type suffix after NaN or Infinity
    (found by a review: hex text was no match, where a Java broker delivers)."""
    selector = compile_sql92("x > 1.5")
    if expected == RAISES:
        with pytest.raises(Sql92EvaluationError):
            selector.evaluate({"x": text})
    else:
        assert selector.evaluate({"x": text}) is expected


@pytest.mark.parametrize("expression", ["a BETWEEN -1 AND -5", "a BETWEEN 5 AND -1", "a BETWEEN -1.5 AND -2.5"])
def test_between_with_a_negated_bound_compiles_as_on_a_java_broker(expression: str) -> None:
    """RocketMQ's ComparisonExpression.createBetween checks the bounds' order only when both are
    ConstantExpressions; ``-1`` is UnaryExpression.createNegate (SelectorParser.jj ``unaryExpr``), so these compile
    and match nothing (found by a review; refused before)."""
    selector = compile_sql92(expression)
    assert selector.matches({"a": "-3"}) is False
    assert selector.matches({"a": "3"}) is False


@pytest.mark.parametrize(
    ("expression", "props", "expected"),
    [
        ("a < b", {"a": "-0.0", "b": "0.0"}, True),
        ("a >= b", {"a": "-0", "b": "0"}, False),
        ("a > b", {"a": "0", "b": "-0"}, True),
        ("a <= b", {"a": "0.0", "b": "0"}, True),
    ],
)
def test_ordering_two_text_properties_uses_double_compare_to(
    expression: str, props: dict[str, str], expected: bool
) -> None:
    """ComparisonExpression.evaluate orders two texts under > >= < <= as ``Double.valueOf(lv).compareTo(...)``, and
    Double.compareTo puts -0.0 below 0.0 (found by a review: they compared equal)."""
    assert compile_sql92(expression).evaluate(props) is expected


#: RocketMQ 5's string operators (results from the compiled 5.3.3 filter module), on the properties given.
STRING_OPERATORS: list[tuple[str, dict[str, str], bool]] = [
    ("a CONTAINS 'ell'", {"a": "hello"}, True),
    ("a CONTAINS 'xyz'", {"a": "hello"}, False),
    ("a NOT CONTAINS 'xyz'", {"a": "hello"}, True),
    ("a STARTSWITH 'he'", {"a": "hello"}, True),
    ("a NOT STARTSWITH 'he'", {"a": "hello"}, False),
    ("a ENDSWITH 'lo'", {"a": "hello"}, True),
    ("a NOT ENDSWITH 'lo'", {"a": "hello"}, False),
    ("a contains 'ell' and a endswith 'o'", {"a": "hello"}, True),  # keywords are case-insensitive
    ("a CONTAINS 'it''s'", {"a": "so it's"}, True),
    # never unknown: an absent property, an operand that is not text or an empty search text is FALSE, even negated
    ("a CONTAINS 'x' OR b = 'y'", {"b": "y"}, True),
    ("a NOT CONTAINS 'x'", {}, False),
    ("NOT (a CONTAINS 'x')", {}, True),
    ("a CONTAINS ''", {"a": "hello"}, False),
    ("a NOT ENDSWITH ''", {"a": "hello"}, False),
    ("5 CONTAINS '5'", {}, False),
    ("(a = 'x') NOT CONTAINS 'y'", {"a": "x"}, False),
    ("'hello' STARTSWITH 'h'", {}, True),  # any operand, not only a property
    ("a CONTAINS 'x' = TRUE", {"a": "x"}, True),
]


@pytest.mark.parametrize(("expression", "props", "expected"), STRING_OPERATORS)
def test_rocketmq_5_string_operators_parse_and_evaluate(expression: str, props: dict[str, str], expected: bool) -> None:
    """filter/.../parser/SelectorParser.jj (5.1.3 on) has [NOT] CONTAINS, STARTSWITH and ENDSWITH followed by a
    string; a 5.x client's ``bySql`` may use them and our gRPC receive compiles with them (found by a review)."""
    selector = compile_sql92(expression, string_operators=True)
    assert selector.evaluate(props) is expected
    assert parse(selector.tree.sql(), string_operators=True) == selector.tree


@pytest.mark.parametrize(
    ("expression", "message", "position"),
    [
        ("a CONTAINS 5", "CONTAINS takes a string literal, found '5'", 11),
        ("a NOT STARTSWITH", "STARTSWITH takes a string literal, found end of input", 16),
        ("a CONTAINS 'x' > 1", "cannot be compared with '>'", 15),
        ("a ENDSWITH 'x' IN ('x')", "expected a property for IN", 15),
    ],
)
def test_malformed_string_operator_is_refused(expression: str, message: str, position: int) -> None:
    with pytest.raises(Sql92ParseError) as caught:
        compile_sql92(expression, string_operators=True)
    assert message in caught.value.reason
    assert caught.value.position == position


def test_the_4_9_grammar_has_no_string_operators() -> None:
    """The pull path and CHECK_CLIENT_CONFIG parse as a 4.9.8 broker: CONTAINS is a property name there, not an
    operator, so ``contains = 'x'`` reads a property (RocketMQ 5 reserves the word); ``a CONTAINS 'x'`` is the property
    ``a`` as a condition followed by tokens a Java broker ignores."""
    assert parse("a CONTAINS 'x'") == parse("a")
    assert compile_sql92("contains = 'x' AND endsWith IS NULL").evaluate({"contains": "x"}) is True
    with pytest.raises(Sql92ParseError):
        compile_sql92("contains = 'x'", string_operators=True)


@pytest.mark.parametrize("expression", ["a > 1\uff15", "a > \u0663.5", "a > 1\u0663L"])
def test_numeric_literals_take_ascii_digits_only(expression: str) -> None:
    """SelectorParser.jj's DECIMAL_LITERAL and FLOATING_POINT_LITERAL are ["0"-"9"] only; a non-ASCII digit is a
    lexical error on a Java broker. Python's \\d
    matches any Unicode digit: "a > 1\uff15" compiled as a > 15 (both grammars, pull path and gRPC receive)."""
    with pytest.raises(Sql92ParseError):
        compile_sql92(expression)
    with pytest.raises(Sql92ParseError):
        compile_sql92(expression, string_operators=True)


@pytest.mark.parametrize(("expression", "expected"), [("TRUE = -3", False), ("FALSE <> -1.5", True)])
def test_a_boolean_literal_may_equal_a_negated_number(expression: str, expected: bool) -> None:
    """ComparisonExpression.checkEqualOperandCompatability refuses TRUE/FALSE against another constant only; ``-3``
    is UnaryExpression.createNegate's result, not a ConstantExpression, so a Java broker compiles it (and a boolean
    is never equal to a number)."""
    assert compile_sql92(expression).evaluate({}) is expected


@pytest.mark.parametrize(
    ("expression", "as_java_reads_it"),
    [
        ("a = 7 b = 2", "a = 7"),
        ("a > 5 )", "a > 5"),
        ("(a = 7)) OR b = 'x'", "a = 7"),
        ("a = 7 LIMIT 10", "a = 7"),
        ("a LIKE 'x%'", "a"),
        ("a = 7 b !", "a = 7"),  # the lexer never reaches the '!'
        ("a = 0L AND b = 'x'", "a = 0"),  # DECIMAL_LITERAL is "0" or [1-9][0-9]*[lL]?: "0" then the property L
        ("a > 0x10", "a > 0"),  # no hex literals: "0" then the property x10
        ("a > 1.5L", "a > 1.5"),
        ("a > --5", "a > 5"),  # LINE_COMMENT must end with a line break: "-" "-" "5"
        ("a = 7 -- note", "a = 7"),
        # After IS [NOT] NULL only the equality, AND and OR loops look at the next token: a NOT there is ignored
        ("a IS NULL NOT b", "a IS NULL"),
        ("a = 1 AND b IS NOT NULL NOT BETWEEN 1 AND 2", "a = 1 AND b IS NOT NULL"),
    ],
)
def test_tokens_after_the_first_complete_expression_are_ignored_as_in_java(
    expression: str, as_java_reads_it: str
) -> None:
    """SelectorParser.jj's entry point JmsSelector is ``orExpression()`` with no <EOF> after it: a Java broker parses
    the longest expression at the start and never reads past the one token that ended it (CHECK_CLIENT_CONFIG and a
    pull accept such a subscription; refusing it failed the start of a consumer a Java broker serves)."""
    assert parse(expression) == parse(as_java_reads_it)
    assert parse(expression, string_operators=True) == parse(as_java_reads_it, string_operators=True)


@pytest.mark.parametrize(
    ("expression", "message", "position"),
    [
        ("a = 7 NOT b", "unexpected 'NOT'", 6),  # NOT enters the comparison loop: NOT BETWEEN or NOT IN must follow
        ("(a IS NULL) NOT b", "unexpected 'NOT'", 12),  # after ')' the comparison loop reads the NOT again
        ("a = 7 !", "unexpected character '!'", 6),  # the token after the expression is still read
        ("a = 7 'open", "unterminated string literal", 6),
        ("a = 7 /* open", "unterminated comment", 6),
        ("a = 7 IS 5", "expected NULL or NOT NULL", 9),
        ("a = 7 OR", "found end of input", 8),
    ],
)
def test_what_follows_an_expression_can_still_make_it_malformed(expression: str, message: str, position: int) -> None:
    with pytest.raises(Sql92ParseError) as caught:
        parse(expression)
    assert message in caught.value.reason
    assert caught.value.position == position


@pytest.mark.parametrize(
    ("expression", "value", "expected"),
    [
        ("a = 7", "\u0667", True),  # ARABIC-INDIC DIGIT SEVEN
        ("a > 5", "\uff17", True),  # FULLWIDTH DIGIT SEVEN
        ("a = 7", "-\u0667", False),
        ("a = -7", "-\u0667", True),
        ("a = 7", "\u06f0" * 30 + "\u06f7", True),  # leading (EXTENDED ARABIC-INDIC) zeros, past twenty characters
        ("a = 3000000000", "\u0663" + "\u0660" * 9, True),  # a LONG literal: Long.valueOf
        ("a = 7", "\U0001d7d5", RAISES),  # MATHEMATICAL BOLD DIGIT SEVEN: two Java chars, neither a digit
        ("a = 7.0", "\u0667", RAISES),  # Double.valueOf takes ASCII digits only
    ],
)
def test_text_compared_with_an_integer_reads_unicode_digits_as_java_does(
    expression: str, value: str, expected: bool | str
) -> None:
    """Integer.valueOf and Long.valueOf read each char with Character.digit, which takes any Unicode decimal digit
    (a producer formatting numbers in an Arabic locale sends such digits); Double.valueOf takes "0"-"9" only."""
    f = compile_sql92(expression)
    try:
        result: bool | str | None = f.evaluate({"a": value})
    except Sql92EvaluationError:
        result = RAISES
    assert result == expected
