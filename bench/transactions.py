"""Transaction commit throughput: transactional sends against plain sends through our client, the broker's
END_TRANSACTION cost, and a check round over many pending half messages. One JSON object per line::

    {"bench": "transactions", "op": "send", "kind": "plain", "messages": 2000, "inflight": 16, "msgs_per_s": ...}
    {"bench": "transactions", "op": "send", "kind": "transaction", ..., "msgs_per_s": ..., "visible_per_s": ...}
    {"bench": "transactions", "op": "send_ratio", "cost_ratio": ...}
    {"bench": "transactions", "op": "end_transaction", "messages": 5000, "commits_per_s": ..., "us_per_commit": ...}
    {"bench": "transactions", "op": "check_round", "pending": 5000, "halves_per_s": ...}

- ``send``: ``messages`` messages with ``inflight`` concurrent senders through :class:`~client.producer.Producer`
  (``plain``) and :class:`~client.transaction.TransactionProducer` whose local transaction commits at once
  (``transaction``: half send + END_TRANSACTION oneway; ``visible_per_s`` counts until the last committed message is in
  its consume queue). Name server, broker and client share this process and one Trio loop, so the figures are for
  comparison: ``cost_ratio`` = plain / transactional throughput (a transactional message costs two broker writes and
  a CommitLog lookup);
- ``end_transaction``: the broker's commit path alone (:class:`~processors.end_transaction.EndTransactionProcessor`
  on half messages already stored, no network);
- ``check_round``: one :meth:`~broker.transaction.TransactionCheckService.check_once` that renews ``pending`` unended
  half messages (no producer online, so nothing is sent).

``--profile`` re-runs the measurement under ``py-spy record`` and writes ``bench/results/transactions.svg``; compare
as ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final, cast

import trio

from bench.profiling import py_spy
from broker.broker_config import BrokerConfig
from broker.context import build_context, load_managers
from broker.embedded import EmbeddedCluster
from broker.transaction import TransactionalMessageBridge, TransactionCheckService
from client import LocalTransactionState, Message, MessageExt, Producer, TransactionProducer
from client.admin import Admin
from processors.end_transaction import EndTransactionProcessor
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.headers.transaction import EndTransactionRequestHeader
from remoting.codec.message import MessageRecord
from remoting.processor import RequestContext

TOPIC: Final = "BenchTx"
QUEUES: Final = 4
BODY: Final = b"t" * 128


def emit(record: dict[str, object]) -> None:
    print(json.dumps({"bench": "transactions", **record}), flush=True)


async def _commit(msg: Message, arg: object) -> LocalTransactionState:
    return LocalTransactionState.COMMIT_MESSAGE


async def _unknown(msg: MessageExt) -> LocalTransactionState:
    return LocalTransactionState.UNKNOWN


async def _run_senders(count: int, inflight: int, send_one: Any) -> float:
    """Seconds to send ``count`` messages with ``inflight`` concurrent senders."""
    remaining = iter(range(count))

    async def worker() -> None:
        for _ in remaining:
            await send_one()

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(inflight):
            nursery.start_soon(worker)
    return time.perf_counter() - start


def _visible(cluster: EmbeddedCluster) -> int:
    store = cluster.controller.context.store
    return sum(store.max_offset_in_queue(TOPIC, q) for q in range(QUEUES))


async def measure_sends(messages: int, inflight: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-tx-") as data:
        async with EmbeddedCluster(data, mapped_file_size_commit_log=256 << 20) as cluster:
            async with Admin(cluster.namesrv_addr) as admin:
                await admin.create_topic(TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
            async with Producer("bench-plain", cluster.namesrv_addr) as plain:
                await plain.send(Message(TOPIC, BODY))  # warm up: route and connection
                plain_s = await _run_senders(messages, inflight, lambda: plain.send(Message(TOPIC, BODY)))
            base = _visible(cluster)
            producer = TransactionProducer(
                "bench-tx", cluster.namesrv_addr, execute_local_transaction=_commit, check_local_transaction=_unknown
            )
            async with producer:
                start = time.perf_counter()
                tx_s = await _run_senders(
                    messages, inflight, lambda: producer.send_message_in_transaction(Message(TOPIC, BODY))
                )
                while _visible(cluster) < base + messages:
                    await trio.sleep(0.001)
                visible_s = time.perf_counter() - start
    common = {"op": "send", "messages": messages, "inflight": inflight}
    emit({**common, "kind": "plain", "msgs_per_s": round(messages / plain_s)})
    emit(
        {
            **common,
            "kind": "transaction",
            "msgs_per_s": round(messages / tx_s),
            "visible_per_s": round(messages / visible_s),
        }
    )
    emit({"op": "send_ratio", "cost_ratio": round(plain_s and tx_s / plain_s, 3)})


def _half(producer_group: str, n: int) -> MessageRecord:
    props = f"TAGS\x01t\x02UNIQ_KEY\x01U{n}\x02TRAN_MSG\x01true\x02PGROUP\x01{producer_group}"
    props += f"\x02REAL_TOPIC\x01{TOPIC}\x02REAL_QID\x01{n % QUEUES}"
    born = int(time.time() * 1000) - 60_000  # old enough to be checked, young enough not to be discarded
    return MessageRecord(topic="RMQ_SYS_TRANS_HALF_TOPIC", body=BODY, properties=props, born_timestamp=born)


async def measure_broker_side(messages: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-tx-broker-") as data:
        config = BrokerConfig(store_path_root_dir=data, mapped_file_size_commit_log=256 << 20, listen_port=10911)
        ctx = build_context(config)
        ctx.store.load()
        load_managers(ctx)
        try:
            bridge = TransactionalMessageBridge(ctx)
            processor = EndTransactionProcessor(ctx, bridge)
            stored = [ctx.store.append(_half("bench-tx", n)) for n in range(messages)]
            commands = [
                request(
                    RequestCode.END_TRANSACTION,
                    EndTransactionRequestHeader(
                        producer_group="bench-tx",
                        tran_state_table_offset=r.queue_offset,
                        commit_log_offset=r.phy_offset,
                        commit_or_rollback=8,
                        msg_id=f"U{n}",
                    ).to_ext_fields(),
                )
                for n, r in enumerate(stored)
            ]
            no_peer = cast(RequestContext, None)  # read only when a oneway request is refused
            start = time.perf_counter()
            for command in commands:
                answer = await processor.process(no_peer, command)
                assert answer is not None and answer.code == ResponseCode.SUCCESS, answer
            elapsed = time.perf_counter() - start
            emit(
                {
                    "op": "end_transaction",
                    "messages": messages,
                    "commits_per_s": round(messages / elapsed),
                    "us_per_commit": round(elapsed / messages * 1e6, 1),
                }
            )
            # A check round over as many unended half messages; nobody is online, so none is asked.
            for n in range(messages):
                ctx.store.append(_half("bench-nobody", n))
            service = TransactionCheckService(ctx, bridge, now_ms=lambda: int(time.time() * 1000))
            logging.getLogger("broker.transaction").setLevel(logging.ERROR)
            start = time.perf_counter()
            outcome = await service.check_once()
            elapsed = time.perf_counter() - start
            assert outcome.checked == messages, outcome
            emit({"op": "check_round", "pending": messages, "halves_per_s": round(messages / elapsed)})
        finally:
            ctx.store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=2000, help="messages per client measurement")
    parser.add_argument("--inflight", type=int, default=16, help="concurrent senders")
    parser.add_argument("--broker-messages", type=int, default=5000, help="commits and half messages broker-side")
    parser.add_argument("--profile", action="store_true", help="re-run under py-spy: bench/results/transactions.svg")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    trio.run(measure_sends, args.messages, args.inflight)
    trio.run(measure_broker_side, args.broker_messages)
    if args.profile:
        Path("bench/results").mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "bench.transactions", "--messages", str(args.messages)]
        argv += ["--inflight", str(args.inflight), "--broker-messages", str(args.broker_messages)]
        subprocess.run([py_spy(), "record", "-o", "bench/results/transactions.svg", "--", *argv], check=True)


if __name__ == "__main__":
    main()
