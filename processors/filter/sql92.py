"""SQL92 message selectors: tokenizer and recursive-descent parser (RocketMQ's ``SelectorParser.jj`` grammar).

:func:`parse` turns an expression such as ``a > 5 AND region IN ('eu', 'us') AND tag IS NOT NULL`` into a tree of
:mod:`processors.filter.nodes`. The grammar and precedence are RocketMQ's, lowest first::

    or         := and (OR and)*
    and        := equality (AND equality)*
    equality   := comparison ('=' comparison | '<>' comparison | IS [NOT] NULL)*
    comparison := unary ('>' unary | '>=' unary | '<' unary | '<=' unary
                         | [NOT] BETWEEN unary AND unary | [NOT] IN '(' string (',' string)* ')'
                         | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string)*
    unary      := '+' unary | '-' unary | NOT unary | primary
    primary    := literal | identifier | '(' or ')'

The string operators are RocketMQ 5's (``filter/.../parser/SelectorParser.jj`` since 5.1.3), parsed only with
``string_operators=True`` (the gRPC receive path); without it the grammar is 4.9's, where ``contains`` and the
others are property names. The broker's pull path and CHECK_CLIENT_CONFIG speak 4.9's.

so ``NOT`` binds tighter than a comparison, as in RocketMQ (write ``NOT (a = 'x')`` or ``a <> 'x'``). Keywords are
case-insensitive; identifiers are ``[A-Za-z_$][A-Za-z0-9_$]*`` and name properties case-sensitively. Literals:
``'text'`` (``''`` escapes a quote), integers (``0``, or digits without a leading zero and an optional ``L``; 32-bit
values are INT, larger ones LONG, beyond 64 bits an error), doubles (``1.5``, ``.5``, ``5.``, ``1E3``), ``TRUE``,
``FALSE``, ``NULL``. ``--`` line comments ended by a line break (without one, ``--`` is two minus signs, as in
RocketMQ's lexer) and ``/* */`` block comments are skipped.

As in RocketMQ, whose entry rule does not end with end-of-input, tokens after the first complete expression are
ignored (``a = 1 b = 2`` is ``a = 1``; ``a = 0L`` is ``a = 0`` followed by the property ``L``); only the token that
ended the expression is read, so it alone can still be a lexical error, and a ``NOT`` there is one (save after
``IS [NOT] NULL``, where RocketMQ's grammar does not look for one).

RocketMQ's construction-time checks are parse errors here too: ``>``/``>=``/``<``/``<=``/``BETWEEN`` take no string,
boolean or NULL literal and no condition; ``=``/``<>`` take no NULL literal (use ``IS NULL``); a TRUE/FALSE literal
cannot equal a non-boolean literal (a negated number is no literal there: ``TRUE = -3`` compiles); ``IN`` needs a
property on its left; ``BETWEEN`` bounds that are both literals must be ordered; a double literal must be finite and
not 0.0 (RocketMQ refuses values below ``Double.MIN_VALUE``);
the whole expression must be a condition; a tree deeper than :data:`MAX_DEPTH` nodes (e.g. more than 200 nested
``NOT`` or parentheses) is refused, because evaluating it would recurse that deep. A chain of ``AND`` (or of ``OR``)
terms counts as one level however long, as a Java broker serves thousands of terms: it is evaluated in a loop.

Errors: every failure raises :class:`Sql92ParseError`, whose message names the problem, the line, the column and the
0-based position. Nothing here caches (see :mod:`processors.filter.cache`) or evaluates (see
:mod:`processors.filter.evaluate`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Final, NamedTuple

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
    depth,
    is_boolean,
)

__all__ = ["KEYWORDS", "MAX_DEPTH", "STRING_OPERATORS", "Sql92ParseError", "Token", "parse", "tokenize"]

KEYWORDS: Final = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"})
#: RocketMQ 5's keywords (``string_operators=True``); in 4.x grammar they are property names.
STRING_OPERATORS: Final = frozenset(op.value for op in StringOp)
#: Deepest tree accepted: evaluation takes about one stack frame per level, and it runs deep inside the pull path.
MAX_DEPTH: Final = 200

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1

# Alternatives in longest-match order: a float always needs '.' or an exponent, so trying it first matches what
# JavaCC's longest-match rule would ("5.5" is one float, "5" then "." is not a decimal followed by a float).
_TOKEN: Final = re.compile(
    r"""
    (?P<ws>[ \t\n\r\f]+)
  | (?P<line_comment>--[^\n\r]*(?:\r\n|\n|\r))
  | (?P<block_comment>/\*.*?\*/)
  | (?P<float>(?:\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+))
  | (?P<decimal>[1-9]\d*[lL]?|0)
  | (?P<string>'(?:''|[^'])*')
  | (?P<ident>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op><>|<=|>=|[=<>(),+-])
    """,
    re.VERBOSE | re.DOTALL | re.ASCII,  # \d: SelectorParser.jj's literals take "0"-"9" only
)


class Sql92ParseError(ValueError):
    """A malformed SQL92 expression. ``reason`` says what is wrong; ``position`` is a 0-based index into
    ``expression`` (its length when the input ended too early); ``line`` and ``column`` are 1-based."""

    def __init__(self, expression: str, position: int, reason: str) -> None:
        self.expression = expression
        self.position = position
        self.reason = reason
        before = expression[:position]
        self.line = before.count("\n") + 1
        self.column = position - (before.rfind("\n") + 1) + 1
        super().__init__(
            f"Invalid SQL92 expression: {reason} at line {self.line}, column {self.column} (position {position})"
        )


class Token(NamedTuple):
    """One lexical token. ``kind``: ``keyword`` (``text`` upper-cased), ``ident``, ``decimal``, ``float``,
    ``string`` (``text`` is the raw quoted form), ``op`` or ``eof``."""

    kind: str
    text: str
    position: int


def tokenize(expression: str, *, string_operators: bool = False) -> list[Token]:
    """The tokens of ``expression``, ending with an ``eof`` token; with ``string_operators``, CONTAINS, STARTSWITH and
    ENDSWITH are keywords. Raises :class:`Sql92ParseError` for a character that starts no token, an unterminated
    string or an unterminated block comment."""
    return list(_lex(expression, string_operators))


def _lex(expression: str, string_operators: bool) -> Iterator[Token]:
    """:func:`tokenize` one token at a time: the parser reads no further than a Java broker's lexer does."""
    keywords = KEYWORDS | STRING_OPERATORS if string_operators else KEYWORDS
    position = 0
    end = len(expression)
    match = _TOKEN.match
    while position < end:
        found = match(expression, position)
        if found is None:
            char = expression[position]
            if char == "'":
                raise Sql92ParseError(expression, position, "unterminated string literal")
            if expression.startswith("/*", position):
                raise Sql92ParseError(expression, position, "unterminated comment")
            raise Sql92ParseError(expression, position, f"unexpected character {char!r}")
        kind = found.lastgroup
        assert kind is not None
        text = found.group()
        if kind == "ident" and text.upper() in keywords:
            yield Token("keyword", text.upper(), position)
        elif kind not in ("ws", "line_comment", "block_comment"):
            yield Token(kind, text, position)
        position = found.end()
    yield Token("eof", "", end)


