"""The slave's side of replication (RocketMQ's ``HAClient``): one connection to the master's HA listener at a time.

The master's address is ``haMasterAddress`` when set (6 characters or more), otherwise whatever the broker learns
from its name-server registration (:meth:`HAClient.update_master_address`; a new address is used at the next
connect, an open connection is kept, as in RocketMQ). Without an address the client waits.

A session: report the store's max offset at once (RocketMQ waits one heartbeat interval first; the master treats
both alike), a partial record the last session left at the log's end cut back first
(:meth:`~store.ha.replica.ReplicaLog.drop_partial_tail`; ours), then read frames. A frame must start at the store's
max offset (an empty store takes any start, the master's current segment); otherwise the session ends and the next
one re-synchronises from the report. Each body is appended raw (:class:`~store.ha.replica.ReplicaLog`); a grown max
offset is reported once per read from the socket, by the reading task itself, before the new records are dispatched
(so a SYNC_MASTER's wait does not include the slave's dispatch), and the current one after
``haSendHeartbeatInterval`` without a report in any case. Nothing from the master for ``haHousekeepingInterval`` (it
heartbeats every 5 s) ends the session. Over TCP the session reads and reports on a duplicate of the socket's
descriptor, straight through the system calls (:class:`_SocketIO`).

Reconnects back off from a tenth of ``haSendHeartbeatInterval`` doubling up to the interval itself (RocketMQ retries
every 5 s), after a failed connect as after a session that took nothing from the master: one it ended before
sending anything (a refused report), or one whose bytes this slave refused (a diverged log, a frame at another
offset, a store that cannot take them). RocketMQ's ``HAClient``,
store/src/main/java/org/apache/rocketmq/store/ha/HAService.java, reports only a heartbeat interval after it
connected, so a refused slave, or one refusing, comes back once per interval; a session that took the master's
frames is followed by a tenth of the interval. Socket errors (a reset by the master included) and protocol errors
end the session, never the client: each of a session's two tasks, the reader and the reporter, catches its own and
ends the other.

The intervals are read from the store's current config at each use (``UPDATE_BROKER_CONFIG`` replaces it), the
report loop looking once a second at least: RocketMQ's ``HAClient`` reads ``getMessageStoreConfig()`` on every loop,
which waits in ``selector.select(1000)``. That wait also keeps RocketMQ's idle reports a second apart at least,
whatever the interval (0 included); here ``haSendHeartbeatInterval`` counts as 1 s at least, for reports and
reconnects alike, so 0 makes neither spin.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final, Protocol

import trio

from store.errors import OffsetMismatchError, PutRefusedError
from store.ha.flow import ByteRate, sample_every_second
from store.ha.frames import FrameReader, HAProtocolError, encode_report

if TYPE_CHECKING:
    from store.ha.replica import ReplicaLog
    from store.store_config import StoreConfig

log = logging.getLogger(__name__)

READ_SIZE: Final = 256 * 1024
CONNECT_TIMEOUT: Final = 5.0
#: How often a client without a master address notes an attempt (s): RocketMQ 5's ``DefaultHAClient`` waits 5 s
#: between its ``connectMaster`` calls.
NO_ADDRESS_RETRY: Final = 5.0
#: The report loop wakes at least this often (s), and reports idle at most this often: RocketMQ's ``HAClient`` loop
#: waits in ``selector.select(1000)`` between its looks at the intervals.
POLL: Final = 1.0


Connect = Callable[[str], Awaitable[trio.abc.Stream]]


class _Stream(Protocol):
    """What a session reads and reports through: the connection's stream, or :class:`_SocketIO` on its socket."""

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray: ...

    async def send_all(self, data: bytes | bytearray | memoryview) -> None: ...


def _duplicate_socket(stream: trio.abc.Stream) -> socket.socket | None:
    """A second descriptor of a TCP stream's socket for :class:`_SocketIO` (``None`` for another stream, or when
    the process is out of descriptors: the session then uses the stream)."""
    if not isinstance(stream, trio.SocketStream):
        return None
    sock = stream.socket
    try:
        return socket.fromfd(sock.fileno(), sock.family, sock.type)
    except OSError:
        return None


class _SocketIO:
    """A session's reads and reports straight on its non-blocking socket: Trio's ``SocketStream`` calls without
    their layers, which cost a SYNC_MASTER's slave about as much as the system calls (a read and a report per
    acknowledged batch). Each call still yields once. Errors propagate as ``OSError``."""

    __slots__ = ("_sock",)

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        while True:
            try:
                data = self._sock.recv(max_bytes or READ_SIZE)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(self._sock)
                continue
            await trio.lowlevel.checkpoint()
            return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        view, sent = memoryview(data), 0
        while sent < len(view):
            try:
                sent += self._sock.send(view[sent:])
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self._sock)
        await trio.lowlevel.checkpoint()


