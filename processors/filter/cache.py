"""Compiled SQL92 subscriptions: :func:`compile_sql92` and the broker's :class:`ConsumerFilterCache`.

:func:`compile_sql92` parses and compiles one expression; results (and parse errors, as RocketMQ's parse cache keeps
them) are memoised by text (the last :data:`MEMO_SIZE`, at most :data:`KEPT_CHARS` characters of them), since every
consumer restart brings a new ``subVersion`` for the same expression.

:class:`ConsumerFilterCache` is RocketMQ's ``ConsumerFilterManager`` reduced to what a pull needs: the compiled filter
of a subscription (4.9's grammar, as the pull path is 4.9's), keyed by ``(group, topic, subVersion)``, so a pull never
re-parses. An entry whose expression differs from the one asked for (a client reusing a version) is recompiled. The
cache is bounded, in entries and in characters (:data:`KEPT_CHARS`, as the memo is; least recently used entries go
first) and owned by one broker's pull processor; it is not thread-safe (it is used on the Trio thread; only the memo
behind it is filled from threads).

:func:`compile_offloaded` is the broker's way in for an expression a client sent: one of :data:`INLINE_LIMIT` characters
or more (parsing costs about 35 us a term, so a 10,000-term OR chain about 0.4 s, a 16 MB one minutes) is compiled in a
worker thread, at most :data:`COMPILE_THREADS` at a time and each expression once however many ask at the same time,
so the event loop every connection shares keeps serving. RocketMQ parses on the thread of the pull or heartbeat that
brought the expression (``ConsumerFilterManager.build`` in
broker/src/main/java/org/apache/rocketmq/broker/filter/ConsumerFilterManager.java, called from
PullMessageProcessor and ClientManageProcessor), so a heavy expression costs one thread, not the broker.
:func:`precompile` does the same for a caller already on a thread of its own. :func:`compiling` lists the expressions
being compiled now.

Errors: both raise :class:`~processors.filter.sql92.Sql92ParseError` for a malformed expression, every time it is
asked for.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Final

import attrs
import trio

from processors.filter.evaluate import Sql92Filter, compile_tree, referenced_properties
from processors.filter.sql92 import Sql92ParseError, parse

__all__ = [
    "COMPILE_THREADS",
    "DEFAULT_CAPACITY",
    "INLINE_LIMIT",
    "KEPT_CHARS",
    "ConsumerFilterCache",
    "Primed",
    "compile_offloaded",
    "compile_sql92",
    "compiling",
    "precompile",
]

#: Subscriptions kept per broker; a subscription costs a small tree of closures.
DEFAULT_CAPACITY: Final = 4096
#: Expressions shorter than this (about 60 terms, a few milliseconds to parse) compile on the event loop: a thread hop
#: would cost more than it saves, and nearly every real subscription is far shorter.
INLINE_LIMIT: Final = 1024
#: Worker threads compiling long expressions at once (each holds the GIL in turns with the loop).
COMPILE_THREADS: Final = 2
#: Compiled expressions (and parse errors) remembered by text.
MEMO_SIZE: Final = 1024
#: The most characters of expressions the memo, and each :class:`ConsumerFilterCache`, keeps (the newest entry is
#: kept whatever its size): a compiled expression takes about 45 bytes a character, and a client may send a new
#: 16 MB one with each pull, so counting entries alone let a few clients hold gigabytes.
KEPT_CHARS: Final = 1 << 21

_memo: OrderedDict[tuple[str, bool], Sql92Filter | Sql92ParseError] = OrderedDict()
_memo_lock = threading.Lock()  # compile_offloaded's threads fill the memo too
_memo_chars = 0  # the characters of the memo's expressions
#: What is being parsed now (a list: two threads may parse one expression at once), for :func:`compiling`.
_parsing: list[tuple[str, bool]] = []
#: Per Trio run: the threads' limiter, and the expressions being compiled in a thread -> set when done (a second
#: asker waits instead of compiling again).
_threads: trio.lowlevel.RunVar[tuple[trio.CapacityLimiter, dict[tuple[str, bool], _Flight]]] = trio.lowlevel.RunVar(
    "sql92_compile_threads"
)


def _run_state() -> tuple[trio.CapacityLimiter, dict[tuple[str, bool], _Flight]]:
    try:
        return _threads.get()
    except LookupError:
        state: tuple[trio.CapacityLimiter, dict[tuple[str, bool], _Flight]] = (
            trio.CapacityLimiter(COMPILE_THREADS),
            {},
        )
        _threads.set(state)
        return state


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


def _memoised(expression: str, string_operators: bool) -> Sql92Filter | Sql92ParseError | None:
    key = (expression, string_operators)
    with _memo_lock:
        found = _memo.get(key)
        if found is not None:
            _memo.move_to_end(key)
        return found


def _compile_memoised(expression: str, string_operators: bool) -> Sql92Filter | Sql92ParseError:
    found = _memoised(expression, string_operators)
    if found is not None:
        return found
    key = (expression, string_operators)
    with _memo_lock:
        _parsing.append(key)
    try:
        tree = parse(expression, string_operators=string_operators)
    except Sql92ParseError as error:
        result: Sql92Filter | Sql92ParseError = error
    else:
        result = Sql92Filter(expression, tree, referenced_properties(tree), evaluator=compile_tree(tree))
    finally:
        with _memo_lock:
            _parsing.remove(key)
    global _memo_chars
    with _memo_lock:
        if key not in _memo:  # another thread may have compiled it meanwhile
            _memo_chars += len(expression)
        _memo[key] = result
        _memo.move_to_end(key)
        while len(_memo) > 1 and (len(_memo) > MEMO_SIZE or _memo_chars > KEPT_CHARS):
            _memo_chars -= len(_memo.popitem(last=False)[0][0])
    return result


def precompile(expression: str, *, string_operators: bool = False) -> None:
    """:func:`compile_offloaded` for a caller on a thread of its own (the gRPC front's asyncio loop hands it to an
    executor thread): compile a long ``expression`` not yet known into the memo. Never raises."""
    if len(expression) >= INLINE_LIMIT:
        _compile_memoised(expression, string_operators)


@attrs.define
class _Flight:
    """One expression being compiled in a thread: set when done, with what it gave (``None``: it was cancelled)."""

    done: trio.Event = attrs.Factory(trio.Event)
    result: Sql92Filter | Sql92ParseError | None = None


async def compile_offloaded(expression: str, *, string_operators: bool = False) -> Sql92Filter | Sql92ParseError | None:
    """Compile ``expression`` (or learn that it does not parse) off the event loop when it is long: a long expression
    not yet known is compiled in a worker thread (see the module docstring), and the result returned and memoised;
    a known one is returned from the memo; a short one gives ``None`` without awaiting anything (compile it inline).
    Hold on to the result rather than count on the memo: it may have let a long expression go by the time the caller
    runs again (:data:`KEPT_CHARS`)."""
    if len(expression) < INLINE_LIMIT:
        return None
    found = _memoised(expression, string_operators)
    if found is not None:
        return found
    limiter, in_flight = _run_state()
    key = (expression, string_operators)
    while (pending := in_flight.get(key)) is not None:
        await pending.done.wait()
        if pending.result is not None:
            return pending.result
        # its asker was cancelled (a broker stopping): this one compiles it (the abandoned thread may fill the memo)
        found = _memoised(expression, string_operators)
        if found is not None:
            return found
    flight = in_flight[key] = _Flight()
    try:
        # Abandoned on cancel: a broker shutting down does not wait for a minutes-long parse to end.
        flight.result = await trio.to_thread.run_sync(
            _compile_memoised, expression, string_operators, limiter=limiter, abandon_on_cancel=True
        )
    finally:
        del in_flight[key]
        flight.done.set()
    return flight.result


def compiling() -> list[str]:
    """The expressions being parsed and compiled right now, in any thread."""
    with _memo_lock:
        return [expression for expression, _ in _parsing]


#: Expressions compiled off the loop for one pull, and what each compiled to (:attr:`ConsumerFilterCache.primed`).
Primed = Mapping[str, Sql92Filter | Sql92ParseError]


class ConsumerFilterCache:
    """Compiled filters by ``(group, topic, subVersion)``; see the module docstring."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"the filter cache needs room for at least one subscription, got {capacity}")
        self._capacity = capacity
        self._entries: OrderedDict[tuple[str, str, int], Sql92Filter | Sql92ParseError] = OrderedDict()
        self._chars = 0  # the characters of the entries' expressions, at most KEPT_CHARS but for the newest
        #: Lookups answered without compiling (for tests and runtime info).
        self.hits = 0
        #: ``expression -> what it compiled to`` that :meth:`get` takes instead of compiling: what the pull processor
        #: compiled off the loop (:func:`compile_offloaded`) for the synchronous pull it runs next.
        self.primed: Primed | None = None

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
            if entry is not None:
                self._chars -= len(entry.expression)
            primed = None if self.primed is None else self.primed.get(expression)
            entry = _compile_memoised(expression, False) if primed is None else primed
            entries[key] = entry
            self._chars += len(expression)
            entries.move_to_end(key)
            while len(entries) > 1 and (len(entries) > self._capacity or self._chars > KEPT_CHARS):
                self._chars -= len(entries.popitem(last=False)[1].expression)
        if isinstance(entry, Sql92ParseError):
            raise _fresh(entry)
        return entry
