"""What pop consumption costs the broker per message, against the 4.x pull path over the same store, in-process
(no network, no gRPC): docs/grpc.md#figures.

An embedded cluster (ASYNC_FLUSH, temporary data) stores ``messages`` messages of 1 KiB; then, on the Trio thread:

- ``pull``: ``MessageStore.get`` of 32 from the group's offset and the offset commit, as PullMessageProcessor does;
- ``pop_ack``: ``PopService.pop`` of 32 (offsets, one checkpoint timer message per pop and queue) and one ``ack`` per
  message (an ACK record each), then the revive loop's work for those records once the checkpoints are due.

One JSON line per round: µs of this thread's CPU per message for each (CPU, not wall time: steadier on a shared
machine); rounds alternate which goes first. Usage: ``python -m bench.pop [--rounds 3] [--messages 20000]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import trio

from broker.embedded import EmbeddedCluster
from broker.pop import PopService
from broker.pop.revive import ReviveService
from remoting.codec.message import MessageRecord, decode_record


def fill(cluster: EmbeddedCluster, topic: str, messages: int) -> None:
    ctx = cluster.controller.context
    ctx.topics.create_topic_in_send_back_process(topic, 4)
    for i in range(messages):
        ctx.store.append(MessageRecord(topic=topic, body=b"x" * 1024, queue_id=i % 4, properties="TAGS\x01a"))


def pull(cluster: EmbeddedCluster, topic: str, group: str, messages: int) -> float:
    ctx = cluster.controller.context
    got = 0
    started = time.thread_time()
    while got < messages:
        for qid in range(4):
            offset = max(ctx.offsets.query(group, topic, qid), 0)
            result = ctx.store.get(topic, qid, offset, 32)
            got += len([decode_record(m) for m in result.messages])
            ctx.offsets.commit(group, topic, qid, result.next_begin_offset)
    return (time.thread_time() - started) / got * 1e6


def pop_ack(pop: PopService, revive: ReviveService, topic: str, group: str, messages: int) -> float:
    got = 0
    started = time.thread_time()
    while got < messages:
        for popped in pop.pop(group, topic, 32, 1000, None):
            pop.ack(group, topic, popped.handle)
            got += 1
    while revive.revive_once():
        pass
    return (time.thread_time() - started) / got * 1e6


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as data:
        async with EmbeddedCluster(data) as cluster:
            controller = cluster.controller
            pop = PopService(controller.context, controller.timer.rewrite)
            revive = ReviveService(pop)
            for round_no in range(args.rounds):
                topic = f"BenchPop{round_no}"
                fill(cluster, topic, args.messages)
                figures = {}
                for name in ("pull", "pop_ack") if round_no % 2 == 0 else ("pop_ack", "pull"):
                    group = f"G-{name}-{round_no}"
                    if name == "pull":
                        figures[name] = pull(cluster, topic, group, args.messages)
                    else:
                        figures[name] = pop_ack(pop, revive, topic, group, args.messages)
                await trio.sleep(1.6)  # the checkpoints fall due: the revive loop pairs them with their acks
                started = time.thread_time()
                while revive.revive_once():
                    await trio.lowlevel.checkpoint()
                figures["revive"] = (time.thread_time() - started) / args.messages * 1e6
                per_msg = {f"{k}_us_per_msg": round(v, 1) for k, v in figures.items()}
                record = {"bench": "pop", "round": round_no, **per_msg, "redelivered": revive.revived}
                print(json.dumps(record), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=20000)
    trio.run(main, parser.parse_args())
