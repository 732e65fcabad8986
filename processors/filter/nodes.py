"""The SQL92 filter AST: frozen, slotted attrs nodes produced by :func:`processors.filter.sql92.parse`.

The tree mirrors RocketMQ's expression classes (``filter/expression``) without their quirks of construction: a
``BETWEEN`` stays one node, negated numeric literals are folded into :class:`Literal`, and a bare property used as a
condition is wrapped in :class:`BooleanCast`, which is how RocketMQ reads ``WHERE flag``. Nodes hold no behaviour
beyond :meth:`Node.sql`, which renders the node back to SQL (for error messages and logs); evaluation lives in
:mod:`processors.filter.evaluate`.

Every node is hashable and compares by value, so two parses of the same text give equal trees.
"""

from __future__ import annotations

import enum

import attrs

__all__ = [
    "And",
    "Between",
    "BooleanCast",
    "Comparison",
    "CompareOp",
    "In",
    "IsNull",
    "Literal",
    "LiteralKind",
    "Negate",
    "Node",
    "Not",
    "Or",
    "Property",
    "StringMatch",
    "StringOp",
    "Value",
    "children",
    "depth",
    "node_count",
    "is_boolean",
    "quoted",
]

#: A runtime value: a property's text, a literal, or the three-valued result of a condition (``None`` = unknown).
Value = str | int | float | bool | None


class LiteralKind(enum.Enum):
    """The Java type RocketMQ gives a literal. INT and LONG differ when a property's text is converted to compare
    with them (``Integer.valueOf`` refuses what does not fit in 32 bits)."""

    STRING = "string"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    NULL = "null"

    @property
    def is_number(self) -> bool:
        return self in (LiteralKind.INT, LiteralKind.LONG, LiteralKind.DOUBLE)


class CompareOp(enum.Enum):
    EQ = "="
    NE = "<>"
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="


class StringOp(enum.Enum):
    """RocketMQ 5's string operators (``ComparisonExpression.createContains`` and its siblings, since 5.1.3)."""

    CONTAINS = "CONTAINS"
    STARTSWITH = "STARTSWITH"
    ENDSWITH = "ENDSWITH"


class Node:
    """Base of every node. ``sql()`` renders the node as RocketMQ would print it."""

    __slots__ = ()

    def sql(self) -> str:
        raise NotImplementedError


@attrs.frozen(slots=True)
class Property(Node):
    """A message property by name (case-sensitive, as RocketMQ looks it up)."""

    name: str

    def sql(self) -> str:
        return self.name


@attrs.frozen(slots=True)
class Literal(Node):
    """A constant: string, INT (32-bit), LONG, DOUBLE, TRUE/FALSE or NULL."""

    value: str | int | float | bool | None
    kind: LiteralKind
    #: folded from ``-<number>``: for Java a negation, not a constant (BETWEEN checks only constants' order)
    negated: bool = attrs.field(default=False, eq=False)

    def sql(self) -> str:
        if self.kind is LiteralKind.NULL:
            return "NULL"
        if self.kind is LiteralKind.BOOLEAN:
            return "TRUE" if self.value else "FALSE"
        if self.kind is LiteralKind.STRING:
            assert isinstance(self.value, str)
            return quoted(self.value)
        return repr(self.value)


@attrs.frozen(slots=True)
class Negate(Node):
    """Unary minus on something that is not a numeric literal (a property, a string): always NULL at runtime, as in
    RocketMQ, where only numbers negate."""

    operand: Node

    def sql(self) -> str:
        return f"(- {self.operand.sql()})"


@attrs.frozen(slots=True)
class Comparison(Node):
    """``left op right`` for the six comparison operators."""

    op: CompareOp
    left: Node
    right: Node

    def sql(self) -> str:
        return f"({self.left.sql()} {self.op.value} {self.right.sql()})"


@attrs.frozen(slots=True)
class Between(Node):
    """``value [NOT] BETWEEN low AND high``: ``value >= low AND value <= high`` (negated: ``< low OR > high``)."""

    value: Node
    low: Node
    high: Node
    negated: bool = False

    def sql(self) -> str:
        word = "NOT BETWEEN" if self.negated else "BETWEEN"
        return f"({self.value.sql()} {word} {self.low.sql()} AND {self.high.sql()})"


