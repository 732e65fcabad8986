"""Evaluating SQL92 trees against message properties, with RocketMQ's semantics (``filter/expression``).

:func:`compile_tree` turns a :mod:`~processors.filter.nodes` tree into nested closures once, so a match costs a few
Python calls per node instead of a walk with type dispatch. The values a message offers are its properties, always
text (``str``) or absent (``None``); literals bring numbers, booleans and strings. The rules:

- Three-valued logic: an absent property makes a comparison (but see ``=`` below), ``IN`` or ``BETWEEN`` unknown
  (``None``); ``NOT`` keeps unknown; ``AND`` is FALSE if either side is FALSE, else unknown if either is unknown;
  ``OR`` is TRUE if either side is TRUE, else unknown if either is unknown. ``IS [NOT] NULL`` is never unknown. A
  message matches only when the whole expression is TRUE.
- Conversions, as RocketMQ's ``ComparisonExpression`` with string conversion on: text compared with a number is read
  as that number's Java type (``Integer.valueOf`` for INT literals, ``Long.valueOf`` for LONG, ``Double.valueOf``
  for DOUBLE), so ``a > 5`` matches ``a=7`` but not ``a=7.5`` (write ``a > 5.0``); text compared with TRUE/FALSE is
  ``Boolean.valueOf``; two texts under ``<``/``<=``/``>``/``>=`` are both read as doubles.
- Where RocketMQ's evaluation throws (text that does not convert, a condition's result compared with text), the
  message does not match: :meth:`Sql92Filter.evaluate` raises :class:`Sql92EvaluationError` and
  :meth:`Sql92Filter.matches` answers ``False``, as the Java broker logs the exception and skips the message.
- A property used as a condition (``WHERE flag``) is TRUE only for a boolean value, so for message properties it is
  FALSE when present and unknown when absent (RocketMQ's boolean cast). Unary minus on anything but a number is NULL.
- RocketMQ 5's ``[NOT] CONTAINS|STARTSWITH|ENDSWITH 'x'`` is never unknown: FALSE, negated or not, for an absent
  property, an operand that is not text and an empty ``'x'`` (``ComparisonExpression.ContainsExpression``).
- ``=`` and ``<>`` are RocketMQ's ``doCreateEqual`` and its negation: an absent left side is unknown, an absent right
  side alone makes ``=`` FALSE (``'red' <> color`` matches a message without ``color``), both absent make it TRUE.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import unicodedata
from collections.abc import Callable, Mapping
from typing import Final

import attrs

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
    StringMatch,
    StringOp,
    Value,
    children,
    node_count,
)
from remoting.codec.message_properties import java_trim

__all__ = ["Evaluator", "Properties", "Sql92EvaluationError", "Sql92Filter", "compile_tree", "referenced_properties"]

log = logging.getLogger(__name__)

#: What a filter reads: property name -> value (the decoded properties string of a message).
Properties = Mapping[str, str]
#: A compiled node: properties in, three-valued result (or a value, for operands) out.
Evaluator = Callable[[Properties], Value]


class Sql92EvaluationError(ValueError):
    """Evaluation failed where RocketMQ's would throw (e.g. ``a > 5`` with ``a='abc'``): the message does not match."""


_JAVA_INTEGER: Final = re.compile(r"[+-]?[0-9]+\Z")
#: The decimal forms ``Double.valueOf`` reads (ComparisonExpression's text-to-double conversion in
#: filter/src/main/java/org/apache/rocketmq/filter/expression/ComparisonExpression.java). A digit run splits one way
#: only (``[0-9]+(?:\.[0-9]*)?``, not ``[0-9]+\.?[0-9]*``): two adjacent digit quantifiers backtracked polynomially on
#: a long run of digits that does not end as a number, and one 30,000-character property held the event loop for
#: minutes.
_JAVA_DOUBLE: Final = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)\Z")
#: The hexadecimal form ``Double.valueOf`` reads too (``0x1.8p1``: hex digits, an optional point, a binary exponent that
#: is required, a d/f suffix), as HEX_FLOAT_PATTERN in java/lang/FloatingDecimal.java; the lookahead asks for a digit
#: before or after the point. Tried only when the decimal form fails, so the common case costs nothing more.
_JAVA_HEX_DOUBLE: Final = re.compile(
    r"([+-]?)0[xX](?=\.?[0-9a-fA-F])[0-9a-fA-F]*(?:\.[0-9a-fA-F]*)?[pP][+-]?[0-9]+[fFdD]?\Z"
)


