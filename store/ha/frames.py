"""The HA wire protocol, sans-IO (docs/protocol.md#13-masterslave-replication): RocketMQ 4.x's classic replication
stream between a master's HA listener and its slaves, with no remoting framing, handshake or version field.

- Slave to master, the **report**: a bare big-endian int64, the slave's CommitLog max offset. The master only ever
  uses the newest complete report it has read (:class:`ReportReader`), as RocketMQ's ``HAConnection`` does.
- Master to slave, the **transfer frame**: an int64 physical offset and an int32 body size, then that many raw
  CommitLog bytes (:func:`encode_header`, :class:`FrameReader`). A body is an arbitrary byte range: it may end
  inside a record. A size of 0 is a heartbeat.
- Where a new slave's transfer starts (:func:`first_transfer_offset`) and how much one frame carries
  (:func:`frame_size`).
- Whether CommitLog bytes start a record where they lie (:func:`starts_record`): both sides tell a slave whose log is
  not its master's by it.

Everything here is pure: bytes in, values out. :class:`HAProtocolError` is raised for a frame no master sends (a
negative or oversized body); the caller closes that one connection.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from remoting.codec.record_layout import BLANK_MAGIC, MAGIC_V1

REPORT: Final = struct.Struct(">q")
#: A record's (or an end-of-file blank's) first two fields, and the physical offset a record stores at byte 28
#: (docs/protocol.md#51-record-layout).
RECORD_HEAD: Final = struct.Struct(">iI")
RECORD_PHY: Final = struct.Struct(">q")
POS_PHY: Final = 28
HEADER: Final = struct.Struct(">qi")
REPORT_SIZE: Final = REPORT.size
HEADER_SIZE: Final = HEADER.size
#: Largest body a slave accepts in one frame (RocketMQ's slave read buffer is 4 MiB; a master sends at most
#: ``haTransferBatchSize``, 32 KiB by default).
MAX_BODY: Final = 4 * 1024 * 1024
#: Largest body a master sends in one frame: header and body must fit together in a 4.9.8 slave's 4 MiB read buffer
#: (``HAClient.READ_MAX_BUFFER_SIZE``, store/src/main/java/org/apache/rocketmq/store/ha/HAService.java), which parses
#: a frame only once all of it is there; a bigger one never fits, and that slave waits for it for ever.
MAX_SENT_BODY: Final = MAX_BODY - HEADER_SIZE


class HAProtocolError(ValueError):
    """Bytes that are not an HA stream (the caller closes the connection)."""


class Frame(NamedTuple):
    """One master-to-slave frame: ``body`` holds the CommitLog bytes starting at ``offset`` (empty: a heartbeat)."""

    offset: int
    body: bytes


def encode_report(max_offset: int) -> bytes:
    """A slave's report of its CommitLog max offset."""
    return REPORT.pack(max_offset)


def encode_header(offset: int, size: int) -> bytes:
    """The 12-byte header of a frame carrying ``size`` bytes from ``offset`` (``size`` 0: a heartbeat)."""
    return HEADER.pack(offset, size)


def encode_frame(offset: int, body: bytes | memoryview) -> bytes:
    """Header and body in one buffer (one write per frame)."""
    return HEADER.pack(offset, len(body)) + body


class ReportReader:
    """The master's side of the reports: feed what the socket delivered, get the newest complete report.

    RocketMQ reads the long before the last 8-byte boundary of what arrived and skips older queued reports; a
    partial report waits for its remaining bytes."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes | bytearray) -> int | None:
        """The newest report completed by ``data``, or ``None`` when none was."""
        buf = self._pending + data if self._pending else data
        complete = len(buf) - len(buf) % REPORT_SIZE
        self._pending = bytes(buf[complete:])
        if not complete:
            return None
        return int(REPORT.unpack_from(buf, complete - REPORT_SIZE)[0])


class FrameReader:
    """The slave's side of the transfer: feed what the socket delivered, get the frames it completed, in order.

    A frame whose body has not fully arrived is kept until it has. Raises :class:`HAProtocolError` for a negative
    body size or one above :data:`MAX_BODY`."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray) -> list[Frame]:
        buf = self._buf
        buf += data
        frames: list[Frame] = []
        pos = 0
        while len(buf) - pos >= HEADER_SIZE:
            offset, size = HEADER.unpack_from(buf, pos)
            if size < 0 or size > MAX_BODY:
                raise HAProtocolError(f"frame at offset {offset} declares {size} body bytes")
            if offset < 0:
                raise HAProtocolError(f"frame declares negative offset {offset}")
            end = pos + HEADER_SIZE + size
            if end > len(buf):
                break
            frames.append(Frame(offset, bytes(buf[pos + HEADER_SIZE : end])))
            pos = end
        if pos:
            del buf[:pos]
        return frames

    def reset(self) -> None:
        """Forget a partial frame (the connection closed)."""
        self._buf.clear()


def first_transfer_offset(reported: int, master_max: int, segment_size: int) -> int:
    """Where the master starts sending to a slave whose first report is ``reported``: exactly there, or for an empty
    slave (0) the start of the master's current CommitLog segment (older segments are never sent to a new slave)."""
    if reported:
        return reported
    return max(0, master_max - master_max % segment_size)


def frame_size(offset: int, readable_end: int, batch: int) -> int:
    """Bytes the next frame carries from ``offset``: what is readable in its segment (``readable_end``, never past
    the segment's end), at most ``batch``."""
    return max(0, min(readable_end - offset, batch))


def starts_record(head: bytes | memoryview, offset: int, segment_size: int) -> bool:
    """Whether ``head``, CommitLog bytes at ``offset``, start a record there (the magic RocketMQ's
    ``CommitLog.checkMessageAndReturnSize`` checks, a size within the segment, and the physical offset the master
    stored in the record) or the segment's end-of-file blank (its size: the rest of the segment). Fewer than 8 bytes
    cannot tell: ``True``. A slave's log ending at a record boundary whose master's bytes there do not start one, or
    a slave's report inside one of the master's records, is how a slave whose log is not its master's shows (ours:
    RocketMQ's HA checks offsets only)."""
    if len(head) < RECORD_HEAD.size:
        return True
    size: int
    magic: int
    size, magic = RECORD_HEAD.unpack_from(head)
    room = segment_size - offset % segment_size
    if magic == BLANK_MAGIC:
        return size == room
    if magic != MAGIC_V1 or not 0 < size <= room:
        return False
    return len(head) < POS_PHY + RECORD_PHY.size or RECORD_PHY.unpack_from(head, POS_PHY)[0] == offset
