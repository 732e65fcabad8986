"""The SQL92 evaluator against a reference written from RocketMQ's classes, value by value.

The reference keeps each value with the Java class RocketMQ gives it (String, Integer, Long, Double, Boolean; ``None``
for null) and follows filter/src/main/java/org/apache/rocketmq/filter/expression/ in 4.9.8 step by step:
ComparisonExpression.__compare's conversions (text to the other side's class, Integer widened to Long or Double, a
Boolean against text a ClassCastException), evaluate's parsing of two texts as doubles under ``<``/``<=``/``>``/``>=``,
doCreateEqual for ``=`` (and its NOT for ``<>``), createBetween as ``>=`` AND ``<=``, LogicExpression's AND/OR,
UnaryExpression's NOT, IN, IS NULL, boolean cast and negation. Where Java throws, the message does not match
("raises"). Generated expressions over properties holding numbers, near-numbers and words are evaluated by both.
"""

from __future__ import annotations

import math
import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from processors.filter import Sql92EvaluationError, Sql92ParseError, compile_sql92
from processors.filter.nodes import (
    And,
    Between,
    BooleanCast,
    CompareOp,
    Comparison,
    In,
    IsNull,
    Literal,
    LiteralKind,
    Negate,
    Node,
    Not,
    Or,
    Property,
)

#: A Java value: (class, value), the class one of "S", "I", "L", "D", "B"; None is Java's null.
JavaValue = tuple[str, Any] | None

_CLASS = {
    LiteralKind.STRING: "S",
    LiteralKind.INT: "I",
    LiteralKind.LONG: "L",
    LiteralKind.DOUBLE: "D",
    LiteralKind.BOOLEAN: "B",
}
_INTEGER = re.compile(r"[+-]?[0-9]+\Z")
_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)\Z")
_HEX_DOUBLE = re.compile(r"([+-]?0[xX][0-9a-fA-F]*\.?[0-9a-fA-F]*[pP][+-]?[0-9]+)[fFdD]?\Z")
_ORDERING = {
    CompareOp.LT: lambda c: c < 0,
    CompareOp.LE: lambda c: c <= 0,
    CompareOp.GT: lambda c: c > 0,
    CompareOp.GE: lambda c: c >= 0,
}


class JavaThrows(Exception):
    """Java's evaluation throws here: the message does not match."""


def java_integer(text: str, bits: int) -> int:
    """Integer.valueOf (32 bits) or Long.valueOf (64 bits) of ASCII digits."""
    if not _INTEGER.match(text) or not -(2 ** (bits - 1)) <= int(text) < 2 ** (bits - 1):
        raise JavaThrows(text)
    return int(text)


def java_double(text: str) -> float:
    """Double.valueOf: String.trim, then the decimal or hexadecimal form, with an optional d/f suffix."""
    trimmed = text.strip("".join(map(chr, range(33))))
    if _DOUBLE.match(trimmed):
        return float(trimmed[:-1] if trimmed[-1] in "fFdD" else trimmed)
    hexadecimal = _HEX_DOUBLE.match(trimmed)
    if hexadecimal is None:
        raise JavaThrows(text)
    return float.fromhex(hexadecimal.group(1))


def from_text(text: str, cls: str) -> tuple[str, Any]:
    """__compare's conversion of a String to the other side's class."""
    if cls == "B":
        return ("B", text.lower() == "true")
    if cls == "D":
        return ("D", java_double(text))
    return (cls, java_integer(text, 32 if cls == "I" else 64))


def compare_to(a: Any, b: Any, cls: str) -> int:
    """compareTo of two values of one class; Double.compareTo puts -0.0 below 0.0 and NaN above all."""
    if cls == "D" and not (a < b or a > b):
        rank = [2 if x != x else int(math.copysign(1, x) > 0) for x in (a, b)]
        return (rank[0] > rank[1]) - (rank[0] < rank[1])
    return (a > b) - (a < b)


def java_compare(lv: tuple[str, Any], rv: tuple[str, Any]) -> int:
    """ComparisonExpression.__compare with convertStringExpressions on."""
    lc, rc = lv[0], rv[0]
    if lc != rc:
        if lc == "B":
            if rc == "S":
                raise JavaThrows("Boolean cast to String")
            return -1
        if lc == "S":
            lv = from_text(lv[1], rc)
        elif rc == "S":
            rv = from_text(rv[1], lc)
        elif rc == "B":
            return -1
        elif "D" in (lc, rc):
            lv, rv = ("D", float(lv[1])), ("D", float(rv[1]))
        else:
            lv, rv = ("L", lv[1]), ("L", rv[1])
    return compare_to(lv[1], rv[1], lv[0])


def truth(value: bool | None) -> JavaValue:
    return None if value is None else ("B", value)


def java_equal(node: Comparison, props: dict[str, str]) -> bool | None:
    """doCreateEqual: both sides evaluated; one null alone: null if it is the left one, else FALSE."""
    lv, rv = java_eval(node.left, props), java_eval(node.right, props)
    if (lv is None) != (rv is None):
        return None if lv is None else False
    if lv is None or rv is None or (lv == rv and type(lv[1]) is type(rv[1])):
        return True
    return java_compare(lv, rv) == 0


