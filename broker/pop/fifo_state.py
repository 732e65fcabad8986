"""The orderly (FIFO) pop state of every (group, topic, queue) and its file ``config/popFifoState.json``.

RocketMQ keeps the same facts (when the batch in flight was popped, which offsets of a queue are invisible until when,
how often each was delivered) in ``consumerOrderInfo.json``
(broker/src/main/java/org/apache/rocketmq/broker/offset/ConsumerOrderInfoManager.java) in a format of its own; ours is a
list of queues, each ``{"group", "topic", "queueId", "popTime": epoch ms, "invisibleUntil": {offset: epoch ms},
"attempts": {offset: deliveries}, "acked": [offsets], "storedAt": {offset: CommitLog offset}, "attemptId": the latest
delivery's attempt id or null}``. ``storedAt`` names the
messages the state speaks of, so a queue deleted and created again under the same name (offsets reused by other
messages) is told apart from the one the state was written for. A file written before ``popTime`` was kept reads as
:data:`UNKNOWN_POP_TIME`: a handle then in flight is known by its visible time instead, which the file holds as the
offset's ``invisibleUntil``; one written before ``storedAt`` reads as naming no message, before ``attemptId`` as
no attempt id. :class:`~broker.pop.PopService`
marks it dirty on every change and its revive loop runs the persister, which saves after each change in a worker thread,
so a restart (even a kill -9, give or take the save in progress) keeps in-flight FIFO messages invisible and their
attempt counts.

Errors: a file whose content does not decode raises :class:`~store.metadata_files.ConfigFileError` at load, as the
broker's other config files do.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from store.metadata_files import ConfigFile, ConfigFileError

__all__ = ["UNKNOWN_POP_TIME", "FifoQueue", "FifoTable", "fifo_state_file"]

#: The pop time of a queue read from a file that did not keep it.
UNKNOWN_POP_TIME: Final = -1


@attrs.define
class FifoQueue:
    """Orderly pop state of one (group, topic, queue): invisible offsets, per-offset delivery counts, offsets
    acknowledged past the first unacknowledged one, the pop time of the latest delivery (the handles of that
    delivery carry it), where each message it handed out lies in the CommitLog (the queue's identity) and the
    attempt id of the receive that popped it (``None``: none given)."""

    invisible_until: dict[int, int] = attrs.field(factory=dict)
    attempts: dict[int, int] = attrs.field(factory=dict)
    acked: set[int] = attrs.field(factory=set)
    pop_time: int = 0
    stored_at: dict[int, int] = attrs.field(factory=dict)
    attempt_id: str | None = None

    def copy(self) -> FifoQueue:
        """A copy sharing nothing mutable with this one (what the persister's worker thread saves)."""
        return FifoQueue(
            dict(self.invisible_until),
            dict(self.attempts),
            set(self.acked),
            self.pop_time,
            dict(self.stored_at),
            self.attempt_id,
        )

    def retried_by(self, attempt_id: str | None) -> bool:
        """Whether a pop with ``attempt_id`` repeats the latest delivery (a client asking again after losing its
        answer): ConsumerOrderInfoManager.OrderInfo.needBlock does not block it and ``update`` keeps the attempt
        counts (mergeOffsetConsumedCount)."""
        return attempt_id is not None and attempt_id == self.attempt_id

    def replace_delivery(self, handed: set[int]) -> None:
        """A retry of the latest delivery (:meth:`retried_by`) handed out ``handed`` again: it replaces that delivery
        (ConsumerOrderInfoManager.update keeps only the new pop's offsets), so what else is in flight, the lost
        delivery's rest no client saw, blocks the queue no more and loses its counts: it comes next at its first
        attempt. RocketMQ's mergeOffsetConsumedCount keeps every count while the attempt id repeats and drops the
        rest's at the next pop of another attempt id (which keeps only counts of the offsets the pop before listed);
        ours drops them at once, so a second retry of the same attempt id taking the rest again hands it at its first
        attempt, where RocketMQ's keeps its count."""
        for offset in self.invisible_until.keys() - handed:
            self._forget(offset)

    def is_of(self, commit_log_offset_at: Callable[[int], int | None]) -> bool:
        """Whether the queue ``commit_log_offset_at`` reads (queue offset to CommitLog offset, ``None`` where it has
        no entry) is the one this state was written for: it holds none of the state's offsets at another CommitLog
        offset."""
        return all(commit_log_offset_at(o) in (None, at) for o, at in self.stored_at.items())

    def keep_within(self, low: int, high: int, now: int) -> bool:
        """Forget what speaks of offsets the queue ``[low, high)`` no longer has: at or past its end (a tail the
        queue lost), or below its start (messages expired) unless still invisible at ``now``: a message in flight
        blocks its queue until acked or visible again, whatever retention removed meanwhile (RocketMQ's
        popMsgFromQueue asks checkBlock before it reads). Whether anything went."""
        offsets = self.invisible_until.keys() | self.attempts.keys() | self.acked | self.stored_at.keys()
        stale = [o for o in offsets if o >= high or (o < low and self.invisible_until.get(o, now) <= now)]
        for offset in stale:
            self._forget(offset)
        return bool(stale)

    def advance(self, committed: int) -> int:
        """The first offset from ``committed`` on not acknowledged; what the state knows of the offsets passed goes."""
        while committed in self.acked:
            self._forget(committed)
            committed += 1
        return committed

    def _forget(self, offset: int) -> None:
        self.invisible_until.pop(offset, None)
        self.attempts.pop(offset, None)
        self.acked.discard(offset)
        self.stored_at.pop(offset, None)


FifoTable = dict[tuple[str, str, int], FifoQueue]


def _encode(table: FifoTable) -> bytes:
    queues = [
        {"group": group, "topic": topic, "queueId": qid, "popTime": q.pop_time,
         "invisibleUntil": {str(o): t for o, t in q.invisible_until.items()},
         "attempts": {str(o): n for o, n in q.attempts.items()}, "acked": sorted(q.acked),
         "storedAt": {str(o): at for o, at in q.stored_at.items()}, "attemptId": q.attempt_id}
        for (group, topic, qid), q in table.items()
        if q.invisible_until or q.attempts or q.acked
    ]  # fmt: skip
    return orjson.dumps({"queues": queues}, option=orjson.OPT_INDENT_2)


def _decode(data: bytes) -> FifoTable:
    try:
        table: FifoTable = {}
        for entry in orjson.loads(data)["queues"]:
            key = (str(entry["group"]), str(entry["topic"]), int(entry["queueId"]))
            table[key] = FifoQueue(
                _int_map(entry["invisibleUntil"]),
                _int_map(entry["attempts"]),
                {int(o) for o in entry["acked"]},
                int(entry.get("popTime", UNKNOWN_POP_TIME)),
                _int_map(entry.get("storedAt", {})),
                _attempt_id(entry.get("attemptId")),
            )
        return table
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ConfigFileError(f"bad FIFO pop state: {exc!r}") from None


def _attempt_id(raw: Any) -> str | None:
    if raw is not None and not isinstance(raw, str):
        raise TypeError(f"attemptId {raw!r} is no string")
    return raw


def _int_map(raw: Any) -> dict[int, int]:
    return {int(k): int(v) for k, v in raw.items()}


def fifo_state_file(config_dir: Path) -> ConfigFile[FifoTable]:
    return ConfigFile(config_dir / "popFifoState.json", _encode, _decode)
