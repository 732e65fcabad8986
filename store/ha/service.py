"""``HAService``: a store's replication, started on every role as RocketMQ's is (docs/architecture.md#replication).

- The HA listener on ``haListenPort`` (also on a slave, unused there): each connection is a
  :class:`~store.ha.master.HAConnection`.
- SYNC_MASTER's waiting sends (:class:`~store.ha.waiters.TransferWaits`): :meth:`notify_replicated` answers
  SLAVE_NOT_AVAILABLE at once when no slave is connected or the fastest is ``haSlaveFallbehindMax`` or more behind,
  and otherwise calls back once a slave acknowledged the send's end offset, or FLUSH_SLAVE_TIMEOUT after
  ``slaveTimeout``.
- On a slave, the :class:`~store.ha.slave.HAClient` feeding the store's :class:`~store.ha.replica.ReplicaLog`.

``push2slave_max_offset`` is the highest offset any slave acknowledged; it only grows (RocketMQ's
``push2SlaveMaxOffset``) and gates SLAVE_NOT_AVAILABLE. Which waiting sends a report releases is stricter (ours):
only those past the connection's floor (:meth:`acknowledgement_floor`), so a slave never acknowledges a record older
than its copy. Owned by the :class:`~store.message_store.MessageStore`; :meth:`run` is started by the
store's own ``run``. Connection errors stay inside their connection.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from store.ha.master import HAConnection
from store.ha.slave import HAClient
from store.ha.waiters import TransferWaits
from store.results import PutStatus

if TYPE_CHECKING:
    from store.message_store import MessageStore
    from store.store_config import StoreConfig

log = logging.getLogger(__name__)


class HAService:
    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.connections: list[HAConnection] = []
        self.push2slave_max_offset = 0
        #: The highest floor given to an empty slave since this master started (see :meth:`acknowledgement_floor`).
        self.empty_slave_floor = 0
        self.waits = TransferWaits()
        #: The listener's bound port (0 until :meth:`run` started it).
        self.port = 0
        self.client: HAClient | None = None
        #: What parked writers wait on; ``None`` when none waits (a send then wakes nobody).
        self._data: trio.Event | None = None

    @property
    def config(self) -> StoreConfig:
        return self.store.config

    # ---- life cycle -----------------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen, expire waiting sends and, on a slave, replicate; until cancelled."""
        config = self.config
        host = config.ha_listen_host or None
        try:
            listeners = await trio.open_tcp_listeners(config.ha_listen_port, host=host)
        except OSError as exc:
            if not (config.ha_listen_port_fallback and config.ha_listen_port):
                raise
            log.warning("HA port %d unavailable (%s): listening on a free port", config.ha_listen_port, exc)
            listeners = await trio.open_tcp_listeners(0, host=host)
        self.port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            await nursery.start(self.waits.run)
            if self.store.replica is not None:
                self.client = HAClient(lambda: self.config, self.store.replica)
                await nursery.start(self.client.run)
            nursery.start_soon(trio.serve_listeners, self._accept, listeners)
            log.info("HA listening on port %d as %s", self.port, config.broker_role.value)
            task_status.started()

    async def _accept(self, stream: trio.SocketStream) -> None:
        try:
            host, port = stream.socket.getpeername()[:2]
        except OSError:  # reset before this task ran (ENOTCONN): nothing to serve; raising would end the listener
            await stream.aclose()
            return
        await self.serve_connection(stream, f"{host}:{port}")

    async def serve_connection(self, stream: trio.abc.Stream, address: str) -> None:
        """Serve one slave on ``stream`` until the connection ends (the listener calls it per accepted socket)."""
        connection = HAConnection(self, stream, address)
        log.info("HA slave %s connected", connection.address)
        self.connections.append(connection)
        try:
            await connection.serve()
        finally:
            self.connections.remove(connection)

    # ---- master: acknowledgements and waiting sends ---------------------------------------------------------

    def acknowledgement_floor(self, reported: int, transfer_start: int) -> int:
        """The floor of a connection whose first report is ``reported``: its reports release only the sends ending
        past it. An empty slave (0) is sent from ``transfer_start``, the current segment's start, and holds nothing
        below it. A slave with a copy may be an empty one reconnecting (the report cannot say where its copy began):
        its floor is the highest an empty slave was given since this master started (a send ends below an empty
        slave's copy only if it waited before that slave's first connection, which this master then served), at most
        its report. Sends registered after the connection end past any floor; a send waiting below one times out
        unless another connection reaches it (RocketMQ has no floor: ``HAService.notifyTransferSome``)."""
        if not reported:
            self.empty_slave_floor = max(self.empty_slave_floor, transfer_start)
            return transfer_start
        return min(reported, self.empty_slave_floor)

    def acknowledged(self, offset: int, floor: int = 0) -> None:
        """A slave reported ``offset``: raise ``push2slave_max_offset`` and release the sends it covers, except those
        ending at or below its connection's ``floor`` (:meth:`acknowledgement_floor`): another slave may still
        acknowledge them, or they time out."""
        if offset > self.push2slave_max_offset:
            self.push2slave_max_offset = offset
        # Every report, not only one past the maximum: a send kept below one connection's floor is released by
        # another connection's report that reaches it, however far the first got (a look at the queue's head when
        # nothing is due).
        self.waits.acknowledged(offset, floor)

    def is_in_sync(self, connection: HAConnection, end_offset: int) -> bool:
        """Whether ``connection``'s slave is less than ``haMaxGapNotInSync`` behind ``end_offset`` (RocketMQ 5's
        ``DefaultHAService.isInSyncSlave``; a slave that has not reported yet counts from -1)."""
        return end_offset - connection.ack_offset < self.config.ha_max_gap_not_in_sync

    def is_slave_ok(self, end_offset: int) -> bool:
        """A slave is connected and less than ``haSlaveFallbehindMax`` behind ``end_offset`` (RocketMQ's
        ``isSlaveOK``)."""
        return bool(self.connections) and end_offset - self.push2slave_max_offset < self.config.ha_slave_fallbehind_max

    def notify_replicated(self, end_offset: int, callback: Callable[[bool], None]) -> PutStatus | None:
        """SYNC_MASTER's wait for a send ending at ``end_offset``: SLAVE_NOT_AVAILABLE now (nothing registered), or
        ``None`` and later ``callback(True)`` once acknowledged / ``callback(False)`` after ``slaveTimeout``."""
        if not self.waits.running or not self.is_slave_ok(end_offset):
            return PutStatus.SLAVE_NOT_AVAILABLE
        if self.push2slave_max_offset >= end_offset:
            return PutStatus.PUT_OK
        self.waits.add(end_offset, self.config.slave_timeout / 1000, callback)
        self.wake_writers()
        return None

    def wake_writers(self) -> None:
        """New data to send: wake the writers that are waiting for some, once; the sends after it until a writer
        parks again cost an attribute test."""
        data = self._data
        if data is not None:
            self._data = None
            data.set()

    async def wait_for_data(self, deadline: float) -> bool:
        """A writer with nothing to send: until :meth:`wake_writers` (``True``) or the Trio clock reaches
        ``deadline``."""
        data = self._data
        if data is None:
            data = self._data = trio.Event()
        with trio.move_on_at(deadline):
            await data.wait()
        return data.is_set()

    # ---- slave --------------------------------------------------------------------------------------------

    def update_master_address(self, address: str) -> None:
        """The master's HA address, learned from the name server (a slave only)."""
        if self.client is not None:
            self.client.update_master_address(address)

    def note_master_offset(self, offset: int) -> None:
        """The master's ``commitLogMaxOffset`` read by the metadata sync (a slave only; see
        :meth:`HAClient.note_master_offset`)."""
        if self.client is not None:
            self.client.note_master_offset(offset)

    # ---- figures ------------------------------------------------------------------------------------------

    def runtime_info(self) -> dict[str, str]:
        """Replication figures for GET_BROKER_RUNTIME_INFO (ours; RocketMQ 4.x shows none). A slave's own lag,
        ``haSlaveLagBytes``, is the master's CommitLog end as it last learned it (``haMasterMaxOffset``, learned
        ``haMasterMaxOffsetAgeMs`` ago; -1 before anything was learned) less its own end, never negative."""
        store_max = self.store.commitlog.max_offset
        info = {"haListenPort": str(self.port)}
        if self.client is not None:
            client = self.client
            info.update(
                haMasterAddress=client.master_address,
                haConnected=str(bool(client.connected_to)).lower(),
                haSlaveMaxOffset=str(store_max),
                haSlaveDispatchedOffset=str(self.store.replica.dispatched if self.store.replica else store_max),
                haReceivedBytes=str(client.received_bytes),
                haMasterMaxOffset=str(client.master_offset),
                haSlaveLagBytes=str(max(0, client.master_offset - store_max) if client.master_offset >= 0 else -1),
                haMasterMaxOffsetAgeMs=str(
                    int((trio.current_time() - client.master_offset_at) * 1000) if client.master_offset >= 0 else -1
                ),
            )
            return info
        info.update(
            haConnectionCount=str(len(self.connections)),
            haPush2SlaveMaxOffset=str(self.push2slave_max_offset),
            slaveFallBehindMuch=str(max(0, store_max - self.push2slave_max_offset) if self.connections else 0),
            haWaitingSends=str(len(self.waits)),
        )
        for connection in self.connections:
            lag = store_max - connection.ack_offset if connection.ack_offset >= 0 else -1
            info[f"haSlave_{connection.address}"] = f"ackOffset={connection.ack_offset} lagBytes={lag}"
        return info
