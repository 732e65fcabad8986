"""One load process of the soak (``python -m bench.load.soak_shard``): its own topic, its own churning producers,
paced senders and push consumer, and its own :class:`~bench.load.soak_load.Ledger`.

:mod:`bench.load.soak` starts several of these so that no load process runs near a full core: a saturated
generator's own event-loop queueing would be what the soak's latency samples measure. Each shard sends to and
consumes from a topic of its own, so its ledger alone decides what it lost.

Protocol: one JSON command per stdin line, one JSON answer per stdout line (nothing else goes to stdout).

- ``{"op": "phase", "rate": R or null, "seconds": S}``: senders for ``S`` seconds at ``R`` msg/s (``null``:
  unpaced); answers ``{"ev": "phase", "acked": N}`` when the phase ends.
- ``{"op": "window"}``: answers ``{"ev": "window", "latencies": <base64 of the doubles>, "failed": N,
  "consumed": N, "live": N, "opened": N, "closed": N, "outstanding": N}`` for the time since the previous window
  (latencies in ms).
- ``{"op": "finish", "drain": S}``: lets the consumer catch up for at most ``S`` seconds, closes every client and
  answers ``{"ev": "final", ...}`` with the ledger's counts; the process then exits.

Ownership: the shard's Trio run owns its pool, consumer and tasks; stdin closing ends it (the parent died). Errors:
a failed send is counted and the load goes on; a command it does not know is answered ``{"ev": "error"}``.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import subprocess
import sys
from array import array
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import trio

from bench.load.soak_load import ChurningPool, Ledger, Pacer, sender, seq_of
from bench.load.stats import LoadStats
from client import ConsumeConcurrentlyStatus, ConsumeFromWhere, MessageExt, PushConsumer


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench.load.soak_shard", description="One load process of the soak")
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True, help="consumer group; the producers' is <group>_pg")
    parser.add_argument("--senders", type=int, required=True)
    parser.add_argument("--connections", type=int, required=True)
    parser.add_argument("--lifetime", type=float, nargs=2, required=True, metavar=("MIN", "MAX"))
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    return parser


class Shard:
    """The shard's load and ledger; :meth:`serve` answers the parent's commands."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.ledger = Ledger()
        self.stats = LoadStats()
        self.pool = ChurningPool(args.namesrv, f"{args.group}_pg", args.connections, tuple(args.lifetime), args.seed)
        self.last_consumed = 0

    async def listener(self, msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        for msg in msgs:
            self.ledger.consume(seq_of(msg.body))
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def phase(self, rate: float | None, seconds: float) -> dict[str, Any]:
        acked = self.ledger.acked
        pacer = Pacer(rate)
        until = trio.current_time() + seconds
        args = self.args
        async with trio.open_nursery() as nursery:
            for _ in range(args.senders):
                nursery.start_soon(sender, args.topic, args.size, self.pool, self.ledger, pacer, self.stats, until)
        return {"ev": "phase", "acked": self.ledger.acked - acked}

    def window(self) -> dict[str, Any]:
        taken, failed = self.stats.take_raw()
        consumed, self.last_consumed = self.ledger.consumed - self.last_consumed, self.ledger.consumed
        pool = self.pool
        return {
            "ev": "window",
            "latencies": base64.b64encode(taken.tobytes()).decode(),
            "failed": failed,
            "consumed": consumed,
            "live": len(pool.live),
            "opened": pool.opened,
            "closed": pool.closed,
            "outstanding": self.ledger.outstanding,
        }

    async def drain(self, seconds: float) -> None:
        with trio.move_on_after(seconds):
            while self.ledger.outstanding:
                await trio.sleep(0.1)

    def final(self) -> dict[str, Any]:
        ledger, pool = self.ledger, self.pool
        return {
            "ev": "final",
            "acked": ledger.acked,
            "consumed": ledger.consumed,
            "duplicates": ledger.duplicates,
            "outstanding": ledger.outstanding,
            "failed_sends": self.stats.failed,
            "last_error": self.stats.last_error,
            "producers_opened": pool.opened,
            "producers_closed": pool.closed,
            "producer_start_failures": pool.start_failures,
        }

    async def serve(self) -> None:
        consumer = PushConsumer(
            self.args.group,
            self.args.namesrv,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            consume_message_batch_max_size=32,
        )
        consumer.subscribe(self.args.topic)
        consumer.register_message_listener(self.listener)
        stdin = trio.wrap_file(sys.stdin)
        async with consumer, trio.open_nursery() as nursery:
            await nursery.start(self.pool.run)
            emit({"ev": "ready"})
            while line := await stdin.readline():
                cmd = json.loads(line)
                if cmd["op"] == "finish":
                    await self.drain(cmd["drain"])
                    break
                nursery.start_soon(self.answer, cmd)
            nursery.cancel_scope.cancel()  # the pool closes every producer
        emit(self.final())

    async def answer(self, cmd: dict[str, Any]) -> None:
        if cmd["op"] == "phase":
            emit(await self.phase(cmd["rate"], cmd["seconds"]))
        elif cmd["op"] == "window":
            emit(self.window())
        else:
            emit({"ev": "error", "error": f"unknown op {cmd['op']!r}"})


T = TypeVar("T")


async def gather(calls: Iterable[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run ``calls`` concurrently; their results in the same order (the first error cancels the rest)."""
    pending = list(calls)
    results: list[Any] = [None] * len(pending)

    async def one(i: int, call: Callable[[], Awaitable[T]]) -> None:
        results[i] = await call()

    async with trio.open_nursery() as nursery:
        for i, call in enumerate(pending):
            nursery.start_soon(one, i, call)
    return results


class ShardError(RuntimeError):
    """A shard process ended before the answer the parent waited for."""


class ShardProcess:
    """The parent's handle on one shard process: commands in, answers routed by their ``ev``."""

    def __init__(self, name: str, argv: list[str]) -> None:
        self.name = name
        self.argv = argv
        self._proc: trio.Process | None = None
        self._answers: dict[str, tuple[trio.MemorySendChannel[Any], trio.MemoryReceiveChannel[Any]]] = {}

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def _channel(self, ev: str) -> tuple[trio.MemorySendChannel[Any], trio.MemoryReceiveChannel[Any]]:
        if ev not in self._answers:
            self._answers[ev] = trio.open_memory_channel(math.inf)
        return self._answers[ev]

    async def start(self, nursery: trio.Nursery) -> None:
        """Start the process (stderr goes to ours) and wait until its producers are up."""
        self._proc = await trio.lowlevel.open_process(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        nursery.start_soon(self._read)
        await self.answer("ready")

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        buf = b""
        async for chunk in self._proc.stdout:
            *lines, buf = (buf + chunk).split(b"\n")
            for line in lines:
                event = json.loads(line)
                self._channel(event["ev"])[0].send_nowait(event)
        for send, _receive in (self._channel(ev) for ev in ("ready", "phase", "window", "final")):
            send.close()  # the process ended: whoever waits gets ShardError

    async def command(self, op: str, **fields: Any) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        await self._proc.stdin.send_all(json.dumps({"op": op, **fields}).encode() + b"\n")

    async def answer(self, ev: str) -> dict[str, Any]:
        try:
            event: dict[str, Any] = await self._channel(ev)[1].receive()
        except trio.EndOfChannel:
            raise ShardError(f"{self.name}: the shard ended before its {ev!r} answer") from None
        return event

    async def window(self) -> tuple[array[float], dict[str, Any]]:
        """The shard's window: its send latencies (ms) and its counts."""
        await self.command("window")
        event = await self.answer("window")
        latencies = array("d")
        latencies.frombytes(base64.b64decode(event.pop("latencies")))
        return latencies, event

    async def close(self) -> None:
        if self._proc is not None:
            with trio.CancelScope(shield=True), trio.move_on_after(10):
                if self._proc.returncode is None:
                    self._proc.kill()
                await self._proc.wait()


def emit(event: dict[str, Any]) -> None:
    print(json.dumps(event), flush=True)


def main(argv: list[str] | None = None) -> None:
    trio.run(Shard(build_parser().parse_args(argv)).serve)


if __name__ == "__main__":
    main()
