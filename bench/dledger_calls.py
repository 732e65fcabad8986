"""CPU per call of two steps of a DLedger member, each against the general way it replaced, alternated in one
process (CPU time, not rates: the machine is shared)::

    python -m bench.dledger_calls --rounds 7

- ``answer_decode``: the leader's decode of a follower's push answer (one per follower and entry without
  ``enableBatchPush``): ``decode_push_response`` against the general table decoder (``_from_dict``).
- ``flush_handoff``: a member's hand-off of its flush (every ``flushFileInterval``) to a worker thread, of a no-op:
  ``dledger.handoff.run_in_thread`` against ``trio.to_thread.run_sync``.

One JSON line per case and round (``us_per_call`` of each way), then one summary per case with the medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from dledger import messages
from dledger.handoff import run_in_thread
from dledger.messages import PushEntryResponse, decode_push_response, encode

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
    return {"general": general, "field_by_field": _cpu_us(lambda: decode_push_response(_ANSWER), calls)}


def flush_handoff(calls: int) -> dict[str, float]:
    """CPU us per hand-off of a no-op to a worker thread, each way."""

    async def measure() -> dict[str, float]:
        to_thread = await _cpu_us_async(lambda: trio.to_thread.run_sync(int), calls)
        return {"to_thread": to_thread, "run_in_thread": await _cpu_us_async(lambda: run_in_thread(int), calls)}

    return trio.run(measure)


CASES: dict[str, tuple[Callable[[int], dict[str, float]], int]] = {
    "answer_decode": (answer_decode, 100_000),
    "flush_handoff": (flush_handoff, 2_000),
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