async def _open_tcp(address: str) -> trio.abc.Stream:
    host, port = split_address(address)
    return await trio.open_tcp_stream(host, port)


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` (the port after the last colon; an IPv6 host's brackets dropped, as a Java
    master writes its HA address with an IPv6 ``brokerIP2``: ``RemotingUtil.normalizeHostAddress``,
    remoting/src/main/java/org/apache/rocketmq/remoting/common/RemotingUtil.java). Raises ``ValueError``."""
    host, _, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or not port.isdigit():
        raise ValueError(f"bad HA address {address!r}")
    return host, int(port)


class HAClient:
    """See the module docstring. ``connected`` and the figures are read by the broker's status."""

    def __init__(self, config: Callable[[], StoreConfig], replica: ReplicaLog, connect: Connect | None = None) -> None:
        """``config()`` is the store's current config; ``connect(address)`` opens the stream to the master (a TCP
        connection unless given)."""
        self._config = config
        self.replica = replica
        self._connect = connect or _open_tcp
        static = config().ha_master_address
        #: The address used at the next connect ("" = none known yet).
        self.master_address = static if len(static) >= 6 else ""
        self.learns_address = len(static) < 6
        self.connected_to = ""
        self.sessions = 0
        #: When the master was last heard from, or this client was made or tried to connect (Trio clock): RocketMQ 5's
        #: ``lastReadTimestamp``, which :attr:`read_reset` hides between a session's end and the next attempt.
        self.last_contact = trio.current_time()
        #: A session ended and no connect was tried since (RocketMQ 5's ``closeMaster`` sets the read time to 0).
        self.read_reset = False
        self.received_bytes = 0
        #: :attr:`received_bytes` of the last whole second of a session, 0 between sessions (:mod:`store.ha.flow`).
        self.received_rate = ByteRate()
        #: The master's CommitLog end as last learned (-1: not yet) and when (Trio clock): :meth:`note_master_offset`.
        self.master_offset = -1
        self.master_offset_at = 0.0
        self._reporting = False
        self._report_owed = False
        #: When the last report was written, or this client was made (Trio clock), as RocketMQ 5's
        #: ``lastWriteTimestamp`` starts.
        self.last_report = self.last_contact
        #: The current session took something from the master: bytes this slave did not refuse (:meth:`_session`).
        self._took = False
        self._address_known = trio.Event()
        if self.master_address:
            self._address_known.set()

    def update_master_address(self, address: str) -> None:
        """The master's HA address learned from the name server; ignored with a static ``haMasterAddress``."""
        if not self.learns_address or not address or address == self.master_address:
            return
        log.info("HA master address %s -> %s", self.master_address or "(none)", address)
        self.master_address = address
        self.master_offset = -1
        self._address_known.set()

    def note_master_offset(self, offset: int) -> None:
        """The master's CommitLog reaches at least ``offset``: the end of a frame it sent (a heartbeat's offset is its
        whole log, everything having been sent), or its ``commitLogMaxOffset`` read by the broker's 10 s metadata
        sync. The figure only grows while the master's address stays the same."""
        if offset >= self.master_offset:
            self.master_offset = offset
            self.master_offset_at = trio.current_time()

    @property
    def config(self) -> StoreConfig:
        return self._config()

    @property
    def heartbeat_interval(self) -> float:
        """``haSendHeartbeatInterval`` in seconds, :data:`POLL` at least (0 would make reports and reconnects spin)."""
        return max(self.config.ha_send_heartbeat_interval / 1000, POLL)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        failures = 0
        while True:
            await self._wait_for_address()
            address = self.master_address
            try:
                with trio.fail_after(CONNECT_TIMEOUT):
                    stream = await self._connect(address)
                self._tried()
            except (OSError, ValueError, trio.TooSlowError) as exc:
                self._tried()
                delay = self._backoff(failures)
                failures += 1
                log.info("HA connect to %s failed: %s; retrying in %.1f s", address, exc, delay)
            else:
                if await self._session(stream, address):
                    failures = 0
                    delay = self._backoff(0)
                else:  # the master refused the report, or this slave its bytes: a failed connect
                    delay = self._backoff(failures)
                    failures += 1
            await trio.sleep(delay)

    async def _wait_for_address(self) -> None:
        """Until a master address is known, noting a connect attempt every :data:`NO_ADDRESS_RETRY` seconds as
        RocketMQ 5's ``DefaultHAClient.connectMaster`` does without one."""
        while not self._address_known.is_set():
            with trio.move_on_after(NO_ADDRESS_RETRY):
                await self._address_known.wait()
            self._tried()

    def _tried(self) -> None:
        """A connect was tried: the read time is now (``connectMaster``, whether or not it connected)."""
        self.last_contact = trio.current_time()
        self.read_reset = False

    def _backoff(self, earlier_failures: int) -> float:
        """The wait before the next connect: a tenth of the heartbeat interval after a session or a first failure,
        doubled per earlier failure in a row, at most the interval (read now: UPDATE_BROKER_CONFIG may change it)."""
        ceiling = self.heartbeat_interval
        return min(ceiling / 10 * (1 << min(earlier_failures, 10)), ceiling)

    async def _session(self, stream: trio.abc.Stream, address: str) -> bool:
        """Replicate over ``stream`` until the session ends; whether it took anything from the master."""
        self.sessions += 1
        self._took = False
        self.connected_to = address
        self.last_contact = trio.current_time()
        try:
            cut = self.replica.drop_partial_tail()  # the report below is then a record boundary
        except OSError as exc:  # a ConsumeQueue segment that cannot be made: this session reports the log as it is
            log.error("HA: dispatching the master's data failed: %s", exc)
        else:
            if cut:
                log.info("HA: %d bytes of a partial record dropped; the master sends the record again", cut)
        log.info("HA connected to master %s, slave max offset %d", address, self.replica.max_offset)
        raw = _duplicate_socket(stream)
        io: _Stream = stream if raw is None else _SocketIO(raw)
        try:
            async with stream, trio.open_nursery() as nursery:
                nursery.start_soon(self._report_loop, io, nursery.cancel_scope)
                nursery.start_soon(self._read_loop, io, nursery.cancel_scope)
                nursery.start_soon(sample_every_second, self.received_rate, lambda: self.received_bytes)
        finally:
            self.connected_to = ""
            self.read_reset = True
            self.received_rate = ByteRate(self.received_bytes)  # nothing comes between sessions
            if raw is not None:
                raw.close()
        return self._took

    async def _report(self, stream: _Stream) -> None:
        """Send the max offset, or leave it to the report being sent now (one writer at a time), which sends again
        when the offset grew meanwhile."""
        if self._reporting:
            self._report_owed = True
            return
        self._reporting = True
        try:
            while True:
                self._report_owed = False
                await stream.send_all(encode_report(self.replica.max_offset))
                self.last_report = trio.current_time()
                if not self._report_owed:
                    return
        finally:
            self._reporting = False

    async def _report_loop(self, stream: _Stream, scope: trio.CancelScope) -> None:
        """Report at once, then after every heartbeat interval without a report (the read loop reports growth); and
        end the session after ``haHousekeepingInterval`` without anything from the master (the read loop notes each
        read in :attr:`last_contact`, so a read costs no timeout of its own). Both intervals are read at each wake,
        every :data:`POLL` at least, so a changed one takes effect within a second."""
        try:
            await self._report(stream)
            while True:
                interval = self.heartbeat_interval
                housekeeping = self.config.ha_housekeeping_interval / 1000
                now = trio.current_time()
                wake = min(self.last_report + interval, self.last_contact + housekeeping, now + POLL)
                await trio.sleep_until(max(wake, now + interval / 100))
                now = trio.current_time()
                if now >= self.last_contact + housekeeping:
                    log.warning("HA master silent for %.0f s: reconnecting", housekeeping)
                    scope.cancel()
                    return
                if now >= self.last_report + interval:
                    await self._report(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            log.info("HA report to master failed: %s", exc)
            scope.cancel()

    async def _read_loop(self, stream: _Stream, scope: trio.CancelScope) -> None:
        """Take the master's frames until it closes, a socket error (a reset included) or a frame the replica refuses;
        then end the session (cancel ``scope``)."""
        try:
            await self._take_frames(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            log.info("HA connection to %s lost: %s", self.connected_to, exc)
        finally:
            scope.cancel()

    async def _take_frames(self, stream: _Stream) -> None:
        reader = FrameReader()
        replica = self.replica
        while True:
            data = await stream.receive_some(READ_SIZE)
            if not data:
                log.info("HA master closed the connection")
                return
            self.last_contact = trio.current_time()
            before = replica.max_offset
            try:
                frames = reader.feed(data)
                for frame in frames:
                    replica.append(frame.offset, frame.body, dispatch=False)
                    self.received_bytes += len(frame.body)
            except (HAProtocolError, OffsetMismatchError) as exc:
                log.warning("HA stream from the master refused: %s; reconnecting", exc)
                return
            except (PutRefusedError, OSError) as exc:  # a segment that cannot be made (a full disk): try again later
                log.error("HA: storing the master's data failed: %s; reconnecting", exc)
                return
            if frames:
                self.note_master_offset(frames[-1].offset + len(frames[-1].body))
            if replica.max_offset > before:
                # Acknowledge what is in the log first (as RocketMQ's slave reports before its dispatcher runs).
                await self._report(stream)
            try:
                replica.dispatch()
            except OSError as exc:  # a ConsumeQueue segment that cannot be made: the next session dispatches on
                log.error("HA: dispatching the master's data failed: %s; reconnecting", exc)
                return
            # Only bytes taken make the session count as one (a refusal above is a failed connect for the back-off).
            self._took = True