def parse(expression: str, *, string_operators: bool = False) -> Node:
    """The condition tree of ``expression``, in RocketMQ 4.9's grammar or, with ``string_operators``, RocketMQ 5's.
    Raises :class:`Sql92ParseError` (see the module docstring)."""
    try:
        tree = _Parser(expression, string_operators).parse()
    except RecursionError:
        raise Sql92ParseError(expression, 0, "expression nests too deeply") from None
    if depth(tree) > MAX_DEPTH:
        raise Sql92ParseError(expression, 0, f"expression nests deeper than {MAX_DEPTH} levels")
    return tree


_COMPARISON_OPS: Final = {">": CompareOp.GT, ">=": CompareOp.GE, "<": CompareOp.LT, "<=": CompareOp.LE}
#: Keywords that follow a comparison's left operand, each after an optional NOT.
_POSTFIX_KEYWORDS: Final = frozenset({"BETWEEN", "IN"}) | STRING_OPERATORS


def _describe(token: Token) -> str:
    if token.kind == "eof":
        return "end of input"
    return f"'{token.text}'"


class _Parser:
    def __init__(self, expression: str, string_operators: bool) -> None:
        self.expression = expression
        self._lexer = _lex(expression, string_operators)
        #: The tokens lexed so far, ending with ``eof`` once the input is exhausted.
        self.tokens: list[Token] = []
        self.index = 0

    # ---- token helpers ---------------------------------------------------------------------------------------

    def _token(self, index: int) -> Token:
        """Token ``index``, lexed on demand (raises for a lexical error there); ``eof`` past the end."""
        tokens = self.tokens
        while len(tokens) <= index and not (tokens and tokens[-1].kind == "eof"):
            tokens.append(next(self._lexer))
        return tokens[min(index, len(tokens) - 1)]

    @property
    def current(self) -> Token:
        return self._token(self.index)

    def _peek(self, ahead: int = 1) -> Token:
        return self._token(self.index + ahead)

    def _advance(self) -> Token:
        token = self._token(self.index)
        if token.kind != "eof":
            self.index += 1
        return token

    def _at(self, kind: str, text: str) -> bool:
        token = self._token(self.index)
        return token.kind == kind and token.text == text

    def _expect(self, kind: str, text: str, what: str) -> Token:
        token = self.current
        if token.kind != kind or token.text != text:
            raise self._error(token, f"expected {what} but found {_describe(token)}")
        return self._advance()

    def _error(self, token: Token, reason: str) -> Sql92ParseError:
        return Sql92ParseError(self.expression, token.position, reason)

    # ---- grammar ---------------------------------------------------------------------------------------------

    def parse(self) -> Node:
        first = self.current
        if first.kind == "eof":
            raise self._error(first, "empty expression")
        node = self._or()
        # JmsSelector in filter/src/main/java/org/apache/rocketmq/filter/parser/SelectorParser.jj ends without <EOF>:
        # whatever follows the first complete expression is ignored, and only the one token that ended it is lexed
        # (a NOT the comparison loop saw is refused there, see _comparison).
        return self._as_boolean(node, first)

    def _or(self) -> Node:
        start = self.current
        left = self._and()
        while self._at("keyword", "OR"):
            operator = self._advance()
            right_start = self.current
            right = self._and()
            left = Or(self._as_boolean(left, start, operator), self._as_boolean(right, right_start, operator))
        return left

    def _and(self) -> Node:
        start = self.current
        left = self._equality()
        while self._at("keyword", "AND"):
            operator = self._advance()
            right_start = self.current
            right = self._equality()
            left = And(self._as_boolean(left, start, operator), self._as_boolean(right, right_start, operator))
        return left

    def _equality(self) -> Node:
        left = self._comparison()
        while True:
            token = self.current
            if token.kind == "op" and token.text in ("=", "<>"):
                self._advance()
                right = self._comparison()
                self._check_equal_operands(left, right, token)
                left = Comparison(CompareOp.EQ if token.text == "=" else CompareOp.NE, left, right)
            elif token.kind == "keyword" and token.text == "IS":
                self._advance()
                negated = self._at("keyword", "NOT")
                if negated:
                    self._advance()
                self._expect("keyword", "NULL", "NULL" if negated else "NULL or NOT NULL")
                left = IsNull(left, negated)
            else:
                return left

    def _comparison(self) -> Node:
        left = self._unary()
        while True:
            token = self.current
            if token.kind == "op" and token.text in _COMPARISON_OPS:
                self._advance()
                right = self._unary()
                self._check_orderable(left, token)
                self._check_orderable(right, token)
                left = Comparison(_COMPARISON_OPS[token.text], left, right)
                continue
            negated = token.kind == "keyword" and token.text == "NOT"
            follower = self._peek() if negated else token
            if follower.kind != "keyword" or follower.text not in _POSTFIX_KEYWORDS:
                if negated:
                    # SelectorParser.jj's comparisonExpression loop takes a NOT and then needs BETWEEN or IN, even
                    # after a complete expression; after IS [NOT] NULL (equalityExpression) a NOT ends it unread.
                    raise self._error(token, "unexpected 'NOT'")
                return left
            if negated:
                self._advance()
            self._advance()
            left = self._postfix(follower.text, left, negated, token)

    def _postfix(self, keyword: str, left: Node, negated: bool, operator: Token) -> Node:
        """The rest of ``left [NOT] keyword ...`` for BETWEEN, IN and the string operators, ``keyword`` consumed."""
        if keyword == "BETWEEN":
            low = self._unary()
            self._expect("keyword", "AND", "AND between the BETWEEN bounds")
            high = self._unary()
            return self._between(left, low, high, negated, operator)
        if keyword == "IN":
            if not isinstance(left, Property):
                raise self._error(operator, f"expected a property for IN, got {left.sql()}")
            return In(left, self._string_list(), negated)
        return StringMatch(StringOp(keyword), left, self._string_literal(f"{keyword} takes a string literal"), negated)

    def _unary(self) -> Node:
        token = self.current
        if token.kind == "op" and token.text == "+":
            self._advance()
            return self._unary()
        if token.kind == "op" and token.text == "-":
            self._advance()
            operand = self._unary()
            if isinstance(operand, Literal) and operand.kind.is_number:
                assert isinstance(operand.value, int | float)
                return Literal(-operand.value, operand.kind, negated=True)
            return Negate(operand)
        if token.kind == "keyword" and token.text == "NOT":
            self._advance()
            operand_start = self.current
            return Not(self._as_boolean(self._unary(), operand_start, token))
        return self._primary()

    def _primary(self) -> Node:
        token = self.current
        if token.kind == "op" and token.text == "(":
            self._advance()
            inner = self._or()
            self._expect("op", ")", "')'")
            return inner
        if token.kind == "ident":
            self._advance()
            return Property(token.text)
        if token.kind == "string":
            self._advance()
            return Literal(_unquote(token.text), LiteralKind.STRING)
        if token.kind == "decimal":
            self._advance()
            return self._decimal(token)
        if token.kind == "float":
            self._advance()
            return self._float(token)
        if token.kind == "keyword" and token.text in ("TRUE", "FALSE"):
            self._advance()
            return Literal(token.text == "TRUE", LiteralKind.BOOLEAN)
        if token.kind == "keyword" and token.text == "NULL":
            self._advance()
            return Literal(None, LiteralKind.NULL)
        raise self._error(token, f"expected a property, a literal or '(' but found {_describe(token)}")

    def _string_list(self) -> tuple[str, ...]:
        self._expect("op", "(", "'(' after IN")
        values = [self._string_literal("IN takes string literals only")]
        while self._at("op", ","):
            self._advance()
            values.append(self._string_literal("IN takes string literals only"))
        self._expect("op", ")", "',' or ')' in the IN list")
        return tuple(values)

    def _string_literal(self, rule: str) -> str:
        """The next token's string, or a parse error saying ``rule``."""
        token = self.current
        if token.kind != "string":
            raise self._error(token, f"{rule}, found {_describe(token)}")
        self._advance()
        return _unquote(token.text)

    # ---- literals ----------------------------------------------------------------------------------------------

    def _decimal(self, token: Token) -> Literal:
        digits = token.text.rstrip("lL")
        # Checked by length first: int() refuses more than 4,300 digits with a ValueError, not a parse error (Java's
        # ConstantExpression.createFromDecimal throws NumberFormatException: a parse error too).
        value = int(digits) if len(digits) <= 19 else _LONG_MAX + 1
        if value > _LONG_MAX:
            raise self._error(token, f"integer literal {token.text} does not fit in a long")
        return Literal(value, LiteralKind.INT if value <= _INT_MAX else LiteralKind.LONG)

    def _float(self, token: Token) -> Literal:
        value = float(token.text)
        if math.isinf(value):
            raise self._error(token, f"floating point literal {token.text} is greater than Double.MAX_VALUE")
        if value == 0.0:
            # RocketMQ rejects every double below Double.MIN_VALUE, zero included; a Java broker would refuse it.
            raise self._error(token, f"floating point literal {token.text} is less than Double.MIN_VALUE (4.9E-324)")
        return Literal(value, LiteralKind.DOUBLE)

    # ---- RocketMQ's construction checks ------------------------------------------------------------------------

    def _as_boolean(self, node: Node, start: Token, operator: Token | None = None) -> Node:
        if is_boolean(node):
            return node
        if isinstance(node, Property):
            return BooleanCast(node)
        where = f" as an operand of {operator.text}" if operator is not None else ""
        raise self._error(start, f"expression {node.sql()}{where} will not result in a boolean value")

    def _check_orderable(self, node: Node, operator: Token) -> None:
        if (isinstance(node, Literal) and not node.kind.is_number) or is_boolean(node):
            raise self._error(operator, f"value {node.sql()} cannot be compared with '{operator.text}'")

    def _check_equal_operands(self, left: Node, right: Node, operator: Token) -> None:
        for node in (left, right):
            if isinstance(node, Literal) and node.kind is LiteralKind.NULL:
                raise self._error(operator, f"NULL cannot be compared with '{operator.text}' (use IS NULL)")
        # checkEqualOperandCompatability (filter/src/main/java/org/apache/rocketmq/filter/expression/
        # ComparisonExpression.java) looks at two ConstantExpressions only: a negated number is a UnaryExpression.
        if (
            isinstance(left, Literal)
            and isinstance(right, Literal)
            and left.kind is LiteralKind.BOOLEAN
            and right.kind is not LiteralKind.BOOLEAN
            and not right.negated
        ):
            raise self._error(operator, f"{left.sql()} cannot be compared with {right.sql()}")

    def _between(self, value: Node, low: Node, high: Node, negated: bool, operator: Token) -> Between:
        if not negated and isinstance(low, Literal) and isinstance(high, Literal):
            if low.kind is LiteralKind.NULL or high.kind is LiteralKind.NULL:
                raise self._error(operator, "BETWEEN bounds can not be NULL")
            if (
                low.kind.is_number
                and high.kind.is_number
                and not (low.negated or high.negated)  # Java: createBetween checks ConstantExpressions only
                and isinstance(low.value, int | float)
                and isinstance(high.value, int | float)
                and high.value < low.value
            ):
                raise self._error(
                    operator, f"BETWEEN lower bound {low.sql()} must be less than or equal to upper bound {high.sql()}"
                )
        word = Token(operator.kind, "NOT BETWEEN" if negated else "BETWEEN", operator.position)
        for node in (value, low, high):
            self._check_orderable(node, word)
        return Between(value, low, high, negated)


def _unquote(raw: str) -> str:
    return raw[1:-1].replace("''", "'")
