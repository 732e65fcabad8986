"""The GET_TIMER_CHECK_POINT (60) answer body, RocketMQ 5's ``TimerCheckpoint.encode``
(``store/src/main/java/org/apache/rocketmq/store/timer/TimerCheckpoint.java``): seven big-endian int64s,
``lastReadTimeMs``, ``lastTimerLogFlushPos``, ``lastTimerQueueOffset``, ``masterTimerQueueOffset`` and the data
version's ``stateVersion``, ``timestamp``, ``counter`` (a 32-byte body without the version is accepted, as Java's
``decode``). A shorter body raises :class:`~remoting.codec.errors.CodecError`.
"""

from __future__ import annotations

import struct
from typing import Final

import attrs

from remoting.codec.errors import CodecError

__all__ = ["TimerCheckpointBody"]

_FULL: Final = struct.Struct(">7q")
_CORE: Final = struct.Struct(">4q")


@attrs.frozen
class TimerCheckpointBody:
    last_read_time_ms: int
    last_timer_log_flush_pos: int
    last_timer_queue_offset: int
    master_timer_queue_offset: int
    state_version: int = 0
    timestamp: int = 0
    counter: int = 0

    def encode(self) -> bytes:
        return _FULL.pack(*attrs.astuple(self))

    @classmethod
    def decode(cls, body: bytes) -> TimerCheckpointBody:
        if len(body) >= _FULL.size:
            return cls(*_FULL.unpack_from(body))
        if len(body) >= _CORE.size:
            return cls(*_CORE.unpack_from(body))
        raise CodecError(f"timer checkpoint body of {len(body)} bytes (expected 32 or 56)")