@attrs.frozen(slots=True)
class In(Node):
    """``property [NOT] IN ('a', 'b', ...)``; RocketMQ allows only a property on the left and string literals."""

    property: Property
    values: tuple[str, ...]
    negated: bool = False

    def sql(self) -> str:
        word = "NOT IN" if self.negated else "IN"
        items = ", ".join(quoted(v) for v in self.values)
        return f"({self.property.sql()} {word} ({items}))"


@attrs.frozen(slots=True)
class StringMatch(Node):
    """``operand [NOT] CONTAINS|STARTSWITH|ENDSWITH 'search'`` (RocketMQ 5's grammar only): TRUE or FALSE, never
    unknown. Negated or not, it is FALSE when ``search`` is empty or the operand is not text (an absent property, a
    number, a condition's result)."""

    op: StringOp
    operand: Node
    search: str
    negated: bool = False

    def sql(self) -> str:
        word = f"NOT {self.op.value}" if self.negated else self.op.value
        return f"({self.operand.sql()} {word} {quoted(self.search)})"


@attrs.frozen(slots=True)
class IsNull(Node):
    """``operand IS [NOT] NULL``: never unknown."""

    operand: Node
    negated: bool = False

    def sql(self) -> str:
        return f"({self.operand.sql()} IS {'NOT ' if self.negated else ''}NULL)"


@attrs.frozen(slots=True)
class Not(Node):
    operand: Node

    def sql(self) -> str:
        return f"(NOT {self.operand.sql()})"


@attrs.frozen(slots=True)
class And(Node):
    left: Node
    right: Node

    def sql(self) -> str:
        return f"({self.left.sql()} AND {self.right.sql()})"


@attrs.frozen(slots=True)
class Or(Node):
    left: Node
    right: Node

    def sql(self) -> str:
        return f"({self.left.sql()} OR {self.right.sql()})"


@attrs.frozen(slots=True)
class BooleanCast(Node):
    """A property used where a condition is expected: TRUE only for a boolean value, so a message property (always
    text) gives FALSE when present and NULL when absent, exactly as RocketMQ's boolean cast does."""

    operand: Property

    def sql(self) -> str:
        return self.operand.sql()


def quoted(text: str) -> str:
    """``text`` as an SQL92 string literal (a quote doubled)."""
    return "'" + text.replace("'", "''") + "'"


def is_boolean(node: Node) -> bool:
    """Whether ``node`` is a condition (RocketMQ's ``BooleanExpression``): comparisons, logic, IN, the string
    operators, IS NULL, casts and the TRUE/FALSE/NULL literals."""
    if isinstance(node, Literal):
        return node.kind in (LiteralKind.BOOLEAN, LiteralKind.NULL)
    return isinstance(node, Comparison | Between | In | StringMatch | IsNull | Not | And | Or | BooleanCast)


def children(node: Node) -> tuple[Node, ...]:
    """The direct operands of ``node`` (none for properties and literals)."""
    if isinstance(node, Comparison | And | Or):
        return (node.left, node.right)
    if isinstance(node, Between):
        return (node.value, node.low, node.high)
    if isinstance(node, In):
        return (node.property,)
    if isinstance(node, Not | IsNull | BooleanCast | Negate | StringMatch):
        return (node.operand,)
    return ()


def node_count(node: Node) -> int:
    """How many nodes the tree has. Iterative, so any tree can be measured."""
    count = 0
    pending = [node]
    while pending:
        count += 1
        pending.extend(children(pending.pop()))
    return count


def depth(node: Node) -> int:
    """How many nodes deep the tree is (a lone property or literal is 1), an AND under an AND, or an OR under an OR,
    adding no level: evaluation walks such a chain in a loop, however long. Iterative, so any tree can be measured."""
    deepest = 0
    pending = [(node, 1)]
    while pending:
        current, level = pending.pop()
        deepest = max(deepest, level)
        chain = type(current) if isinstance(current, And | Or) else None
        pending.extend((child, level if type(child) is chain else level + 1) for child in children(current))
    return deepest