def _wide_integer(text: str) -> int:
    """The value of a digit run (``_JAVA_INTEGER``) too long to hand ``int()`` as it is: leading zeros stripped, and
    ``2**63`` (out of every Java range) unread past 19 digits after them. ``int()`` refuses more than 4,300 digits
    with a ValueError, where ComparisonExpression's conversion in
    filter/src/main/java/org/apache/rocketmq/filter/expression/ComparisonExpression.java throws only
    NumberFormatException (no match)."""
    sign = text[0] if text[0] in "+-" else ""
    digits = text[len(sign) :].lstrip("0") or "0"
    return int(sign + digits) if len(digits) <= 19 else 2**63  # Long.MAX_VALUE has 19 digits


#: Any Unicode decimal digit (Python's ``\d`` on text: category Nd, as Java's ``Character.isDigit``).
_UNICODE_INTEGER: Final = re.compile(r"[+-]?\d+\Z")


def _unicode_integer(text: str) -> int | None:
    """The value of ``text`` if it is an integer as ``Integer.parseInt`` reads it (in java/lang/Integer.java each char
    goes through ``Character.digit``, which takes any decimal digit of the Basic Multilingual Plane: one beyond it is
    two chars, neither a digit), else ``None``. The slow path, for text ``_JAVA_INTEGER`` refuses."""
    if not _UNICODE_INTEGER.match(text) or max(text) > "\uffff":
        return None
    ascii_text = "".join(c if c in "+-" else str(unicodedata.digit(c)) for c in text)
    return int(ascii_text) if len(ascii_text) <= 20 else _wide_integer(ascii_text)


def _java_int(text: str) -> int:
    """``Integer.valueOf`` (any number of leading zeros, any decimal digits); raises :class:`Sql92EvaluationError`. A
    text of at most 20 characters (a sign and 19 digits) goes straight to ``int()``: this runs for every candidate of
    ``a > 5``."""
    if _JAVA_INTEGER.match(text):
        value: int | None = int(text) if len(text) <= 20 else _wide_integer(text)
    else:
        value = _unicode_integer(text)
    if value is not None and -(2**31) <= value < 2**31:
        return value
    raise Sql92EvaluationError(f"{text[:40]!r} is not a Java int")


def _java_long(text: str) -> int:
    """``Long.valueOf`` (any number of leading zeros, any decimal digits); raises :class:`Sql92EvaluationError`."""
    if _JAVA_INTEGER.match(text):
        value: int | None = int(text) if len(text) <= 20 else _wide_integer(text)
    else:
        value = _unicode_integer(text)
    if value is not None and -(2**63) <= value < 2**63:
        return value
    raise Sql92EvaluationError(f"{text[:40]!r} is not a Java long")


def _java_double(text: str) -> float:
    """``Double.valueOf`` (decimal and hexadecimal forms, NaN, Infinity, a d/f suffix after a number); raises
    :class:`Sql92EvaluationError`."""
    trimmed = java_trim(text)  # Double.valueOf trims as String.trim
    if _JAVA_DOUBLE.match(trimmed):
        return float(trimmed[:-1] if trimmed[-1] in "fFdD" else trimmed)
    hexadecimal = _JAVA_HEX_DOUBLE.match(trimmed)
    if hexadecimal is None:
        raise Sql92EvaluationError(f"{text!r} is not a Java double")
    if trimmed[-1] in "fFdD":
        trimmed = trimmed[:-1]
    try:
        return float.fromhex(trimmed)
    except OverflowError:  # Java's hex parse overflows to a signed Infinity, float.fromhex raises
        return -math.inf if hexadecimal.group(1) == "-" else math.inf


def _converter(kind: LiteralKind | None) -> Callable[[str], int | float]:
    """How text compared with a number of ``kind`` is read (the number's own Java type)."""
    if kind is LiteralKind.INT:
        return _java_int
    if kind is LiteralKind.LONG:
        return _java_long
    return _java_double


def _to_number(text: str, kind: LiteralKind | None) -> int | float:
    """``text`` read as the Java type of the number it is compared with; raises :class:`Sql92EvaluationError`."""
    return _converter(kind)(text)


def _compare_numbers(a: int | float, b: int | float) -> int:
    """Java's ``compareTo`` of two numbers: ``Double.compareTo`` puts -0.0 below 0.0 and NaN above everything (equal
    to itself), where ``<`` and ``>`` call them unordered."""
    if a < b:
        return -1
    if a > b:
        return 1
    return _double_rank(a) - _double_rank(b)


