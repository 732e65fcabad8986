"""SQL92 property filters (RocketMQ's ``expressionType=SQL92`` subscriptions), testable without a broker.

::

    from processors.filter import compile_sql92

    f = compile_sql92("region IN ('eu', 'us') AND price > 10.0 AND coupon IS NULL")
    f.matches({"region": "eu", "price": "12.5"})       # True
    f.matches_raw(b"region\\x01eu\\x02price\\x019")     # False: a raw properties string, as stored

The grammar is RocketMQ 4.9's; ``compile_sql92(text, string_operators=True)`` parses RocketMQ 5's, which adds
``[NOT] CONTAINS``, ``STARTSWITH`` and ``ENDSWITH`` (the gRPC receive path).

Modules: :mod:`~processors.filter.sql92` (tokenizer, parser, :class:`Sql92ParseError` with the position),
:mod:`~processors.filter.nodes` (the AST), :mod:`~processors.filter.evaluate` (RocketMQ's three-valued evaluation)
and :mod:`~processors.filter.cache` (memoised compilation and the broker's per-subscription cache). The pull
processor evaluates a filter on each candidate's properties read straight from the CommitLog record; the hold service
wakes a parked SQL92 pull only for a message that matches.
"""

from processors.filter.cache import ConsumerFilterCache, compile_sql92
from processors.filter.evaluate import Properties, Sql92EvaluationError, Sql92Filter
from processors.filter.sql92 import Sql92ParseError, parse

__all__ = [
    "ConsumerFilterCache",
    "Properties",
    "Sql92EvaluationError",
    "Sql92Filter",
    "Sql92ParseError",
    "compile_sql92",
    "parse",
]
