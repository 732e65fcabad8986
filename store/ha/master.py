"""The master's side of replication: one :class:`HAConnection` per slave that connected to the HA listener, with a
reader task (the slave's reports) and a writer task (the CommitLog pushed in frames), as RocketMQ's ``HAConnection``
runs a ``ReadSocketService`` and a ``WriteSocketService`` thread.

- Reader: the newest complete 8-byte report is the slave's acknowledged offset. The first one also says where the
  transfer starts (:func:`~store.ha.frames.first_transfer_offset`). A report that is negative or beyond the master's
  own end ends the connection, the first one included (ours: RocketMQ takes any first report, so a slave that kept
  more than a recovered master has, or any peer of the HA port, would acknowledge sends no slave holds). Every report
  but a first one inside one of the master's records (:meth:`HAConnection._starts_record`) is handed to the service
  (:meth:`HAService.acknowledged`), which releases the SYNC_MASTER sends ending past the connection's floor, fixed
  at the first report (:meth:`HAService.acknowledgement_floor`: where an empty slave's copy begins, or for any other
  slave, which may be an empty one reconnecting, where such a copy may have begun). Nothing received for
  ``haHousekeepingInterval`` ends the connection.
- Writer: idle until the first report, then frames of at most ``haTransferBatchSize`` bytes (and, with their 12-byte
  header, at most 4 MiB, what a slave takes: :data:`~store.ha.frames.MAX_SENT_BODY`) read from the CommitLog (never
  past a segment's end, so records and blanks are split wherever a frame ends). Each write carries every frame
  readable since the last one, up to :data:`MAX_WRITE` bytes, in one buffer (the frames are RocketMQ's, only the
  system calls are fewer). With nothing to send it waits for the service's wake-up (a SYNC_MASTER send) or polls
  every 100 ms; after a wake-up it lets the appends of the same scheduler pass settle first, so a burst of sends
  leaves in one write rather than one frame per send. A heartbeat (a header with body size 0 at the next offset)
  goes after ``haSendHeartbeatInterval`` without a write, 100 ms at least (RocketMQ's idle wait, so 0 does not
  spin).

Either task ending (the slave closed, a socket error, housekeeping) cancels the other and closes the socket; the
service forgets the connection. Errors never leave the connection.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

import trio

from store.ha.flow import ByteRate, sample_every_second
from store.ha.frames import (
    MAX_SENT_BODY,
    POS_PHY,
    RECORD_PHY,
    ReportReader,
    encode_header,
    first_transfer_offset,
    starts_record,
)

if TYPE_CHECKING:
    from store.ha.service import HAService

log = logging.getLogger(__name__)

READ_SIZE: Final = 64 * 1024
#: Most CommitLog bytes one write carries (several frames; the slave reads 256 KiB at a time).
MAX_WRITE: Final = 256 * 1024
#: How long an idle writer waits before looking at the CommitLog again (RocketMQ's 100 ms).
IDLE_POLL: Final = 0.1


class HAConnection:
    """One slave's connection; see the module docstring. The figures are read by the broker's status."""

    def __init__(self, service: HAService, stream: trio.abc.Stream, address: str) -> None:
        self.service = service
        self.stream = stream
        self.address = address
        #: The slave's first report (-1 before it).
        self.request_offset = -1
        #: Where the transfer started: the first report, or for an empty slave the current segment's start.
        self.transfer_start = -1
        #: This connection's reports release only the sends ending past it (set at the first report).
        self.ack_floor = 0
        #: The slave's newest report (-1 before the first).
        self.ack_offset = -1
        #: The next CommitLog offset this connection sends (-1 before the first report).
        self.next_offset = -1
        self.sent_bytes = 0
        #: :attr:`sent_bytes` of the last whole second (:mod:`store.ha.flow`).
        self.sent_rate = ByteRate()
        #: The slave needs data retention already deleted: it can never catch up (logged once).
        self.behind_retention = False
        self._first_report = trio.Event()

    async def serve(self) -> None:
        """Run both tasks until either ends, then close the socket."""
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read_loop, nursery.cancel_scope)
                nursery.start_soon(self._write_loop, nursery.cancel_scope)
                nursery.start_soon(sample_every_second, self.sent_rate, lambda: self.sent_bytes)
        finally:
            with trio.CancelScope(shield=True):
                await self.stream.aclose()

    async def _read_loop(self, scope: trio.CancelScope) -> None:
        reader = ReportReader()
        try:
            while True:
                housekeeping = self.service.config.ha_housekeeping_interval / 1000
                with trio.move_on_after(housekeeping) as idle:
                    data = await self.stream.receive_some(READ_SIZE)
                if idle.cancelled_caught:
                    log.warning("HA slave %s silent for %.0f s: closing", self.address, housekeeping)
                    return
                if not data:
                    log.info("HA slave %s closed the connection", self.address)
                    return
                report = reader.feed(data)
                if report is not None and not self._on_report(report):
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            log.info("HA slave %s: read failed: %s", self.address, exc)
        finally:
            scope.cancel()

    def _on_report(self, report: int) -> bool:
        """Take one report; ``False`` ends the connection."""
        commitlog = self.service.store.commitlog
        end = commitlog.max_offset
        if not 0 <= report <= end:
            log.warning("HA slave %s reports %d, outside this master's log (it ends at %d): closing",
                        self.address, report, end)  # fmt: skip
            return False
        self.ack_offset = report
        if self.request_offset < 0:
            self.request_offset = report
            self.transfer_start = first_transfer_offset(report, end, commitlog.file_size)
            self.ack_floor = self.service.acknowledgement_floor(report, self.transfer_start)
            self._first_report.set()
            if 0 < report < end and not self._starts_record(report):
                log.info("HA slave %s reports %d, inside one of this master's records: its next report acknowledges",
                         self.address, report)  # fmt: skip
                return True
        self.service.acknowledged(report, self.ack_floor)
        return True

    def _starts_record(self, offset: int) -> bool:
        """Whether this master's log has a record (or a segment's blank) starting at ``offset`` (``False`` for a
        deleted one). A first report anywhere else is a slave that had a record's first bytes only when its last
        connection ended, or one whose log is not this one's (it kept more than this master recovered, and this
        master grew past it): that one refuses the bytes sent next (:meth:`ReplicaLog.append
        <store.ha.replica.ReplicaLog.append>`) and never holds what ends below its report, so only its next report,
        sent once it took them, acknowledges. Ours: RocketMQ's ``HAConnection.ReadSocketService``
        (store/src/main/java/org/apache/rocketmq/store/ha/HAConnection.java) acknowledges every report."""
        commitlog = self.service.store.commitlog
        head = commitlog.read_from(offset, POS_PHY + RECORD_PHY.size)
        return head is not None and starts_record(head, offset, commitlog.file_size)

    def _frames(self, batch: int) -> tuple[bytes, int]:
        """The frames of everything readable from :attr:`next_offset` (at most ``batch`` bytes each, up to
        :data:`MAX_WRITE` in all) in one buffer, and the CommitLog bytes they carry (0: nothing to send)."""
        commitlog = self.service.store.commitlog
        offset = start = self.next_offset
        parts: list[bytes | memoryview] = []
        while offset - start < MAX_WRITE:
            chunk = commitlog.read_from(offset, batch)
            if chunk is None:
                break
            parts += (encode_header(offset, len(chunk)), chunk)
            offset += len(chunk)
        return b"".join(parts), offset - start  # the one copy out of the mapped file

    async def _write_loop(self, scope: trio.CancelScope) -> None:
        service = self.service
        commitlog = service.store.commitlog
        try:
            await self._first_report.wait()
            self.next_offset = self.transfer_start
            log.info("HA slave %s reported %d: transfer starts at %d", self.address, self.request_offset,
                     self.next_offset)  # fmt: skip
            last_write = trio.current_time()
            while True:
                config = service.config  # read each round: UPDATE_BROKER_CONFIG may change it
                # A frame a slave cannot take (ours refuses it, a Java one waits for it for ever): bounded here.
                frames, size = self._frames(max(1, min(config.ha_transfer_batch_size, MAX_SENT_BODY)))
                if size:
                    await self.stream.send_all(frames)
                    self.next_offset += size
                    self.sent_bytes += size
                    last_write = trio.current_time()
                    continue
                if self.next_offset < commitlog.min_offset and not self.behind_retention:
                    self.behind_retention = True  # as RocketMQ: the slave only gets heartbeats from now on
                    log.warning("HA slave %s needs offset %d, deleted by retention (log starts at %d)",
                                self.address, self.next_offset, commitlog.min_offset)  # fmt: skip
                # Deadlines, not "interval minus idle": under a virtual clock a tiny remainder added to a large
                # time rounds back to now, and the writer would spin without the clock ever moving.
                now = trio.current_time()
                # RocketMQ's writer waits 100 ms after each idle pass: heartbeats come that far apart at least.
                heartbeat_at = last_write + max(config.ha_send_heartbeat_interval / 1000, IDLE_POLL)
                if now >= heartbeat_at:
                    await self.stream.send_all(encode_header(self.next_offset, 0))
                    last_write = trio.current_time()
                    continue
                if await service.wait_for_data(min(now + IDLE_POLL, heartbeat_at)):
                    await trio.lowlevel.checkpoint()  # the other appends of this pass land first
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            log.info("HA slave %s: write failed: %s", self.address, exc)
        finally:
            scope.cancel()
