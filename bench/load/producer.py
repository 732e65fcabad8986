"""``python -m bench.load.producer``: RocketMQ benchmark-style producer load against rocketrio.

Settings: ``--inflight`` (sync/oneway: producer tasks; async: sends outstanding), ``--size``, ``--batch`` (messages
per send_batch, sync: refused with another ``--mode``), ``--tags``/``--keys``, ``--mode sync|async|oneway``,
``--flush-disk-type``, ``--topics``/``--queues``, ``--duration``/``--messages``, ``--connections`` (producers with a
client each; the in-flight budget is split between them). Response time is from the send call to its result
(oneway: to the write); ``ok`` and ``failed`` count messages (a batch's each), ``ok`` only those answered SEND_OK
(:func:`settle`: RocketMQ's benchmark counts any answer), or with ``--mode oneway``, which gets no answer, those
written. Output: one JSON line per second, a
``summary`` line and ``bench/results/producer.json``; ``--profile`` adds ``producer.svg`` and
``producer.speedscope.json`` of the broker. The exit status is 1 when no message succeeded. Example::

    python -m bench.load.producer --mode async --inflight 256 --size 128 --duration 10 --profile
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import attrs
import trio

from bench.load.run import Budget, Load, Run, common_arguments, exit_status, run_tool, topic_names
from bench.load.stats import LoadStats
from client import ClientConfig, Message, Producer, SendResult, SendStatus


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench.load.producer", description="Producer load against rocketrio")
    common_arguments(parser)
    parser.add_argument("--mode", default="sync", choices=("sync", "async", "oneway"))
    parser.add_argument("--inflight", type=int, default=32, help="producer tasks (sync/oneway) or outstanding sends")
    parser.add_argument("--batch", type=int, default=1, help="messages per send (>1: send_batch, --mode sync only)")
    parser.add_argument("--tags", default="TagA", help="tag on every message ('' for none)")
    parser.add_argument("--keys", action="store_true", help="a unique key on every message")
    parser.add_argument("--group", default="bench_load_pg")
    parser.add_argument("--connections", type=int, default=1, help="producers with a client (connection) each")
    return parser


#: What a send came to: its result(s) (a batch's, one per request), ``None`` (a oneway write) or its exception.
Outcome = SendResult | list[SendResult] | Exception | None


def settle(stats: LoadStats, outcome: Outcome, start: float) -> None:
    """Count one send started at ``start`` (trio clock): acknowledged when every result is SEND_OK (a oneway write
    has none); an exception or another status fails it, as in RocketMQ's SendStatus the message is stored but a
    flush or a slave did not confirm it (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE)."""
    if isinstance(outcome, Exception):
        stats.fail(outcome)
        return
    results = outcome if isinstance(outcome, list) else [] if outcome is None else [outcome]
    refused = next((r.send_status for r in results if r.send_status is not SendStatus.SEND_OK), None)
    if refused is None:
        stats.record((trio.current_time() - start) * 1000)
    else:
        stats.fail(f"send status {refused.name}")


def make_load(args: argparse.Namespace) -> Load:
    """The producer tool's load: ``--connections`` producers started and a warm-up send (not counted) to each topic
    from each, so that routes and connections are in place before the window; :class:`Senders` is the window."""
    topics = topic_names(args)
    body = b"x" * args.size
    serial = itertools.count()

    def message(topic: str) -> Message:
        keys = f"k{next(serial)}" if args.keys else None
        return Message(topic, body, tags=args.tags or None, keys=keys)

    @contextlib.asynccontextmanager
    async def load(namesrv: str, stats: LoadStats) -> AsyncIterator[Run]:
        async with contextlib.AsyncExitStack() as stack:
            producers = []
            for n in range(args.connections):  # a client instance per producer: a connection each
                config = ClientConfig(namesrv, instance_name=f"bench_load_{os.getpid()}_{n}")
                producers.append(await stack.enter_async_context(Producer(args.group, namesrv, config=config)))
                for topic in topics:
                    await producers[-1].send(message(topic))
            yield Senders(args, producers, message, stats)

    return load


@attrs.frozen
class Senders:
    """The measured run over started ``producers``: ``--mode``'s senders until the budget is used up, each send
    counted into ``stats`` by :func:`settle` (a failed send is counted and the load goes on)."""

    args: argparse.Namespace
    producers: list[Producer]
    message: Callable[[str], Message]
    stats: LoadStats

    async def __call__(self, budget: Budget) -> None:
        topics = topic_names(self.args)
        async with trio.open_nursery() as nursery:
            if self.args.mode == "async":
                for producer in self.producers:
                    nursery.start_soon(self.windowed, producer, topics, budget)
            else:
                for task in range(self.args.inflight):
                    producer = self.producers[task % len(self.producers)]
                    nursery.start_soon(self.awaiting, producer, topics[task % len(topics)], budget)

    async def awaiting(self, producer: Producer, topic: str, budget: Budget) -> None:
        """One sync, batch or oneway sender: each send awaited before the next."""
        args, message = self.args, self.message
        while budget.take(args.batch):
            start = trio.current_time()
            outcome: Outcome
            try:
                if args.batch > 1:
                    outcome = await producer.send_batch([message(topic) for _ in range(args.batch)])
                elif args.mode == "oneway":
                    outcome = await producer.send_oneway(message(topic))
                else:
                    outcome = await producer.send(message(topic))
            except Exception as exc:
                outcome = exc
            settle(self.stats, outcome, start)

    async def windowed(self, producer: Producer, topics: list[str], budget: Budget) -> None:
        """``producer``'s async sends, its share of ``--inflight`` outstanding, until the last one completed."""
        stats, message = self.stats, self.message
        window = trio.Semaphore(max(1, self.args.inflight // len(self.producers)))
        idle = trio.Event()
        outstanding = 0
        index = 0
        sending = True
        while budget.take():
            try:  # a checkpoint only when the window is full: it is per message otherwise
                window.acquire_nowait()
            except trio.WouldBlock:
                await window.acquire()
            start = trio.current_time()

            def done(result: SendResult | Exception, start: float = start) -> None:
                nonlocal outstanding
                settle(stats, result, start)
                outstanding -= 1
                window.release()
                if outstanding == 0 and not sending:
                    idle.set()

            outstanding += 1
            producer.send_async(message(topics[index % len(topics)]), done)
            index += 1
        sending = False  # from here the last completion ends the run, not a lull in the middle of it
        if outstanding:
            await idle.wait()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.batch > 1 and args.mode != "sync":
        parser.error(f"--batch {args.batch} sends sync batches (send_batch): not with --mode {args.mode}")
    settings = {
        k: getattr(args, k)
        for k in (
            "mode",
            "inflight",
            "connections",
            "size",
            "batch",
            "tags",
            "keys",
            "topics",
            "queues",
            "duration",
            "messages",
        )
    }
    return run_tool("producer", args, settings, make_load(args), per_sample=args.batch)


if __name__ == "__main__":
    sys.exit(exit_status(main()))
