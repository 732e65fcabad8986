"""CPU per call of two steps of a DLedger member, each against the general way it replaced, alternated in one
process (CPU time, not rates: the machine is shared)::

    python -m bench.dledger_calls --rounds 7

- ``answer_decode``: the leader's decode of a follower's push answer (one per follower and entry without
  ``enableBatchPush``): ``decode_push_response`` in C (``push_answer``) and its Python twin (field by field)
  against the general table decoder (``_from_dict``).
- ``flush_handoff``: a member's hand-off of its flush (every ``flushFileInterval``) to a worker thread, of a no-op:
  ``dledger.handoff.run_in_thread`` against ``trio.to_thread.run_sync``.

- ``push_encode``: a leader's batch push of 11 entries (200-byte bodies), encoded once per follower of two:
  dledger/_entries.c's ``push_json`` against the Python twin (each entry's JSON made once, kept for the second).
  ``push_encode_one`` the same for a push of one entry (DLedger's default push).
- ``push_decode``: a follower's decode of that push: ``push_request`` (entries by ``decode_entries``) in C
  against the Python twin; ``push_decode_one`` the same for a push of one entry (DLedger's default push).
- ``follower_write``: a follower's write of those 11 entries into its files (``append_run_as_follower``): one C
  call against the Python write of each entry.
- ``leader_append``: a leader's append of one send (``append_record_as_leader``: the record encoded in place, then
  the entry's header and index record): sealed by ``seal_entry`` in C against the Python twin.
- ``post_flush``: what a member of a group of three does after each flush (every ``flushFileInterval``) without
  ``sync_before_ack``: ``RaftNode.on_flushed`` (nothing waits, no pass) against the whole work loop it used to run.

One JSON line per case and round (``us_per_call`` of each way), then one summary per case with the medians.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from dledger import file_store, messages
from dledger.codes import PushType
from dledger.config import DLedgerConfig
from dledger.entry import Entry, place
from dledger.file_store import FileLedger, FileTermStore
from dledger.handoff import run_in_thread
from dledger.messages import PushEntryRequest, PushEntryResponse, decode_push, decode_push_response, encode
from dledger.node import RaftNode
from remoting.codec.message import MessageRecord
from remoting.codec.record_batch import encode_record_into

_ANSWER = encode(PushEntryResponse(group="DLedgerGroup-broker-a", remote_id="n0", local_id="n1", leader_id="n0",
                                   term=3, code=200, index=123_456, begin_index=0, end_index=123_456))  # fmt: skip


def _cpu_us(call: Callable[[], object], calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        call()
    return (time.process_time() - start) / calls * 1e6


async def _cpu_us_async(call: Callable[[], Awaitable[object]], calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        await call()
    return (time.process_time() - start) / calls * 1e6


def answer_decode(calls: int) -> dict[str, float]:
    """CPU us per decode of a follower's usual answer, each way."""
    general = _cpu_us(lambda: messages._from_dict(PushEntryResponse, messages._object(_ANSWER)), calls)
    ways = _both_ways(messages, lambda: decode_push_response(_ANSWER), calls)
    return {"general": general, "field_by_field": ways["python"], "c": ways["c"]}


def flush_handoff(calls: int) -> dict[str, float]:
    """CPU us per hand-off of a no-op to a worker thread, each way."""

    async def measure() -> dict[str, float]:
        to_thread = await _cpu_us_async(lambda: trio.to_thread.run_sync(int), calls)
        return {"to_thread": to_thread, "run_in_thread": await _cpu_us_async(lambda: run_in_thread(int), calls)}

    return trio.run(measure)


_RUN = 11
_BODY = 200


def _push(entries: tuple[Entry, ...], remote: str = "n1") -> PushEntryRequest:
    return PushEntryRequest(group="DLedgerGroup-broker-a", remote_id=remote, local_id="n0", leader_id="n0", term=3,
                            type=PushType.APPEND, commit_index=entries[0].index - 1, batch_entry=entries)  # fmt: skip


def _entries(first: int, count: int) -> tuple[Entry, ...]:
    return tuple(
        Entry(i, 3, i * (48 + _BODY), bytes([i % 256]) * _BODY, body_crc=i) for i in range(first, first + count)
    )


def _both_ways(module: Any, way: Callable[[], object], calls: int) -> dict[str, float]:
    """CPU us per call of ``way`` with ``module._native`` the C extension, then with it None (the Python twin)."""
    native = module._native
    try:
        c_way = _cpu_us(way, calls)
        module._native = None
        return {"c": c_way, "python": _cpu_us(way, calls)}
    finally:
        module._native = native


def push_encode(calls: int) -> dict[str, float]:
    """CPU us per batch push of :data:`_RUN` entries encoded for two followers, each way (fresh entries each call,
    as a leader's new entries are)."""
    runs = iter([_entries(i * _RUN, _RUN) for i in range(2 * calls + 2)])

    def encode_for_both() -> None:
        entries = next(runs)
        messages.encode_push(_push(entries, "n1"))
        messages.encode_push(_push(entries, "n2"))

    return _both_ways(messages, encode_for_both, calls)


def push_encode_one(calls: int) -> dict[str, float]:
    """CPU us per push of one entry (DLedger's default push) encoded for two followers, each way."""
    entries = iter([_entries(i, 1)[0] for i in range(2 * calls + 2)])

    def encode_for_both() -> None:
        entry = next(entries)
        for remote in ("n1", "n2"):
            messages.encode_push(PushEntryRequest(group="DLedgerGroup-broker-a", remote_id=remote, local_id="n0",
                                                  leader_id="n0", term=3, type=PushType.APPEND,
                                                  commit_index=entry.index - 1, entry=entry))  # fmt: skip

    return _both_ways(messages, encode_for_both, calls)


