"""The broker's part of replication (docs/architecture.md#replication); the protocol itself is the store's
(``store/ha/``).

GET_ALL_DELAY_OFFSET (45), which a slave's metadata sync asks its master, is served by
:mod:`processors.store_ops`.

- :class:`ReplicationRole`: what the controller wires per role. On a slave, each registration round's answer hands
  the master's HA address to the store's HA client (unless ``haMasterAddress`` is set) and the master's address to
  :class:`~broker.slave_sync.SlaveSynchronize`; GET_BROKER_RUNTIME_INFO gets the HA figures.
"""

from __future__ import annotations

import logging

from broker.context import BrokerState
from broker.slave_sync import SlaveSynchronize

log = logging.getLogger(__name__)


class ReplicationRole:
    """Role-dependent wiring of one broker; ``slave_sync`` exists on a slave and on every DLedger member (it runs
    only while the member follows)."""

    def __init__(self, broker: BrokerState, slave_sync: SlaveSynchronize | None) -> None:
        self.broker = broker
        self.slave_sync = slave_sync

    @property
    def is_slave(self) -> bool:
        return self.broker.config.broker_role == "SLAVE"

    def on_master(self, ha_server_addr: str | None, master_addr: str | None) -> None:
        """A registration round's view of the master (both ``None`` while it is not registered): the HA client
        keeps its last address then and retries it, the metadata sync pauses."""
        if not self.is_slave:
            return
        if ha_server_addr:
            self.broker.store.ha.update_master_address(ha_server_addr)
        if self.slave_sync is not None:
            self.slave_sync.master_addr = master_addr
