"""GET_BROKER_HA_STATUS (907, RocketMQ 5; ``mqadmin haStatus``): :class:`HAStatusProcessor` answers the store's
replication state as an ``HARuntimeInfo`` body (:mod:`remoting.codec.bodies.ha`), built from the store's
:class:`~store.ha.service.HAService` as 5.3.3's ``DefaultHAService.getRuntimeInfo``
(store/src/main/java/org/apache/rocketmq/store/ha/DefaultHAService.java) builds it:

- a master (any role but SLAVE, a lone one included): its CommitLog end, and per connected slave its address, last
  acknowledged offset (-1 before its first report), the gap to the end, whether that gap is under
  ``haMaxGapNotInSync``, the bytes sent in the last second and the next offset to send (-1 before the first report);
- a slave: its master's HA address (left out while none is known), its own CommitLog end, the bytes received in the
  last second, in epoch ms the last read from the master (or connect attempt, or the client's start; 0 from a
  session's end to the next attempt) and the last report to it (or the client's start), as 5.3.3's
  ``DefaultHAClient`` keeps them, and ``masterFlushOffset`` 0 (5.3.3 sets it only in controller mode, as an acting
  master, with ``syncMasterFlushOffsetWhenStartup`` or by RESET_MASTER_FLUSH_OFFSET, none of which we run).

Errors: a broker in DLedger mode has no such service and answers SYSTEM_ERROR with 5.3.3's remark
(broker/src/main/java/org/apache/rocketmq/broker/processor/AdminBrokerProcessor.java ``getBrokerHaStatus``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

import trio

from remoting.codec.bodies.ha import HAClientRuntimeInfo, HAConnectionRuntimeInfo, HARuntimeInfo
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.processor import RequestContext
from store.store_config import BrokerRole

if TYPE_CHECKING:
    from processors.context import BrokerContext
    from store.ha.service import HAService
    from store.ha.slave import HAClient

__all__ = ["HAStatusProcessor", "ha_runtime_info"]

#: 5.3.3's answer when the store has no HA service.
NO_HA_SERVICE: Final = "Can not get HARuntimeInfo, may be duplicationEnable is true"


class HAStatusProcessor:
    """Serves :attr:`REQUEST_CODES`; stateless, reads ``broker`` per request."""

    REQUEST_CODES: Final = (RequestCode.GET_BROKER_HA_STATUS,)

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if self.broker.config.enable_dleger_commit_log:
            return request.response(ResponseCode.SYSTEM_ERROR, NO_HA_SERVICE)
        info = ha_runtime_info(self.broker.store.ha)
        return request.response(ResponseCode.SUCCESS, body=info.encode())


def ha_runtime_info(service: HAService) -> HARuntimeInfo:
    """The store's replication state (see the module docstring)."""
    store = service.store
    end = store.commitlog.max_offset
    if store.config.broker_role == BrokerRole.SLAVE:
        return HARuntimeInfo(master=False, ha_client_runtime_info=_client_info(service.client, end))
    connections = tuple(
        HAConnectionRuntimeInfo(
            addr=c.address,
            slave_ack_offset=c.ack_offset,
            diff=end - c.ack_offset,
            in_sync=service.is_in_sync(c, end),
            transferred_byte_in_second=c.sent_rate.per_second,
            transfer_from_where=c.next_offset,
        )
        for c in list(service.connections)
    )
    return HARuntimeInfo(
        master=True,
        master_commit_log_max_offset=end,
        in_sync_slave_nums=sum(c.in_sync for c in connections),
        ha_connection_info=connections,
    )


def _client_info(client: HAClient | None, end: int) -> HAClientRuntimeInfo:
    if client is None:  # the HA service has not started yet
        return HAClientRuntimeInfo(max_offset=end)
    return HAClientRuntimeInfo(
        master_addr=client.master_address or None,
        transferred_byte_in_second=client.received_rate.per_second,
        max_offset=end,
        last_read_timestamp=0 if client.read_reset else _epoch_ms(client.last_contact),
        last_write_timestamp=_epoch_ms(client.last_report),
    )


def _epoch_ms(at: float) -> int:
    """A Trio clock time as epoch ms."""
    return int((time.time() - (trio.current_time() - at)) * 1000)
