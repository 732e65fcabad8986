"""``python -m bench.load.consumer``: push-consumer load; latency is end to end, from born timestamp to receipt.

Against the embedded cluster the tool also produces (``--produce-inflight`` producer tasks, ``--size`` bodies) so
that there is something to consume; with ``--namesrv`` and ``--produce-inflight 0`` it only consumes what another
producer sends (the window then starts with the consumer's start). With feeders, the consumer and the feeders'
producer start, and the routes are fetched, before the measured window. Born timestamps are the producer's wall
clock in milliseconds, so latencies have millisecond resolution and assume producer and consumer share a clock (same
host). TPS counts received messages. Example::

    python -m bench.load.consumer --duration 10 --produce-inflight 64 --profile

``--prefill N`` measures the consumer on its own: before the window N messages are sent in batches (not measured),
then the window runs from the consumer's start until it has received all N (or ``--duration`` ends); no feeders run
and the consumer reads from the first offset. Its latencies then say how long messages waited in the queue, not the
end-to-end path. ``--pull-batch-size`` is the push consumer's ``pullBatchSize`` (default 32, as Java's); the broker
caps one pull at ``--max-transfer-count`` messages (its ``maxTransferCountOnMessageInMemory``, default 32), so a
larger batch needs both, e.g. ``--pull-batch-size 256 --max-transfer-count 256``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import trio

from bench.load.run import Budget, Load, Run, common_arguments, exit_status, run_tool, topic_names
from bench.load.stats import LoadStats
from client import ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, MessageExt, Producer, PushConsumer


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench.load.consumer", description="Push-consumer load against rocketrio")
    common_arguments(parser)
    parser.add_argument("--group", default="bench_load_cg")
    parser.add_argument("--consume-batch", type=int, default=32, help="messages per listener call")
    parser.add_argument("--produce-inflight", type=int, default=32, help="producer tasks feeding the topic (0: none)")
    parser.add_argument("--prefill", type=int, default=0, help="messages sent before the window; then only consume")
    parser.add_argument("--pull-batch-size", type=int, default=32, help="the push consumer's pullBatchSize")
    return parser


FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
#: Prefill: messages per send_batch request and requests in flight.
PREFILL_BATCH = 64
PREFILL_INFLIGHT = 8


def make_prefill(args: argparse.Namespace) -> Any:
    """Send ``args.prefill`` messages over the topics in batches, before the measured window."""
    topics = topic_names(args)
    body = b"c" * args.size

    async def prefill(namesrv: str) -> None:
        left = args.prefill
        async with Producer(f"{args.group}_prefill", namesrv) as producer:

            async def sender(task: int) -> None:
                nonlocal left
                topic = topics[task % len(topics)]
                while left > 0:
                    n = min(left, PREFILL_BATCH)
                    left -= n
                    await producer.send_batch([Message(topic, body, tags="TagA") for _ in range(n)])

            async with trio.open_nursery() as nursery:
                for task in range(PREFILL_INFLIGHT):
                    nursery.start_soon(sender, task)

    return prefill


def make_load(args: argparse.Namespace) -> Load:
    """The consumer tool's load. Feeding: the consumer and the feeders' producer are started and the routes fetched
    before the window, the feeders (:func:`feed`) are the window. Prefilled, or without feeders: the window starts
    with the consumer (:func:`receive`), whose first receipts are what it measures. The clients shut down after it."""
    topics = topic_names(args)

    @contextlib.asynccontextmanager
    async def load(namesrv: str, stats: LoadStats) -> AsyncIterator[Run]:
        async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            now_ms = time.time() * 1000
            for m in msgs:
                stats.record(now_ms - m.born_timestamp)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            args.group,
            namesrv,
            consume_from_where=FIRST if args.prefill else ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            consume_message_batch_max_size=args.consume_batch,
            pull_batch_size=args.pull_batch_size,
        )
        for topic in topics:
            consumer.subscribe(topic)
        consumer.register_message_listener(listener)
        if args.prefill or not args.produce_inflight:
            async with contextlib.AsyncExitStack() as stack:
                yield functools.partial(receive, stack, consumer, stats, args.prefill)
            return
        async with consumer, Producer(f"{args.group}_feeder", namesrv) as producer:
            for topic in topics:
                await producer.publish_info(topic)
            yield functools.partial(feed, producer, args, stats)

    return load


async def receive(
    stack: contextlib.AsyncExitStack, consumer: PushConsumer, stats: LoadStats, prefill: int, budget: Budget
) -> None:
    """Start ``consumer`` in ``stack`` and receive until the ``prefill`` messages arrived (0: until the deadline)."""
    await stack.enter_async_context(consumer)
    if not prefill:
        await trio.sleep_until(budget.deadline)
    with trio.move_on_at(budget.deadline):
        while stats.messages < prefill:
            await trio.sleep(0.005)


async def feed(producer: Producer, args: argparse.Namespace, stats: LoadStats, budget: Budget) -> None:
    """``--produce-inflight`` feeders sending until the budget is used up, then a bounded wait for what is still on
    its way; a failed send is counted as the run's failure, feeding goes on."""
    topics = topic_names(args)
    body = b"c" * args.size

    async def feeder(task: int) -> None:
        topic = topics[task % len(topics)]
        while budget.take():
            try:
                await producer.send(Message(topic, body, tags="TagA"))
            except Exception as exc:
                stats.fail(exc)

    async with trio.open_nursery() as nursery:
        for task in range(args.produce_inflight):
            nursery.start_soon(feeder, task)
    with trio.move_on_after(2.0):
        while stats.messages < budget.taken - stats.failed:
            await trio.sleep(0.01)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = build_parser().parse_args(argv)
    keys = ["size", "topics", "queues", "duration", "messages", "produce_inflight", "prefill", "pull_batch_size"]
    settings = {k: getattr(args, k) for k in keys}
    settings["consume_batch"] = args.consume_batch
    prepare = make_prefill(args) if args.prefill else None
    return run_tool("consumer", args, settings, make_load(args), prepare=prepare)


if __name__ == "__main__":
    sys.exit(exit_status(main()))