def push_decode(calls: int) -> dict[str, float]:
    """CPU us per decode of a batch push of :data:`_RUN` entries, each way."""
    body = encode(_push(_entries(1000, _RUN)))
    return _both_ways(messages, lambda: decode_push(body), calls)


def push_decode_one(calls: int) -> dict[str, float]:
    """CPU us per decode of a push of one entry (DLedger's default push), each way."""
    (entry,) = _entries(1000, 1)
    body = encode(PushEntryRequest(group="DLedgerGroup-broker-a", remote_id="n1", local_id="n0", leader_id="n0",
                                   term=3, type=PushType.APPEND, commit_index=999, entry=entry))  # fmt: skip
    return _both_ways(messages, lambda: decode_push(body), calls)


def _each_way_on_a_fresh_log(make_call: Callable[[FileLedger], Callable[[], object]], calls: int) -> dict[str, float]:
    """CPU us per call of ``make_call(ledger)()`` with ``file_store._native`` the C extension, then None, each on a
    fresh log of 256 MiB segments."""
    results: dict[str, float] = {}
    native = file_store._native
    try:
        for way in ("c", "python"):
            file_store._native = native if way == "c" else None
            with tempfile.TemporaryDirectory() as tmp:
                config = DLedgerConfig(group="g", self_id="n0", peers="n0-a:1", store_base_dir=tmp,
                                       mapped_file_size_for_entry_data=_SEGMENT)  # fmt: skip
                ledger = FileLedger(config)
                ledger.load()
                results[way] = _cpu_us(make_call(ledger), calls)
                ledger.close()
    finally:
        file_store._native = native
    return results


_SEGMENT = 1 << 28


def follower_write(calls: int) -> dict[str, float]:
    """CPU us per write of a push's :data:`_RUN` entries into a follower's files, each way."""
    runs, end = [], 0
    for i in range(calls):
        run = []
        for j in range(i * _RUN, (i + 1) * _RUN):
            pos, _ = place(end, 48 + _BODY, _SEGMENT)
            run.append(Entry(j, 3, pos, bytes([j % 256]) * _BODY))
            end = pos + 48 + _BODY
        runs.append(tuple(run))

    def make_call(ledger: FileLedger) -> Callable[[], object]:
        it = iter(runs)
        return lambda: ledger.append_run_as_follower(next(it))

    return _each_way_on_a_fresh_log(make_call, calls)


def leader_append(calls: int) -> dict[str, float]:
    """CPU us per append of one 200-byte send as a leader's entry, each way."""
    record = MessageRecord(topic="TopicTest", body=bytes(_BODY), queue_id=3, flag=0, properties="",
                           born_timestamp=1, born_host=bytes(8), store_host=bytes(8))  # fmt: skip

    def make_call(ledger: FileLedger) -> Callable[[], object]:
        offsets = iter(range(calls))
        return lambda: ledger.append_record_as_leader(3, encode_record_into, next(offsets), lambda: 1, 4096, record)

    return _each_way_on_a_fresh_log(make_call, calls)


def post_flush(calls: int) -> dict[str, float]:
    """CPU us per post-flush step of a member of a group of three, each way."""
    with tempfile.TemporaryDirectory() as tmp:
        config = DLedgerConfig(group="g", self_id="n0", peers="n0-a:1;n1-a:2;n2-a:3", store_base_dir=tmp,
                               mapped_file_size_for_entry_data=_SEGMENT)  # fmt: skip
        ledger = FileLedger(config)
        ledger.load()
        node = RaftNode(config, ledger, FileTermStore(config.default_path), rng=random.Random(1), now=0)

        def whole_pass() -> None:  # the step before: the clock moved, the releases, then the work loop
            node._advance(0)
            node.handler.on_flushed()
            node.quorum.on_flushed()
            node._work()

        results = {"whole_pass": _cpu_us(whole_pass, calls), "on_flushed": _cpu_us(lambda: node.on_flushed(0), calls)}
        ledger.close()
    return results


CASES: dict[str, tuple[Callable[[int], dict[str, float]], int]] = {
    "answer_decode": (answer_decode, 100_000),
    "flush_handoff": (flush_handoff, 2_000),
    "push_encode": (push_encode, 20_000),
    "push_encode_one": (push_encode_one, 50_000),
    "push_decode": (push_decode, 20_000),
    "push_decode_one": (push_decode_one, 50_000),
    "follower_write": (follower_write, 20_000),
    "leader_append": (leader_append, 50_000),
    "post_flush": (post_flush, 50_000),
}


def run(rounds: int, scale: float = 1.0) -> list[dict[str, Any]]:
    """Every case ``rounds`` times, alternated; the lines printed (rounds, then summaries)."""
    lines: list[dict[str, Any]] = []
    seen: dict[str, list[dict[str, float]]] = {name: [] for name in CASES}
    for number in range(rounds):
        for name, (case, calls) in CASES.items():
            result = case(max(1, int(calls * scale)))
            seen[name].append(result)
            lines.append({"round": number, "case": name, "us_per_call": {k: round(v, 2) for k, v in result.items()}})
    for name, results in seen.items():
        medians = {way: round(statistics.median(r[way] for r in results), 2) for way in results[0]}
        lines.append({"summary": name, "rounds": rounds, "median_us_per_call": medians})
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dledger_calls", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--scale", type=float, default=1.0, help="a factor on each case's number of calls")
    args = parser.parse_args()
    for line in run(args.rounds, args.scale):
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
