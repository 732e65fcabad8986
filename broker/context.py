"""``BrokerContext``: everything a broker processor needs, in one object handed to each processor's constructor.

The :class:`~broker.controller.BrokerController` builds it; tests build it with :func:`build_context` over a temporary
directory. It is mutable on purpose: ``config``, ``broker_addr`` and ``store_host`` are updated once the listener is
bound (port 0 picks the real port), and ``hold`` is set when the hold service exists. Processors read these fields at
request time, never cache them.

``on_topic_changed()`` asks for an immediate name-server registration (the topic manager calls it after every topic
change, as Java re-registers right after creating a topic); without a registration service it does nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs

from broker.broker_config import BrokerConfig
from broker.client_registry import ClientRegistry
from broker.consumer_offset_manager import ConsumerOffsetManager
from broker.rebalance_locks import RebalanceLockManager
from broker.stats import BrokerStatsManager
from broker.subscription_group_manager import SubscriptionGroupManager
from broker.topic_config_manager import TopicConfigManager
from processors.hold import HoldService
from remoting.codec.msgid import pack_socket_address
from store.message_store import MessageStore
from store.store_config import FlushDiskType, StoreConfig


def _no_op() -> None:
    return None


@attrs.define(eq=False)
class BrokerContext:
    config: BrokerConfig
    store: MessageStore
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    clients: ClientRegistry
    locks: RebalanceLockManager
    broker_addr: str
    store_host: bytes
    #: Throughput statistics; the pull processor records into it, the controller runs its sampling task.
    stats: BrokerStatsManager
    #: The ``broker.conf`` the broker was started with (``mqbroker -c``): UPDATE_BROKER_CONFIG writes changes back.
    config_path: Path | None = None
    #: The long-poll hold service, once the controller created one.
    hold: HoldService | None = None
    #: Called by :meth:`on_topic_changed`; the controller points it at the registration service.
    topic_changed_hook: Callable[[], None] = _no_op
    #: Wall-clock ms when the broker started (GET_BROKER_RUNTIME_INFO).
    boot_timestamp: int = 0

    def on_topic_changed(self) -> None:
        """Trigger an immediate re-registration with every name server (never blocks)."""
        self.topic_changed_hook()

    def set_bound_port(self, port: int) -> None:
        """Adopt the listener's real port: the address registered with name servers and written into msgIds."""
        self.config = attrs.evolve(self.config, listen_port=port)
        self.broker_addr = self.config.broker_addr
        self.store_host = pack_socket_address(self.config.broker_ip1, port)
        self.store.store_host = self.store_host


def store_config_of(config: BrokerConfig) -> StoreConfig:
    """The store settings a broker config implies (same property names, RocketMQ's MessageStoreConfig)."""
    return StoreConfig(
        store_path_root_dir=Path(config.store_path_root_dir).expanduser(),
        flush_disk_type=FlushDiskType(config.flush_disk_type),
        mapped_file_size_commit_log=config.mapped_file_size_commit_log,
        mapped_file_size_consume_queue=config.mapped_file_size_consume_queue,
        max_message_size=config.max_message_size,
        flush_interval_commit_log=config.flush_interval_commit_log,
        flush_interval_consume_queue=config.flush_interval_consume_queue,
        sync_flush_timeout=config.sync_flush_timeout,
        file_reserved_time=config.file_reserved_time,
        delete_when=config.delete_when,
        disk_max_used_space_ratio=config.disk_max_used_space_ratio,
        message_index_enable=config.message_index_enable,
        max_hash_slot_num=config.max_hash_slot_num,
        max_index_num=config.max_index_num,
        message_delay_level=config.message_delay_level,
        warm_mapped_file_enable=config.warm_mapped_file_enable,
        max_transfer_count_on_message_in_memory=config.max_transfer_count_on_message_in_memory,
    )


def config_dir_of(config: BrokerConfig) -> Path:
    """``<storePathRootDir>/config``, where Java keeps topics.json and friends."""
    return Path(config.store_path_root_dir).expanduser() / "config"


def build_context(config: BrokerConfig, store: MessageStore | None = None) -> BrokerContext:
    """A context with fresh managers (not loaded: call :func:`load_managers`) over ``config``'s directories.

    The store is created (not loaded) unless given. Raises ``ValueError`` for a bad ``flushDiskType``.
    """
    config_dir = config_dir_of(config)
    store_host = pack_socket_address(config.broker_ip1, config.listen_port)
    if store is None:
        store = MessageStore(store_config_of(config), store_host=store_host)
    ctx = BrokerContext(
        config=config,
        store=store,
        topics=TopicConfigManager(config, config_dir),
        groups=SubscriptionGroupManager(config, config_dir),
        offsets=ConsumerOffsetManager(config_dir, config.flush_consumer_offset_interval),
        clients=ClientRegistry(
            channel_expired_timeout=config.channel_expired_timeout / 1000,
            notify_enabled=config.notify_consumer_ids_changed_enable,
        ),
        locks=RebalanceLockManager(config.rebalance_lock_max_live_time / 1000),
        broker_addr=config.broker_addr,
        store_host=store_host,
        stats=BrokerStatsManager(store, config.broker_cluster_name),
    )
    ctx.topics.on_changed = ctx.on_topic_changed
    return ctx


def load_managers(ctx: BrokerContext) -> None:
    """Load topics, groups and offsets from ``config/``. Blocking; raises ConfigFileError for unreadable files."""
    ctx.topics.load()
    ctx.groups.load()
    ctx.offsets.load()
