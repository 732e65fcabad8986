"""What the gRPC front door costs on the broker's side apart from grpcio, in-process (docs/grpc.md#figures).

- ``work``: an embedded cluster (ASYNC_FLUSH) and the proxy's Trio-side objects (``proxy.startup.build_activity``),
  no gRPC: ``messages`` SendMessage requests of 1 KiB as the official client builds them, then ReceiveMessage of 32
  and one AckMessage per message; µs of the Trio thread's CPU per message for each (``time.thread_time``: CPU, not
  wall time, steadier on a shared machine).
- ``bridge``: :class:`proxy.bridge.TrioBridge` between a Trio run and an asyncio loop on a worker thread, as grpcio's
  server thread uses it: no-op ``call_sync`` one at a time and 16 overlapped; µs of the process's CPU per call.

One JSON line per round. Usage: ``python -m bench.proxy_work [--rounds 3] [--messages 3000] [--calls 5000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from typing import Any

import trio

from broker.embedded import EmbeddedCluster
from proxy.bridge import TrioBridge
from proxy.config import ProxyConfig
from proxy.messaging import MessagingActivity
from proxy.pb import definition, service
from proxy.startup import build_activity
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig

_MD = {"x-mq-client-id": "bench-proxy-work"}
_OK = int(definition.Code.OK)


def send_request(topic: str, i: int) -> Any:
    msg = definition.Message(body=b"x" * 1024)
    msg.topic.name = topic
    sp = msg.system_properties
    sp.message_id = f"01BE{i:028X}"
    sp.born_timestamp.FromMilliseconds(int(time.time() * 1000))
    sp.born_host = "bench"
    sp.message_type = definition.MessageType.NORMAL
    return service.SendMessageRequest(messages=[msg])


def receive_request(topic: str, group: str) -> Any:
    req = service.ReceiveMessageRequest(batch_size=32, auto_renew=False)
    req.group.name = group
    req.message_queue.topic.name = topic
    req.message_queue.id = -1
    req.filter_expression.type = definition.FilterType.TAG
    req.filter_expression.expression = "*"
    req.invisible_duration.FromSeconds(30)
    req.long_polling_timeout.FromSeconds(20)
    return req


def one_round(activity: MessagingActivity, topic: str, group: str, messages: int) -> dict[str, float]:
    """Send, receive and ack ``messages`` on the Trio thread; µs of its CPU per message for each."""
    sent = time.thread_time()
    for i in range(messages):
        answer = activity.send_now(send_request(topic, i), _MD)
        assert answer is not None and answer.status.code == _OK, answer
    spent = {"send": time.thread_time() - sent, "receive": 0.0, "ack": 0.0}
    got = 0
    while got < messages:
        started = time.thread_time()
        responses = activity.receive_now(receive_request(topic, group), _MD, 25.0)
        spent["receive"] += time.thread_time() - started
        assert responses is not None
        for response in responses:
            if not response.HasField("message"):
                continue
            sp = response.message.system_properties
            req = service.AckMessageRequest()
            req.group.name, req.topic.name = group, topic
            req.entries.add(message_id=sp.message_id, receipt_handle=sp.receipt_handle)
            started = time.thread_time()
            answer = activity.now_unless_waiting(activity.consuming.ack, service.AckMessageResponse, req, _MD)
            spent["ack"] += time.thread_time() - started
            assert answer is not None and answer.status.code == _OK, answer
            got += 1
    return {f"{k}_us_per_msg": round(v / messages * 1e6, 1) for k, v in spent.items()}


async def work(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as data:
        async with EmbeddedCluster(data) as cluster:
            activity, _ = build_activity(cluster.controller, ProxyConfig())
            ctx = cluster.controller.context
            for round_no in range(args.rounds):
                topic, group = f"BenchWork{round_no}", f"BenchWorkG{round_no}"
                ctx.topics.create_topic_in_send_back_process(topic, 4)
                ctx.groups.update(SubscriptionGroupConfig(group_name=group))
                figures = one_round(activity, topic, group, args.messages)
                print(json.dumps({"bench": "proxy_work", "case": "work", "round": round_no, **figures}), flush=True)


def _noop() -> int:
    return 1


async def _calls(bridge: TrioBridge, calls: int, overlap: int) -> float:
    """µs of the process's CPU per no-op call, ``overlap`` at a time (asyncio side)."""
    for _ in range(100):
        await bridge.call_sync(_noop)
    started = time.process_time()
    for _ in range(calls // overlap):
        await asyncio.gather(*[bridge.call_sync(_noop) for _ in range(overlap)])
    return (time.process_time() - started) / (calls // overlap * overlap) * 1e6


async def bridge(args: argparse.Namespace) -> None:
    for round_no in range(args.rounds):
        figures = {}
        async with trio.open_nursery() as nursery:
            for name, overlap in (("serial", 1), ("overlapped_16", 16)):
                each = TrioBridge(nursery)  # one bridge per asyncio loop, as each gRPC server thread has its own
                cpu = await trio.to_thread.run_sync(asyncio.run, _calls(each, args.calls, overlap))
                figures[f"{name}_cpu_us_per_call"] = round(cpu, 1)
        print(json.dumps({"bench": "proxy_work", "case": "bridge", "round": round_no, **figures}), flush=True)


async def main(args: argparse.Namespace) -> None:
    if "work" in args.cases:
        await work(args)
    if "bridge" in args.cases:
        await bridge(args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--cases", default="work,bridge")
    trio.run(main, parser.parse_args())