def _double_rank(x: int | float) -> int:
    """Where ``Double.compareTo`` puts numbers ``<`` and ``>`` cannot order: -0.0, then 0.0 (and any other number),
    then NaN."""
    if x != x:
        return 2
    return 1 if math.copysign(1.0, x) > 0 else 0


def _order(lv: Value, rv: Value, lkind: LiteralKind | None, rkind: LiteralKind | None) -> int:
    """RocketMQ's ``__compare`` with string conversion on, for two non-NULL values: negative, zero or positive.
    ``lkind``/``rkind`` are the literal kinds of numeric operands (numbers only come from literals)."""
    lt, rt = type(lv), type(rv)
    if lt is str:
        assert isinstance(lv, str)
        if rt is str:
            assert isinstance(rv, str)
            return (lv > rv) - (lv < rv)
        if rt is bool:
            return (lv.lower() == "true") - bool(rv)
        assert isinstance(rv, int | float)
        return _compare_numbers(_to_number(lv, rkind), rv)
    if lt is bool:
        if rt is bool:
            return bool(lv) - bool(rv)
        if rt is str:
            # Java casts the Boolean to String here and throws ClassCastException.
            raise Sql92EvaluationError("a boolean cannot be compared with a string")
        return -1
    assert isinstance(lv, int | float)
    if rt is str:
        assert isinstance(rv, str)
        return _compare_numbers(lv, _to_number(rv, lkind))
    if rt is bool:
        return -1
    assert isinstance(rv, int | float)
    return _compare_numbers(lv, rv)


_TESTS: Final[dict[CompareOp, Callable[[int], bool]]] = {
    CompareOp.EQ: lambda c: c == 0,
    CompareOp.NE: lambda c: c != 0,
    CompareOp.LT: lambda c: c < 0,
    CompareOp.LE: lambda c: c <= 0,
    CompareOp.GT: lambda c: c > 0,
    CompareOp.GE: lambda c: c >= 0,
}


def _number_kind(node: Node) -> LiteralKind | None:
    return node.kind if isinstance(node, Literal) and node.kind.is_number else None


def _comparison(op: CompareOp, left: Node, right: Node) -> Evaluator:
    test = _TESTS[op]
    lkind, rkind = _number_kind(left), _number_kind(right)
    ordering = op not in (CompareOp.EQ, CompareOp.NE)
    if isinstance(left, Property) and isinstance(right, Literal) and right.kind is not LiteralKind.NULL:
        return _property_against_literal(op, left.name, right, test, ordering)
    lf, rf = compile_tree(left), compile_tree(right)
    if not ordering:
        return _equality(op is CompareOp.EQ, lf, rf, lkind, rkind)

    def compare(props: Properties) -> Value:
        lv = lf(props)
        if lv is None:
            return None
        rv = rf(props)
        if rv is None:
            return None
        if ordering and type(lv) is str and type(rv) is str:
            # Texts are ordered as numbers or not at all.
            return test(_compare_numbers(_java_double(lv), _java_double(rv)))
        return test(_order(lv, rv, lkind, rkind))

    return compare


def _equality(
    equal: bool, lf: Evaluator, rf: Evaluator, lkind: LiteralKind | None, rkind: LiteralKind | None
) -> Evaluator:
    """``=`` (``equal``) or ``<>`` as ComparisonExpression.doCreateEqual and createNotEqual (NOT of it) in
    filter/src/main/java/org/apache/rocketmq/filter/expression/ComparisonExpression.java: both sides are evaluated;
    an absent left side is unknown, an absent right side alone is FALSE, both absent is TRUE."""

    def compare(props: Properties) -> Value:
        lv = lf(props)
        rv = rf(props)
        if lv is None:
            return equal if rv is None else None
        if rv is None:
            return not equal
        return (_order(lv, rv, lkind, rkind) == 0) is equal

    return compare


def _property_against_literal(
    op: CompareOp, name: str, literal: Literal, test: Callable[[int], bool], ordering: bool
) -> Evaluator:
    """The common shape ``prop op literal``, specialised: the conversion is chosen once, not per message."""
    constant = literal.value
    if literal.kind is LiteralKind.STRING and not ordering:
        equal = op is CompareOp.EQ

        def against_text(props: Properties) -> Value:
            value = props.get(name)
            return None if value is None else (value == constant) is equal

        return against_text
    if literal.kind.is_number:
        convert = _converter(literal.kind)
        assert isinstance(constant, int | float)
        number = constant

        def against_number(props: Properties) -> Value:
            value = props.get(name)
            return None if value is None else test(_compare_numbers(convert(value), number))

        return against_number

    def against_constant(props: Properties) -> Value:
        value = props.get(name)
        return None if value is None else test(_order(value, constant, None, None))

    return against_constant


