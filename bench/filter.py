"""Filtered pull throughput: SQL92 pulls against tag pulls on the broker's pull path. One JSON object per line::

    {"bench": "filter", "op": "pull", "case": "tag", "expression": "TagA", "messages": 20000, "delivered": 5000,
     "entries_per_s": ..., "msgs_per_s": ..., "ratio_to_tag": 1.0}
    {"bench": "filter", "op": "match", "case": "sql_props", "matches_per_s": ...}

- ``pull``: a queue of ``messages`` stored messages (Java-like system properties plus ``region`` and ``amount``) is
  drained from offset 0 with 32-message pulls through :meth:`~processors.pull.PullMessageProcessor.pull` (checks,
  store lookup, filters, response; no network), following ``nextBeginOffset``. Cases: ``all`` (``*``), ``tag``
  (``TagA``: the consume-queue tags code, 1 in 4 match), ``sql_tags`` (``TAGS = 'TagA'``: the same messages through
  SQL92, which reads every candidate's properties from the CommitLog) and ``sql_props`` (``region IN (...) AND amount
  > 500``, about 1 in 4). ``entries_per_s`` counts consume-queue entries scanned, ``msgs_per_s`` messages delivered;
  ``ratio_to_tag`` = this case's entries/s over the tag pull's.
- ``match``: one compiled filter on one raw properties string, per second (the per-candidate cost of SQL92 pulls),
  next to ``decode_properties`` alone.

Figures are best of ``--rounds``; compare them as ratios within one run. ``--profile`` re-runs the measurement under
``py-spy record`` and writes ``bench/results/filter.svg``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import trio
import trio.testing

from bench.codec import py_spy
from broker.broker_config import BrokerConfig
from broker.context import BrokerState, build_context, load_managers
from processors.filter import compile_sql92
from processors.pull import PullMessageProcessor
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.message import MessageRecord
from remoting.codec.message_properties import decode_properties, encode_properties
from remoting.codec.msgid import pack_socket_address
from remoting.connection import Connection
from remoting.processor import RequestContext
from store.message_store import MessageStore
from store.metadata_files import TopicConfig
from store.store_config import StoreConfig

TOPIC: Final = "BenchFilter"
GROUP: Final = "bench_filter_group"
TAGS: Final = ("TagA", "TagB", "TagC", "TagD")
REGIONS: Final = ("eu", "us", "apac", "sa")
CASES: Final = (
    ("all", "*", "TAG"),
    ("tag", "TagA", "TAG"),
    ("sql_tags", "TAGS = 'TagA'", "SQL92"),
    ("sql_props", "region IN ('eu', 'us') AND amount > 500", "SQL92"),
)


def emit(record: dict[str, object]) -> None:
    print(json.dumps({"bench": "filter", **record}), flush=True)


def properties_of(i: int) -> str:
    return encode_properties(
        {
            "UNIQ_KEY": f"7F00000100012A9F1C2B3D4E{i:08X}",
            "TAGS": TAGS[i % 4],
            "KEYS": f"order-{i}",
            "WAIT": "true",
            "region": REGIONS[(i // 4) % 4],
            "amount": str((i * 7919) % 1000),
            "CLUSTER": "DefaultCluster",
        }
    )


def open_broker(root: Path, messages: int) -> BrokerState:
    config = BrokerConfig(store_path_root_dir=str(root), enable_property_filter=True, listen_port=10911)
    store = MessageStore(
        StoreConfig(root, mapped_file_size_commit_log=64 << 20, max_hash_slot_num=4096, max_index_num=16_384),
        store_host=pack_socket_address("127.0.0.1", 10911),
    )
    store.load()
    broker = build_context(config, store)
    load_managers(broker)
    broker.topics.update_topic(TopicConfig(TOPIC, 1, 1))
    born = pack_socket_address("10.0.0.7", 40000)
    for i in range(messages):
        store.append(
            MessageRecord(
                topic=TOPIC,
                body=b"m" * 256,
                queue_id=0,
                properties=properties_of(i),
                born_timestamp=1_700_000_000_000,
                born_host=born,
                store_host=store.store_host,
            )
        )
    return broker


def pull_command(
    expression: str, kind: str, offset: int = 0, topic: str = TOPIC, group: str = GROUP
) -> RemotingCommand:
    """A PULL_MESSAGE of up to 32 messages from queue 0 at ``offset``, not suspended, subscribed by ``expression``."""
    fields = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": "0",
        "queueOffset": str(offset),
        "maxMsgNums": "32",
        "sysFlag": "4",
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subVersion": "1",
        "subscription": expression,
        "expressionType": kind,
    }
    return request(RequestCode.PULL_MESSAGE, fields)


def drain(processor: PullMessageProcessor, ctx: RequestContext, expression: str, kind: str) -> tuple[int, int]:
    """Pull the whole queue from offset 0; returns (entries scanned, messages delivered)."""
    offset = delivered = 0
    end = processor.broker.store.max_offset_in_queue(TOPIC, 0)
    while offset < end:
        response = processor.pull(ctx, pull_command(expression, kind, offset), allow_suspend=False)
        assert response is not None
        if response.code == ResponseCode.SUCCESS:
            delivered += _count(response.body)
        elif response.code != ResponseCode.PULL_RETRY_IMMEDIATELY:
            raise RuntimeError(f"pull answered {response.code}: {response.remark}")
        offset = int(response.ext_fields["nextBeginOffset"])
    return offset, delivered


def _count(body: bytes | memoryview) -> int:
    count = pos = 0
    while pos < len(body):
        pos += int.from_bytes(body[pos : pos + 4], "big")
        count += 1
    return count


def best_rate(fn: Callable[[], object], rounds: int) -> float:
    """Calls per second of ``fn``, best of ``rounds``."""
    best = 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        best = max(best, 1 / (time.perf_counter() - start))
    return best


def measure_pulls(messages: int, rounds: int) -> None:
    """The ``pull`` lines. Rounds interleave the cases, so machine noise hits them alike."""
    with tempfile.TemporaryDirectory(prefix="bench-filter-") as tmp:
        broker = open_broker(Path(tmp), messages)
        try:
            stream, _other = trio.testing.memory_stream_pair()
            ctx = Connection(stream, ("10.0.0.7", 40000), ("127.0.0.1", 10911)).context
            processor = PullMessageProcessor(broker)
            best: dict[str, float] = dict.fromkeys((case for case, _, _ in CASES), 0.0)
            results: dict[str, tuple[int, int]] = {}
            for _ in range(rounds):
                for case, expression, kind in CASES:
                    start = time.perf_counter()
                    results[case] = drain(processor, ctx, expression, kind)
                    best[case] = max(best[case], 1 / (time.perf_counter() - start))
        finally:
            broker.store.close()
    tag_entries_per_s = results["tag"][0] * best["tag"]
    for case, expression, _kind in CASES:
        scanned, delivered = results[case]
        entries_per_s = scanned * best[case]
        emit(
            {
                "op": "pull",
                "case": case,
                "expression": expression,
                "messages": messages,
                "delivered": delivered,
                "entries_per_s": round(entries_per_s),
                "msgs_per_s": round(delivered * best[case]),
                "ratio_to_tag": round(entries_per_s / tag_entries_per_s, 3),
            }
        )


def measure_matches(rounds: int, calls: int = 50_000) -> None:
    """The ``match`` lines: one compiled filter on one raw properties string."""
    raw = properties_of(5).encode()
    for case, expression, kind in CASES:
        if kind == "SQL92":
            matcher = compile_sql92(expression).matches_raw
            per_s = best_rate(lambda m=matcher: [m(raw) for _ in range(calls)], rounds)  # type: ignore[misc]
            emit({"op": "match", "case": case, "expression": expression, "matches_per_s": round(per_s * calls)})
    per_s = best_rate(lambda: [decode_properties(raw) for _ in range(calls)], rounds)
    emit({"op": "match", "case": "decode_properties_only", "matches_per_s": round(per_s * calls)})


async def measure(messages: int, rounds: int) -> None:
    measure_pulls(messages, rounds)
    measure_matches(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=20_000, help="messages in the pulled queue")
    parser.add_argument("--rounds", type=int, default=5, help="runs per case (the best is reported)")
    parser.add_argument("--profile", action="store_true", help="re-run under py-spy, writing bench/results/filter.svg")
    args = parser.parse_args()
    trio.run(measure, args.messages, args.rounds)
    if args.profile:
        os.makedirs("bench/results", exist_ok=True)
        argv = [sys.executable, "-m", "bench.filter", "--messages", str(args.messages), "--rounds", str(args.rounds)]
        subprocess.run([py_spy(), "record", "-o", "bench/results/filter.svg", "--", *argv], check=True)


if __name__ == "__main__":
    main()