def java_comparison(node: Comparison, props: dict[str, str]) -> JavaValue:
    if node.op in (CompareOp.EQ, CompareOp.NE):
        equal = java_equal(node, props)
        return truth(equal if equal is None or node.op is CompareOp.EQ else not equal)
    lv = java_eval(node.left, props)
    if lv is None:
        return None
    rv = java_eval(node.right, props)
    if rv is None:
        return None
    if lv[0] == rv[0] == "S":
        lv, rv = ("D", java_double(lv[1])), ("D", java_double(rv[1]))
    return truth(_ORDERING[node.op](java_compare(lv, rv)))


def java_logic(node: And | Or, props: dict[str, str]) -> JavaValue:
    """LogicExpression: the left side decides alone when it is FALSE (AND) or TRUE (OR)."""
    decisive = isinstance(node, Or)
    left = java_eval(node.left, props)
    if left is not None and left[1] is decisive:
        return ("B", decisive)
    right = java_eval(node.right, props)
    if right is not None and right[1] is decisive:
        return ("B", decisive)
    return None if left is None or right is None else ("B", not decisive)


def java_eval(node: Node, props: dict[str, str]) -> JavaValue:
    if isinstance(node, Property):
        return None if node.name not in props else ("S", props[node.name])
    if isinstance(node, Literal):
        return None if node.kind is LiteralKind.NULL else (_CLASS[node.kind], node.value)
    if isinstance(node, Negate):
        value = java_eval(node.operand, props)
        return (value[0], -value[1]) if value is not None and value[0] in "ILD" else None
    if isinstance(node, Comparison):
        return java_comparison(node, props)
    if isinstance(node, Between):  # createBetween and createNotBetween
        if node.negated:
            below = Comparison(CompareOp.LT, node.value, node.low)
            return java_logic(Or(below, Comparison(CompareOp.GT, node.value, node.high)), props)
        low, high = Comparison(CompareOp.GE, node.value, node.low), Comparison(CompareOp.LE, node.value, node.high)
        return java_logic(And(low, high), props)
    if isinstance(node, And | Or):
        return java_logic(node, props)
    if isinstance(node, Not):
        value = java_eval(node.operand, props)
        return None if value is None else ("B", not value[1])
    if isinstance(node, In):
        value = java_eval(node.property, props)
        return None if value is None else ("B", (value[1] in node.values) is not node.negated)
    if isinstance(node, IsNull):
        return ("B", (java_eval(node.operand, props) is None) is not node.negated)
    if isinstance(node, BooleanCast):
        value = java_eval(node.operand, props)
        return None if value is None else ("B", value[0] == "B" and value[1])
    raise TypeError(node)


def reference(node: Node, props: dict[str, str]) -> bool | str | None:
    """What a Java broker's evaluation answers: TRUE, FALSE, None (unknown) or "raises"."""
    try:
        value = java_eval(node, props)
    except JavaThrows:
        return "raises"
    return None if value is None else value[0] == "B" and value[1]


NAMES = ("a", "b")
TEXTS = ("7", "7.0", " 7", "-0", "0", "+7", "7d", "NaNd", "true", "TRUE", "x", "", "3000000000", "NaN", "1e3", "0x1p3")
LITERALS = ("7", "-7", "0", "3000000000", "-2147483648", "7.0", "2.5", "-2.5", "1e3", "'x'", "'7'", "TRUE", "FALSE")
operands = st.one_of(st.sampled_from(NAMES), st.sampled_from((*LITERALS, "NULL", "-a", "- 7", "-'x'")))


@st.composite
def conditions(draw: st.DrawFn) -> str:
    left, right = draw(operands), draw(operands)
    shape = draw(st.integers(0, 5))
    if shape <= 1:
        return f"{left} {draw(st.sampled_from(['=', '<>', '<', '<=', '>', '>=']))} {right}"
    if shape == 2:
        return f"{left} {draw(st.sampled_from(['BETWEEN', 'NOT BETWEEN']))} {right} AND {draw(operands)}"
    if shape == 3:
        return f"{draw(st.sampled_from(NAMES))} {draw(st.sampled_from(['IN', 'NOT IN']))} ('7', 'x', 'true')"
    if shape == 4:
        return f"{left} IS {draw(st.sampled_from(['NULL', 'NOT NULL']))}"
    return draw(st.sampled_from(["TRUE", "FALSE", "NULL", *NAMES]))


expressions = st.recursive(
    conditions(),
    lambda inner: st.one_of(
        st.builds(lambda e: f"NOT ({e})", inner),
        st.builds(lambda x, y: f"({x}) AND ({y})", inner, inner),
        st.builds(lambda x, y: f"({x}) OR ({y})", inner, inner),
        st.builds(lambda x, y: f"({x}) = ({y})", inner, inner),
    ),
    max_leaves=5,
)
messages = st.dictionaries(st.sampled_from(NAMES), st.sampled_from(TEXTS), max_size=2)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(expressions, messages)
def test_evaluation_answers_what_rocketmqs_expression_classes_answer(expression: str, props: dict[str, str]) -> None:
    try:
        compiled = compile_sql92(expression)
    except Sql92ParseError:
        return  # the grammar's checks have their own tests
    try:
        ours: bool | str | None = compiled.evaluate(props)
    except Sql92EvaluationError:
        ours = "raises"
    assert ours == reference(compiled.tree, props), expression
    assert compiled.matches(props) is (ours is True)