def _chain(node: And | Or) -> list[Node]:
    """The operands, left to right, of the run of ``type(node)`` nodes under ``node``: ``a AND (b AND c) AND d`` gives
    a, b, c, d. Collected iteratively, as a chain can be thousands of terms long."""
    kind = type(node)
    operands: list[Node] = []
    pending: list[Node] = [node]
    while pending:
        current = pending.pop()
        if type(current) is kind:
            assert isinstance(current, And | Or)
            pending.append(current.right)
            pending.append(current.left)
        else:
            operands.append(current)
    return operands


#: Chains up to this many terms nest pairwise evaluators (a call each, cheaper than a loop for a few terms).
_NESTED_CHAIN: Final = 16


def _every(evaluators: list[Evaluator]) -> Evaluator:
    """An AND chain, evaluated in a loop: what nested :func:`_and` evaluators answer (left to right, stopping at the
    first FALSE), without a stack frame per term. RocketMQ's LogicExpression.createAND in
    filter/src/main/java/org/apache/rocketmq/filter/expression/LogicExpression.java is associative in this logic."""
    if len(evaluators) <= _NESTED_CHAIN:
        return functools.reduce(_and, evaluators)
    return _looped(evaluators, False)


def _any(evaluators: list[Evaluator]) -> Evaluator:
    """An OR chain, evaluated in a loop, stopping at the first TRUE (see :func:`_every`)."""
    if len(evaluators) <= _NESTED_CHAIN:
        return functools.reduce(_or, evaluators)
    return _looped(evaluators, True)


def _looped(evaluators: list[Evaluator], decisive: bool) -> Evaluator:
    """The loop of :func:`_every` (``decisive`` FALSE) and :func:`_any` (TRUE): the first term that answers
    ``decisive`` decides; otherwise UNKNOWN if a term was, else ``not decisive``."""
    otherwise = not decisive

    def chain(props: Properties) -> Value:
        unknown = False
        for evaluator in evaluators:
            value = evaluator(props)
            if value is decisive:
                return decisive
            if value is None:
                unknown = True
        return None if unknown else otherwise

    return chain


def _and(lf: Evaluator, rf: Evaluator) -> Evaluator:
    def both(props: Properties) -> Value:
        lv = lf(props)
        if lv is False:
            return False
        rv = rf(props)
        if rv is False:
            return False
        return None if lv is None or rv is None else True

    return both


def _or(lf: Evaluator, rf: Evaluator) -> Evaluator:
    def either(props: Properties) -> Value:
        lv = lf(props)
        if lv is True:
            return True
        rv = rf(props)
        if rv is True:
            return True
        return None if lv is None or rv is None else False

    return either


_STRING_TESTS: Final[dict[StringOp, Callable[[str, str], bool]]] = {
    StringOp.CONTAINS: str.__contains__,
    StringOp.STARTSWITH: str.startswith,
    StringOp.ENDSWITH: str.endswith,
}


def _string_match(node: StringMatch) -> Evaluator:
    """RocketMQ 5's ``ContainsExpression`` and its siblings: FALSE for an empty search text or an operand that is not
    text, negated or not; never unknown."""
    search, negated, test = node.search, node.negated, _STRING_TESTS[node.op]
    if not search:
        return lambda props: False
    operand = compile_tree(node.operand)

    def match(props: Properties) -> Value:
        value = operand(props)
        return type(value) is str and test(value, search) is not negated

    return match


def compile_tree(node: Node) -> Evaluator:
    """The evaluator of ``node`` (a tree from :func:`~processors.filter.sql92.parse`). Evaluators raise
    :class:`Sql92EvaluationError` where RocketMQ's evaluation throws."""
    if isinstance(node, Property):
        name = node.name
        return lambda props: props.get(name)
    if isinstance(node, Literal):
        constant = node.value
        return lambda props: constant
    if isinstance(node, Comparison):
        return _comparison(node.op, node.left, node.right)
    if isinstance(node, And):
        return _every([compile_tree(operand) for operand in _chain(node)])
    if isinstance(node, Or):
        return _any([compile_tree(operand) for operand in _chain(node)])
    if isinstance(node, Not):
        operand = compile_tree(node.operand)

        def negation(props: Properties) -> Value:
            value = operand(props)
            return None if value is None else not value

        return negation
    if isinstance(node, Between):
        if node.negated:
            return _or(
                _comparison(CompareOp.LT, node.value, node.low), _comparison(CompareOp.GT, node.value, node.high)
            )
        return _and(_comparison(CompareOp.GE, node.value, node.low), _comparison(CompareOp.LE, node.value, node.high))
    if isinstance(node, In):
        name, members, negated = node.property.name, frozenset(node.values), node.negated

        def membership(props: Properties) -> Value:
            value = props.get(name)
            return None if value is None else (value in members) is not negated

        return membership
    if isinstance(node, StringMatch):
        return _string_match(node)
    if isinstance(node, IsNull):
        operand, negated = compile_tree(node.operand), node.negated
        return lambda props: (operand(props) is None) is not negated
    if isinstance(node, BooleanCast):
        name = node.operand.name

        def cast(props: Properties) -> Value:
            value: Value = props.get(name)
            return None if value is None else (value if type(value) is bool else False)

        return cast
    if isinstance(node, Negate):
        operand = compile_tree(node.operand)

        def minus(props: Properties) -> Value:
            value = operand(props)
            return -value if type(value) in (int, float) else None  # type: ignore[operator]

        return minus
    raise TypeError(f"not an SQL92 node: {node!r}")


