"""``SubscriptionGroupManager``: consumer group settings and ``config/subscriptionGroup.json``
(docs/protocol.md#410-subscriptiongroupconfig, docs/protocol.md#67-config-files).

Java pre-creates a handful of tool and system groups; every other group is created on first use
(:meth:`SubscriptionGroupManager.find`) when ``autoCreateSubscriptionGroup`` is on, or when it is a system group
(``CID_RMQ_SYS_`` prefix); with ``enableLmq`` a ``%LMQ%`` group is made up on each use and never stored.
Mutations are synchronous, bump the DataVersion and schedule a save in a worker thread (:meth:`run`, started in the
broker's nursery, also saves at shutdown).

Errors: :meth:`load` raises :class:`~store.metadata_files.ConfigFileError` when the file and its backup are unreadable.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Final

import attrs
import trio

from broker.broker_config import BrokerConfig
from broker.persistence import ConfigPersister
from remoting.codec.topics import is_legal_name, is_system_group
from store.metadata_files import DataVersion, SubscriptionGroupConfig, SubscriptionGroupTable, subscription_group_file
from store.multi_dispatch import LMQ_PREFIX

log = logging.getLogger(__name__)

#: The longest group name auto-created (the client's ``Validators.CHARACTER_MAX_LENGTH``).
GROUP_MAX_LENGTH: Final = 255

#: Groups every Java broker has from the start (MixAll's tool, filter-server, self-test and ONS groups).
PREDEFINED_GROUPS: Final = (
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_RMQ_SYS_TRANS",
)


class SubscriptionGroupManager:
    """Group name -> :class:`~store.metadata_files.SubscriptionGroupConfig`. See the module docstring."""

    def __init__(self, config: BrokerConfig, config_dir: Path) -> None:
        self.config = config
        self._table: dict[str, SubscriptionGroupConfig] = {g: SubscriptionGroupConfig(g) for g in PREDEFINED_GROUPS}
        self.data_version = DataVersion()
        self.persister = ConfigPersister(subscription_group_file(config_dir), self._snapshot)
        #: ``enableLmq`` at start: ``%LMQ%`` groups need no creation (:meth:`find`).
        self._lmq = config.enable_lmq

    def _snapshot(self) -> SubscriptionGroupTable:
        return SubscriptionGroupTable(dict(self._table), self.data_version)

    def load(self) -> None:
        """Overlay ``subscriptionGroup.json`` on the predefined groups. Blocking; raises ConfigFileError."""
        loaded = self.persister.load()
        if loaded is None:
            self.persister.mark_dirty()  # a fresh broker writes its file at once, as Java's does
        else:
            self._table.update(loaded.subscription_group_table)
            self.data_version = loaded.data_version

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Save after each change until cancelled, then once more."""
        await self.persister.run(task_status=task_status)

    async def persist(self) -> None:
        await self.persister.persist()

    def write_through(self) -> None:
        """Write the file now, before an admin request is answered (:meth:`ConfigPersister.write_through`: a failed
        write is logged and left to the background save)."""
        self.persister.write_through()

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config without auto-creating it."""
        return self._table.get(group)

    @property
    def groups(self) -> dict[str, SubscriptionGroupConfig]:
        """A copy of the table."""
        return dict(self._table)

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, auto-created with defaults when allowed; ``None`` when unknown and not creatable.

        A name longer than 255 characters or with a character outside ``^[%|a-zA-Z0-9_-]+$`` is never auto-created
        (RocketMQ 5's broker/src/main/java/org/apache/rocketmq/broker/subscription/SubscriptionGroupManager.java
        ``findSubscriptionGroupConfig``): a heartbeat or send-back naming ``../..`` would otherwise get ``%RETRY%``
        and ``%DLQ%`` topics whose ConsumeQueue directories lie outside the store's ``consumequeue/``."""
        found = self._table.get(group)
        if found is not None:
            return found
        if self._lmq and group.startswith(LMQ_PREFIX):  # LmqSubscriptionGroupManager: made up, never stored
            return SubscriptionGroupConfig(group)
        if not (self.config.auto_create_subscription_group or is_system_group(group)):
            return None
        if len(group) > GROUP_MAX_LENGTH or not is_legal_name(group):
            log.warning("subscription group %r not auto-created: illegal name", group[:GROUP_MAX_LENGTH])
            return None
        created = SubscriptionGroupConfig(group)
        self._table[group] = created
        log.info("auto-created subscription group %s", group)
        self._changed()
        return created

    def replace_all(self, table: SubscriptionGroupTable) -> bool:
        """A slave adopts its master's groups (SlaveSynchronize) when the data versions differ; returns whether it
        did."""
        if table.data_version == self.data_version:
            return False
        self._table = dict(table.subscription_group_table)
        self.data_version = table.data_version
        self.persister.mark_dirty()
        return True

    def update(self, config: SubscriptionGroupConfig) -> None:
        """Create or replace a group (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP); with ``enableLmq`` an ``%LMQ%`` group is
        not stored (LmqSubscriptionGroupManager.updateSubscriptionGroupConfig)."""
        if self._lmq and config.group_name.startswith(LMQ_PREFIX):
            return
        self._table[config.group_name] = config
        log.info("subscription group %s updated: %s", config.group_name, config)
        self._changed()

    def disable_consume(self, group: str) -> None:
        """Turn the known group's ``consumeEnable`` off in memory, bumping the data version but saving nothing: as
        broker/src/main/java/org/apache/rocketmq/broker/subscription/SubscriptionGroupManager.java disableConsume
        (the next save of the table writes it)."""
        old = self._table.get(group)
        if old is not None:
            self._table[group] = attrs.evolve(old, consume_enable=False)
            self.data_version = self.data_version.next_version()

    def delete(self, group: str) -> SubscriptionGroupConfig | None:
        """Remove a group; returns it, or ``None`` when unknown (nothing changes then)."""
        old = self._table.pop(group, None)
        if old is not None:
            log.info("subscription group %s deleted", group)
            self._changed()
        return old

    def _changed(self) -> None:
        self.data_version = self.data_version.next_version()
        self.persister.mark_dirty()
