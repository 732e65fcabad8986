"""Event-loop stalls from heavy SQL92 subscriptions, with and without the broker's offloading. One JSON object a line::

    {"bench": "filter_fairness", "mode": "offloaded", "op": "compile", "terms": 10000, "max_stall_ms": ...,
     "ticks": ..., "elapsed_ms": ...}
    {"bench": "filter_fairness", "mode": "inline", "op": "evaluate", ...}
    {"bench": "filter_fairness", "mode": "offloaded", "op": "small_pull", "case": "sql_small", "us_per_pull": ...}

An embedded broker (``enablePropertyFilter=true``) serves real sockets on 127.0.0.1 in this process; a ticker task
sleeps 1 ms at a time and records the longest it was kept waiting beyond that (``max_stall_ms``: how long every other
client was kept waiting) and how many times it ran (``ticks``) while a client:

- ``compile``: pulls once with a fresh ``--terms``-term OR chain (``p0 = 'v0' OR p1 = 'v1' ...``): parse and compile;
- ``evaluate``: drains a queue of ``--entries`` messages the same chain (compiled already) refuses, plus one it
  matches, following ``nextBeginOffset``;
- ``arrival``: ``--parked`` pulls are parked on such a chain and one message none of them matches arrives (the hold
  service checks their filters inside the append: ``append_ms``), then one they all match releases them.

``mode``: ``offloaded`` is the broker as shipped (long expressions compiled in a worker thread,
:func:`processors.filter.cache.compile_offloaded`; a pull's evaluation bounded by
:data:`processors.pull.SQL92_EVALUATION_BUDGET`, an arrival's checks of parked pulls by the hold service's
``evaluation_budget``); ``inline`` sets the limits out of reach, which is the broker before
the change (compiled on the loop, every scanned entry evaluated). ``small_pull`` lines time
:meth:`~processors.pull.PullMessageProcessor.process` in process (no network) for a TAG pull and a short SQL92 pull
from the request, and what the change added to it: the path every usual consumer takes must cost what it did.

What remains of ``max_stall_ms`` when offloaded is mostly CPython's full garbage collection, which the compile's
allocations trigger and which holds the interpreter lock whichever thread runs it (tens of milliseconds).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Final

import trio
import trio.testing

import processors.hold as hold_module
import processors.pull as pull_module
from bench import filter as filter_bench
from broker.embedded import EmbeddedCluster
from processors.filter import cache
from processors.pull import PullMessageProcessor
from remoting.client import RemotingClient
from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.message import MessageRecord
from remoting.connection import Connection
from store.metadata_files import TopicConfig

TOPIC: Final = "BenchFairness"
GROUP: Final = "bench_fairness_group"
SHIPPED: Final = (cache.INLINE_LIMIT, pull_module.SQL92_EVALUATION_BUDGET)
OUT_OF_REACH: Final = 1 << 62


def emit(record: dict[str, object]) -> None:
    print(json.dumps({"bench": "filter_fairness", **record}), flush=True)


def set_mode(mode: str) -> None:
    inline_limit, budget = SHIPPED if mode == "offloaded" else (OUT_OF_REACH, OUT_OF_REACH)
    setattr(cache, "INLINE_LIMIT", inline_limit)  # noqa: B010 (a Final constant, changed for the comparison)
    setattr(pull_module, "SQL92_EVALUATION_BUDGET", budget)  # noqa: B010


def pull_command(expression: str, kind: str, offset: int = 0) -> RemotingCommand:
    return filter_bench.pull_command(expression, kind, offset, TOPIC, GROUP)


def chain(terms: int, salt: str) -> str:
    return " OR ".join(f"p{i} = '{salt}{i}'" for i in range(terms))


class Ticker:
    """Sleeps 1 ms at a time; the longest extra wait while :attr:`on` is the loop's longest stall."""

    def __init__(self) -> None:
        self.on = False
        self.max_stall = 0.0
        self.ticks = 0

    def reset(self) -> None:
        self.max_stall, self.ticks, self.on = 0.0, 0, True

    async def run(self) -> None:
        while True:
            start = time.perf_counter()
            await trio.sleep(0.001)
            if self.on:
                self.ticks += 1
                self.max_stall = max(self.max_stall, time.perf_counter() - start - 0.001)


