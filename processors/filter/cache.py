"""Compiled SQL92 subscriptions: :func:`compile_sql92` and the broker's :class:`ConsumerFilterCache`.

:func:`compile_sql92` parses and compiles one expression; results (and parse errors, as RocketMQ's parse cache keeps
them) are memoised by text, since every consumer restart brings a new ``subVersion`` for the same expression.

:class:`ConsumerFilterCache` is RocketMQ's ``ConsumerFilterManager`` reduced to what a pull needs: the compiled filter
of a subscription (4.9's grammar, as the pull path is 4.9's), keyed by ``(group, topic, subVersion)``, so a pull never
re-parses. An entry whose expression
differs from the one asked for (a client reusing a version) is recompiled. The cache is bounded (least recently used
entries go first) and owned by one broker's pull processor; it is not thread-safe (the broker runs on one Trio
thread).

Errors: both raise :class:`~processors.filter.sql92.Sql92ParseError` for a malformed expression, every time it is
asked for.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from typing import Final

from processors.filter.evaluate import Sql92Filter, compile_tree, referenced_properties
from processors.filter.sql92 import Sql92ParseError, parse

__all__ = ["DEFAULT_CAPACITY", "ConsumerFilterCache", "compile_sql92"]

#: Subscriptions kept per broker; a subscription costs a small tree of closures.
DEFAULT_CAPACITY: Final = 4096


def compile_sql92(expression: str, *, string_operators: bool = False) -> Sql92Filter:
    """The compiled filter of ``expression`` in RocketMQ 4.9's grammar or, with ``string_operators``, RocketMQ 5's
    (:mod:`processors.filter.sql92`). Raises :class:`Sql92ParseError` when it does not parse."""
    result = _compile_memoised(expression, string_operators)
    if isinstance(result, Sql92ParseError):
        raise _fresh(result)
    return result


def _fresh(error: Sql92ParseError) -> Sql92ParseError:
    """A new error like the cached one: raising the cached object again would chain every raise's frames onto its
    traceback, kept alive by the cache (a client retrying a bad expression grew the broker's memory without end)."""
    return Sql92ParseError(error.expression, error.position, error.reason)


@functools.lru_cache(maxsize=1024)
def _compile_memoised(expression: str, string_operators: bool) -> Sql92Filter | Sql92ParseError:
    try:
        tree = parse(expression, string_operators=string_operators)
    except Sql92ParseError as error:
        return error
    return Sql92Filter(expression, tree, referenced_properties(tree), evaluator=compile_tree(tree))


class ConsumerFilterCache:
    """Compiled filters by ``(group, topic, subVersion)``; see the module docstring."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"the filter cache needs room for at least one subscription, got {capacity}")
        self._capacity = capacity
        self._entries: OrderedDict[tuple[str, str, int], Sql92Filter | Sql92ParseError] = OrderedDict()
        #: Lookups answered without compiling (for tests and runtime info).
        self.hits = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, group: str, topic: str, sub_version: int, expression: str) -> Sql92Filter:
        """The filter for this subscription version; raises :class:`Sql92ParseError` for a bad expression."""
        key = (group, topic, sub_version)
        entries = self._entries
        entry = entries.get(key)
        if entry is not None and entry.expression == expression:
            self.hits += 1
            entries.move_to_end(key)
        else:
            entry = _compile_memoised(expression, False)
            entries[key] = entry
            entries.move_to_end(key)
            if len(entries) > self._capacity:
                entries.popitem(last=False)
        if isinstance(entry, Sql92ParseError):
            raise _fresh(entry)
        return entry