def referenced_properties(node: Node) -> frozenset[str]:
    """The property names ``node`` reads."""
    names: set[str] = set()
    pending = [node]
    while pending:
        current = pending.pop()
        if isinstance(current, Property):
            names.add(current.name)
        pending.extend(children(current))
    return frozenset(names)


@attrs.frozen(slots=True)
class Sql92Filter:
    """A compiled SQL92 subscription: immutable, shareable between pulls and tasks. Build it with
    :func:`processors.filter.compile_sql92`."""

    expression: str
    tree: Node
    properties: frozenset[str]
    _evaluator: Evaluator = attrs.field(alias="evaluator", repr=False, eq=False)
    #: ``(name, b"name\x01")`` for each referenced property: what :meth:`matches_raw` looks for.
    _needles: tuple[tuple[str, bytes], ...] = attrs.field(init=False, repr=False, eq=False)
    #: What one evaluation costs, in tree nodes plus referenced properties (each a search of the properties string):
    #: a few for a usual subscription, tens of thousands for a generated chain of thousands of terms.
    cost: int = attrs.field(init=False, repr=False, eq=False)

    @cost.default
    def _cost_of_tree(self) -> int:
        return node_count(self.tree) + len(self.properties)

    @_needles.default
    def _needles_of_properties(self) -> tuple[tuple[str, bytes], ...]:
        return tuple((name, name.encode() + b"\x01") for name in sorted(self.properties))

    def evaluate(self, properties: Properties) -> bool | None:
        """The three-valued result; raises :class:`Sql92EvaluationError` where RocketMQ's evaluation throws."""
        result = self._evaluator(properties)
        return result if result is None or type(result) is bool else False

    def matches(self, properties: Properties) -> bool:
        """Whether a message with these properties is delivered: the expression is TRUE. Never raises: like the Java
        broker, a failing evaluation means no match (anything but :class:`Sql92EvaluationError` is logged)."""
        try:
            return self._evaluator(properties) is True
        except Sql92EvaluationError:
            return False
        except Exception:
            log.warning("evaluating %r failed", self.expression, exc_info=True)
            return False

    def matches_raw(self, raw: str | bytes | memoryview) -> bool:
        """:meth:`matches` on a raw properties string (``name 0x01 value 0x02 ...``), as stored. Never raises.

        Only the referenced properties are looked up (as
        :func:`~remoting.codec.message_properties.decode_properties` would read
        them: last occurrence wins, empty values are absent), which is cheaper than decoding every pair."""
        data = raw.encode() if isinstance(raw, str) else bytes(raw)
        props: dict[str, str] = {}
        for name, needle in self._needles:
            value = _find_value(data, needle)
            if value is not None:
                props[name] = value.decode("utf-8", "replace")
        try:
            return self._evaluator(props) is True
        except Sql92EvaluationError:
            return False
        except Exception:
            log.warning("evaluating %r failed", self.expression, exc_info=True)
            return False


def _find_value(data: bytes, needle: bytes) -> bytes | None:
    """The value of the last non-empty ``name 0x01 value`` segment (``needle`` = name + 0x01) in a properties string:
    what ``decode_properties`` keeps for that name. Searching from the end finds the winner first."""
    end = len(data)
    while True:
        pos = data.rfind(needle, 0, end)
        if pos < 0:
            return None
        if pos == 0 or data[pos - 1] == 0x02:
            start = pos + len(needle)
            stop = data.find(b"\x02", start)
            value = data[start:] if stop < 0 else data[start:stop]
            if value:
                return value
        end = pos + len(needle) - 1