async def measure(terms: int, entries: int, rounds: int, parked: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-fairness-") as tmp:
        async with EmbeddedCluster(
            Path(tmp) / "cluster",
            enable_property_filter=True,
            mapped_file_size_commit_log=64 << 20,
            mapped_file_size_consume_queue=300_000 * 20,
        ) as cluster:
            broker = cluster.controller.context
            broker.topics.update_topic(TopicConfig(TOPIC, 1, 1))
            for i in range(entries):
                broker.store.append(
                    MessageRecord(TOPIC, b"m" * 64, 0, properties=f"p0\x01skip{i}", store_host=broker.store_host)
                )
            broker.store.append(MessageRecord(TOPIC, b"hit", 0, properties="p0\x01hit0", store_host=broker.store_host))
            ticker = Ticker()
            async with trio.open_nursery() as nursery, RemotingClient() as client:
                nursery.start_soon(ticker.run)
                addr = cluster.broker_addr
                for round_no in range(rounds):
                    for mode in ("inline", "offloaded"):
                        set_mode(mode)
                        expression = chain(terms, f"r{round_no}{mode}")
                        ticker.reset()
                        start = time.perf_counter()
                        # at the last entry: the parse and compile, and one evaluation
                        answer = await client.invoke(addr, pull_command(expression, "SQL92", entries), 600)
                        elapsed = time.perf_counter() - start
                        ticker.on = False
                        assert answer.code == ResponseCode.PULL_RETRY_IMMEDIATELY, answer.remark
                        emit(_line(mode, "compile", terms, ticker, elapsed))
                        # evaluate: a chain matching only the last message ("hit0" is term 0 of salt "hit")
                        expression = chain(terms, "hit")
                        await client.invoke(addr, pull_command(expression, "SQL92", entries), 600)  # compiled
                        ticker.reset()
                        start = time.perf_counter()
                        offset = pulls = 0
                        while True:
                            answer = await client.invoke(addr, pull_command(expression, "SQL92", offset), 600)
                            pulls += 1
                            offset = int(answer.ext_fields["nextBeginOffset"])
                            if answer.code == ResponseCode.SUCCESS:
                                break
                        elapsed = time.perf_counter() - start
                        ticker.on = False
                        emit(
                            {**_line(mode, "evaluate", terms, ticker, elapsed), "entries": entries + 1, "pulls": pulls}
                        )
                        await arrival(cluster, mode, terms, parked, ticker)
                nursery.cancel_scope.cancel()
            await small_pulls(PullMessageProcessor(broker), entries)
    set_mode("offloaded")


async def arrival(cluster: EmbeddedCluster, mode: str, terms: int, parked: int, ticker: Ticker) -> None:
    """The ``arrival`` op: ``parked`` pulls held on a ``terms``-term chain, one message they refuse, one they match."""
    broker = cluster.controller.context
    hold = broker.hold
    assert hold is not None
    hold.evaluation_budget = hold_module.ARRIVAL_EVALUATION_BUDGET if mode == "offloaded" else OUT_OF_REACH
    expression, offset = chain(terms, "hit"), broker.store.max_offset_in_queue(TOPIC, 0)

    async def park() -> None:
        command = pull_command(expression, "SQL92", offset)
        command.ext_fields.update(sysFlag="6", suspendTimeoutMillis="600000")  # SUSPEND | SUBSCRIPTION
        await client.invoke(cluster.broker_addr, command, 600)

    async with RemotingClient() as client, trio.open_nursery() as nursery:
        for _ in range(parked):
            nursery.start_soon(park)
        while hold.held_count < parked:
            await trio.sleep(0.001)
        ticker.reset()
        start = time.perf_counter()
        broker.store.append(MessageRecord(TOPIC, b"m", 0, properties="p0\x01refused", store_host=broker.store_host))
        append = time.perf_counter() - start
        await trio.sleep(0.2)  # the woken pulls' re-runs
        ticker.on = False
        emit({**_line(mode, "arrival", terms, ticker, append), "parked": parked, "append_ms": round(append * 1e3, 1)})
        broker.store.append(MessageRecord(TOPIC, b"hit", 0, properties="p0\x01hit0", store_host=broker.store_host))
    hold.evaluation_budget = hold_module.ARRIVAL_EVALUATION_BUDGET


def _line(mode: str, op: str, terms: int, ticker: Ticker, elapsed: float) -> dict[str, object]:
    return {
        "mode": mode,
        "op": op,
        "terms": terms,
        "max_stall_ms": round(ticker.max_stall * 1e3, 1),
        "ticks": ticker.ticks,
        "elapsed_ms": round(elapsed * 1e3, 1),
    }


async def small_pulls(processor: PullMessageProcessor, offset: int, calls: int = 20_000) -> None:
    """Pulls of one entry (the queue's last), so the per-request path dominates; ``added_us`` is what the change
    added to each (finding the pull's SQL92 expression and checking that it is short), so ``us_per_pull -
    added_us`` is the pull before it."""
    stream, _other = trio.testing.memory_stream_pair()
    ctx = Connection(stream, ("10.0.0.7", 40000), ("127.0.0.1", 10911)).context
    set_mode("offloaded")
    cases = (("tag", "TagA", "TAG"), ("sql_small", "p0 = 'hit0' AND p1 IS NULL", "SQL92"))
    for case, expression, kind in cases:
        command = pull_command(expression, kind, offset)
        best = added = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(calls):
                await processor.process(ctx, command)
            best = min(best, (time.perf_counter() - start) / calls)
            start = time.perf_counter()
            for _ in range(calls):
                found = processor._sql92_expression(command)
                if found is not None:
                    await cache.compile_offloaded(found)
            added = min(added, (time.perf_counter() - start) / calls)
        emit({"op": "small_pull", "case": case, "us_per_pull": round(best * 1e6, 2), "added_us": round(added * 1e6, 3)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--terms", type=int, default=10_000)
    parser.add_argument("--entries", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--parked", type=int, default=40, help="arrival: pulls parked on the chain")
    args = parser.parse_args()
    trio.run(measure, args.terms, args.entries, args.rounds, args.parked)


if __name__ == "__main__":
    main()
