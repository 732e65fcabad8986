"""Receipt handles: what a popped message carries so that its ack or change of invisibility finds its checkpoint.

The text is RocketMQ 5's space-separated handle (``ExtraInfoUtil.buildExtraInfo`` plus the proxy's appended CommitLog
offset, remoting/src/main/java/org/apache/rocketmq/remoting/protocol/header/ExtraInfoUtil.java and
common/src/main/java/org/apache/rocketmq/common/consumer/ReceiptHandle.java)::

    ckQueueOffset popTime invisibleTime reviveQid topicType brokerName queueId queueOffset commitLogOffset

``reviveQid`` 999 marks an orderly (FIFO) pop; ``topicType`` 0 is the topic itself, 1 its V1 retry topic
``%RETRY%<group>_<topic>``. Clients treat the handle as opaque. Sans-IO; :meth:`ReceiptHandle.decode` raises
``ValueError`` for anything that is not such a handle: each number is what Java's ``Long.parseLong`` reads (``int``
for ``reviveQid``, ``topicType`` and ``queueId``: ``Integer.parseInt``), and not negative (ours).
"""

from __future__ import annotations

from typing import Final

import attrs

from remoting.codec.topics import pop_retry_topic

__all__ = ["FIFO_REVIVE_QID", "TOPIC_TYPE_NORMAL", "TOPIC_TYPE_RETRY", "ReceiptHandle"]

FIFO_REVIVE_QID: Final = 999
TOPIC_TYPE_NORMAL: Final = 0
TOPIC_TYPE_RETRY: Final = 1
_FIELDS: Final = 9
#: The fields of a remoting ``extraInfo`` its ack reads: up to the broker name.
_READ_FIELDS: Final = 6
_LONG_MAX: Final = (1 << 63) - 1
_INT_MAX: Final = (1 << 31) - 1
#: The largest value of each field (the broker name, at 5, is text).
_BOUNDS: Final = (_LONG_MAX, _LONG_MAX, _LONG_MAX, _INT_MAX, _INT_MAX, 0, _INT_MAX, _LONG_MAX, _LONG_MAX)


@attrs.frozen(slots=True)
class ReceiptHandle:
    """One popped message's handle. ``pop_time`` and ``invisible_time`` are ms; see the module docstring."""

    start_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    topic_type: int
    broker_name: str
    queue_id: int
    offset: int
    commit_log_offset: int

    @property
    def fifo(self) -> bool:
        return self.revive_qid == FIFO_REVIVE_QID

    @property
    def visible_at(self) -> int:
        """Epoch ms at which the message is handed out again unless acknowledged."""
        return self.pop_time + self.invisible_time

    def expired(self, now_ms: int) -> bool:
        return self.visible_at <= now_ms

    def real_topic(self, group: str, topic: str) -> str:
        """The topic whose queue the message was popped from."""
        return pop_retry_topic(group, topic) if self.topic_type == TOPIC_TYPE_RETRY else topic

    def extra_info(self) -> str:
        """The handle as RocketMQ's remoting clients know it: ``ExtraInfoUtil.buildExtraInfo`` with the message's queue
        offset, the ``POP_CK`` property (no CommitLog offset)."""
        return self.encode().rsplit(" ", 1)[0]

    @classmethod
    def from_extra_info(cls, text: str, queue_id: int, offset: int) -> ReceiptHandle:
        """A handle from a remoting ack's ``extraInfo`` (the ``POP_CK`` string, or a proxy's receipt handle with the
        CommitLog offset appended) for the message at ``offset`` of queue ``queue_id``, which the request names beside
        it (AckMessageProcessor reads those from the header); the CommitLog offset is left 0. Only the first six
        fields are read, as Java's ack reads them; ``ValueError`` as :meth:`decode` raises it for those."""
        parts = text.split(" ")
        if len(parts) < _READ_FIELDS:
            raise ValueError(f"not a receipt handle: {text[:80]!r}")
        # AckMessageProcessor and ChangeInvisibleTimeProcessor read no field past the broker name (ExtraInfoUtil's
        # getters check only that the array reaches theirs): what follows, if anything, is not read.
        full = " ".join([*parts[:_READ_FIELDS], str(queue_id), str(offset), "0"])
        return cls.decode(full)

    def encode(self) -> str:
        return (
            f"{self.start_offset} {self.pop_time} {self.invisible_time} {self.revive_qid} {self.topic_type} "
            f"{self.broker_name} {self.queue_id} {self.offset} {self.commit_log_offset}"
        )

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        parts = text.split(" ")
        if len(parts) != _FIELDS or not parts[5]:
            raise ValueError(f"not a receipt handle: {text[:80]!r}")
        n = [_number(p, bound, text) for i, (p, bound) in enumerate(zip(parts, _BOUNDS, strict=True)) if i != 5]
        return cls(n[0], n[1], n[2], n[3], n[4], parts[5], n[5], n[6], n[7])


def _number(field: str, bound: int, text: str) -> int:
    """``field`` as a number in ``[0, bound]``, ASCII digits only; ``ValueError`` otherwise."""
    if not (field.isascii() and field.isdigit()) or int(field) > bound:
        raise ValueError(f"bad number {field[:24]!r} in receipt handle: {text[:80]!r}")
    return int(field)
