"""``BrokerState``: one broker's settings, store, managers and hooks, the object every processor is built with.

It implements :class:`processors.context.BrokerContext` (processors see it only through that protocol). The
:class:`~broker.controller.BrokerController` builds it; tests build it with :func:`build_context` over a temporary
directory. It is mutable on purpose: ``config``, ``broker_addr`` and ``store_host`` are updated once the listener is
bound (port 0 picks the real port), and ``hold`` is set when the hold service exists. Processors read these fields at
request time, never cache them.

:meth:`BrokerState.update_config` (UPDATE_BROKER_CONFIG) replaces ``config`` and hands the new settings to every
manager that keeps a copy, then writes the changed keys into the ``-c`` file the broker was started with
(:mod:`broker.broker_conf_file`); a failed write is logged, as Java does: the running broker already uses the values.
The role, id, listen and HA ports and store paths (:data:`RESTART_SETTINGS`) only go to the file: the running broker
keeps its own until its next start (ours: Java switches ``brokerRole`` live in its store's config while its HA service
goes on as before, and would register a ``listenPort`` or ``haListenPort`` it does not listen on). A new
``brokerIP1`` is the address registered from the next round on, as Java's ``getBrokerAddr()`` reads it each time; the
store host in new messages' ids stays the start-up one, as Java's ``storeHost``.
Every update moves ``config_version`` on (GET_BROKER_CONFIG's ``version``, Java's ``Configuration`` DataVersion); a
``brokerPermission`` update also moves the topic DataVersion on and re-registers before it returns, so the routes
carry it once UPDATE_BROKER_CONFIG is answered.
``tls.*`` keys are ignored (ours, for safety: 4.9.8's Configuration.update would change one the ``-c`` file held).

``on_topic_changed()`` asks for an immediate name-server registration (the topic manager calls it after every topic
change, as Java re-registers right after creating a topic); ``register_now()`` also waits for the name servers'
answers, and ``register_topic()`` registers one topic alone and waits likewise (UPDATE_AND_CREATE_TOPIC answers then).
Without a registration service they do nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

import attrs
import trio

from broker.broker_conf_file import persist_properties
from broker.broker_config import BrokerConfig, without_java_nulls
from broker.client_registry import ClientRegistry
from broker.consumer_offset_manager import ConsumerOffsetManager
from broker.rebalance_locks import RebalanceLockManager
from broker.stats import BrokerStatsManager
from broker.stats.half_messages import HalfMessages
from broker.subscription_group_manager import SubscriptionGroupManager
from broker.topic_config_manager import TopicConfigManager
from processors.hold import HoldService
from remoting.codec.bodies.broker_metadata import DataVersion
from remoting.codec.java_properties import PropertiesError, apply_properties, property_texts
from remoting.codec.msgid import pack_socket_address
from remoting.tls import SYSTEM_PROPERTY_PREFIX, held_tls_texts
from store.message_store import MessageStore
from store.metadata_files import TopicConfig
from store.store_config import BrokerRole, FlushDiskType, StoreConfig

if TYPE_CHECKING:
    from dledger.commitlog_store import DLedgerMessageStore

log = logging.getLogger(__name__)


def _no_op() -> None:
    return None


def _ignore_config(_config: BrokerConfig) -> None:
    return None


async def _no_wait() -> None:
    return None


async def _no_topic_wait(_topic: TopicConfig) -> None:
    return None


@attrs.define(eq=False)
class BrokerState:
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
    #: Half messages per real topic (``rocketmq_half_messages``), saved in ``config/transactionMetrics``.
    half_messages: HalfMessages
    #: The ``broker.conf`` the broker was started with (``mqbroker -c``): UPDATE_BROKER_CONFIG writes changes back.
    config_path: Path | None = None
    #: That file's keys no setting has, with their text: BrokerStartup registers the file's properties with
    #: Configuration (``registerConfig``), so GET_BROKER_CONFIG shows them too and UPDATE_BROKER_CONFIG changes and
    #: persists them (``mergeIfExist``), never a key the file did not have (common/src/main/java/org/apache/rocketmq/
    #: common/Configuration.java).
    file_only_properties: dict[str, str] = attrs.field(factory=dict)
    #: That file's ``tls.*`` keys with their text, the only ones GET_BROKER_CONFIG shows and a rewrite of the whole
    #: file writes: JVM system properties in RocketMQ, held by its Configuration only as the file's properties.
    file_tls_properties: dict[str, str] = attrs.field(factory=dict)
    #: The long-poll hold service, once the controller created one.
    hold: HoldService | None = None
    #: Called by :meth:`on_topic_changed`; the controller points it at the registration service.
    topic_changed_hook: Callable[[], None] = _no_op
    #: Awaited by :meth:`register_now`; the controller points it at the registration service's ``register_now``.
    register_hook: Callable[[], Awaitable[None]] = _no_wait
    #: Awaited by :meth:`register_topic`; the controller points it at the registration's ``register_increment``.
    register_topic_hook: Callable[[TopicConfig], Awaitable[object]] = _no_topic_wait
    #: Called with the new settings after every :meth:`update_config`; the controller re-applies the pools' fast
    #: failure waits with it.
    config_changed_hook: Callable[[BrokerConfig], None] = _ignore_config
    #: Wall-clock ms when the broker started (GET_BROKER_RUNTIME_INFO).
    boot_timestamp: int = 0
    #: The settings' version (GET_BROKER_CONFIG's ``version``), moved on by every :meth:`update_config`.
    config_version: DataVersion = attrs.field(factory=DataVersion)

    def on_topic_changed(self) -> None:
        """Trigger an immediate re-registration with every name server (never blocks)."""
        self.topic_changed_hook()

    async def register_now(self) -> None:
        """Register with every name server now and return once they answered (or the register timeout passed)."""
        await self.register_hook()

    async def register_topic(self, topic: TopicConfig) -> None:
        """Register ``topic`` alone with every name server and return once they answered (or timed out)."""
        await self.register_topic_hook(topic)

    def set_bound_port(self, port: int) -> None:
        """Adopt the listener's real port: the address registered with name servers and written into msgIds."""
        self.config = attrs.evolve(self.config, listen_port=port)
        self.broker_addr = self.config.broker_addr
        self.store_host = pack_socket_address(self.config.broker_ip1, port)
        self.store.store_host = self.store_host

    def config_texts(self, config: BrokerConfig | None = None, *, secrets: bool = False) -> dict[str, str]:
        """``config``'s settings (default: the running ones) by property name as Java's Configuration holds them: the
        ``tls.*`` ones only as the ``-c`` file held them (``secrets``: its key passwords too), none Java leaves null
        (:func:`~broker.broker_config.without_java_nulls`)."""
        texts = without_java_nulls(property_texts(self.config if config is None else config))
        return held_tls_texts(texts, self.file_tls_properties, secrets=secrets)

    async def update_config(self, props: Mapping[str, str]) -> list[str]:
        """Apply ``props`` (property names) to the running broker and its ``-c`` file; returns the unknown keys.
        A boolean other than ``true`` is false and a number Java cannot parse is skipped, as
        ``MixAll.properties2Object`` reads them. Raises :class:`~remoting.codec.java_properties.PropertiesError` for a
        port out of range or an enum that is not one of its names: the whole update is refused and nothing is changed
        (ours: Java skips the key)."""
        # tls.* are system properties in RocketMQ (remoting/.../netty/TlsSystemConfig.java), though Configuration.update
        # (mergeIfExist) changes one the -c file held: ignored, so an unauthenticated update cannot turn TLS off.
        ignored = sorted(key for key in props if key.startswith(SYSTEM_PROPERTY_PREFIX))
        props = {key: value for key, value in props.items() if key not in ignored}
        config, unknown = apply_properties(self.config, props)
        held = {key: props[key] for key in unknown if key in self.file_only_properties}  # Configuration.mergeIfExist
        unknown = [key for key in unknown if key not in held] + ignored
        check_enums(config)
        # Written to the file, used from the next start: the running store and its roles keep what they started with
        # (a slave switched live kept replicating as a slave and stopped its metadata sync).
        live = attrs.evolve(config, **{name: getattr(self.config, name) for name in RESTART_SETTINGS})
        self.store.config = store_config_updated(self.store.config, live)
        self.config = live
        self.file_only_properties.update(held)
        self.broker_addr = live.broker_addr
        self.topics.config = live
        self.groups.config = live
        self.clients.notify_enabled = live.notify_consumer_ids_changed_enable
        self.config_version = self.config_version.next_version()  # Configuration.update: nextVersion()
        self.config_changed_hook(live)
        texts = property_texts(config)
        changed = {key: texts[key] for key in props if key in texts} | held
        if self.config_path is not None and changed:
            everything = {**self.file_only_properties, **self.config_texts(config, secrets=True)}
            try:
                await trio.to_thread.run_sync(persist_properties, self.config_path, changed, everything)
            except OSError:
                log.exception("writing the updated broker config to %s failed", self.config_path)
        if "brokerPermission" in props:
            # AdminBrokerProcessor.java updateBrokerConfig: a new version, registered with the new perm before the
            # answer (registerBrokerAll with forceRegister), after Configuration.update wrote the file.
            self.topics.next_version()
            await self.register_now()
        return unknown


def check_enums(config: BrokerConfig) -> None:
    """Raise :class:`~remoting.codec.java_properties.PropertiesError` for a ``brokerRole`` or ``flushDiskType`` that
    is not one of the enum's names (Java's ``BrokerRole``/``FlushDiskType.valueOf`` throw)."""
    if config.broker_role not in _ROLES:
        raise PropertiesError(f"brokerRole {config.broker_role!r} is not one of {', '.join(_ROLES)}")
    flush_types = tuple(kind.value for kind in FlushDiskType)
    if config.flush_disk_type not in flush_types:
        raise PropertiesError(f"flushDiskType {config.flush_disk_type!r} is not one of {', '.join(flush_types)}")


def store_config_of(config: BrokerConfig) -> StoreConfig:
    """The store settings a broker config implies (same property names, RocketMQ's MessageStoreConfig)."""
    return StoreConfig(
        store_path_root_dir=Path(config.store_path_root_dir).expanduser(),
        store_path_commit_log=config.store_path_commit_log,
        read_only_commit_log_store_paths=config.read_only_commit_log_store_paths,
        flush_disk_type=FlushDiskType(config.flush_disk_type),
        mapped_file_size_commit_log=config.mapped_file_size_commit_log,
        mapped_file_size_consume_queue=config.mapped_file_size_consume_queue,
        max_message_size=config.max_message_size,
        flush_interval_commit_log=config.flush_interval_commit_log,
        flush_commit_log_least_pages=config.flush_commit_log_least_pages,
        flush_commit_log_thorough_interval=config.flush_commit_log_thorough_interval,
        flush_commit_log_timed=config.flush_commit_log_timed,
        flush_interval_consume_queue=config.flush_interval_consume_queue,
        flush_consume_queue_least_pages=config.flush_consume_queue_least_pages,
        flush_consume_queue_thorough_interval=config.flush_consume_queue_thorough_interval,
        check_crc_on_recover=config.check_crc_on_recover,
        clean_resource_interval=config.clean_resource_interval,
        delete_consume_queue_files_interval=config.delete_consume_queue_files_interval,
        destroy_maped_file_interval_forcibly=config.destroy_maped_file_interval_forcibly,
        sync_flush_timeout=config.sync_flush_timeout,
        file_reserved_time=config.file_reserved_time,
        delete_when=config.delete_when,
        disk_max_used_space_ratio=config.disk_max_used_space_ratio,
        clean_file_forcibly_enable=config.clean_file_forcibly_enable,
        delete_commit_log_files_interval=config.delete_commit_log_files_interval,
        message_index_enable=config.message_index_enable,
        enable_lmq=config.enable_lmq,
        enable_multi_dispatch=config.enable_multi_dispatch,
        max_lmq_consume_queue_num=config.max_lmq_consume_queue_num,
        max_hash_slot_num=config.max_hash_slot_num,
        max_index_num=config.max_index_num,
        message_delay_level=config.message_delay_level,
        warm_mapped_file_enable=config.warm_mapped_file_enable,
        os_page_cache_busy_time_out_mills=config.os_page_cache_busy_time_out_mills,
        max_transfer_count_on_message_in_memory=config.max_transfer_count_on_message_in_memory,
        max_transfer_bytes_on_message_in_memory=config.max_transfer_bytes_on_message_in_memory,
        max_transfer_count_on_message_in_disk=config.max_transfer_count_on_message_in_disk,
        max_transfer_bytes_on_message_in_disk=config.max_transfer_bytes_on_message_in_disk,
        broker_role=BrokerRole(config.broker_role),
        ha_listen_port=config.ha_bind_port,
        ha_listen_port_fallback=not config.ha_listen_port,
        ha_listen_host=config.listen_host,
        ha_send_heartbeat_interval=config.ha_send_heartbeat_interval,
        ha_housekeeping_interval=config.ha_housekeeping_interval,
        ha_transfer_batch_size=config.ha_transfer_batch_size,
        ha_slave_fallbehind_max=config.ha_slave_fallbehind_max,
        ha_max_gap_not_in_sync=config.ha_max_gap_not_in_sync,
        ha_master_address=config.ha_master_address,
        slave_timeout=config.slave_timeout,
        access_message_in_memory_max_ratio=config.access_message_in_memory_max_ratio,
    )


#: Broker settings UPDATE_BROKER_CONFIG writes to the ``-c`` file but the running broker keeps until its next start
#: (DLedger mode rewrites the role itself on every role change).
RESTART_SETTINGS: Final = ("broker_role", "broker_id", "listen_port", "ha_listen_port", "store_path_root_dir",
                           "store_path_commit_log", "read_only_commit_log_store_paths",
                           "enable_dleger_commit_log")  # fmt: skip
_ROLES: Final = tuple(role.value for role in BrokerRole)

#: Store settings UPDATE_BROKER_CONFIG changes in a running broker (replication's timings and limits, the message size
#: limit, pull batch limits, retention, the periodic flushes and the sync flush wait, warming new segments, indexing
#: new keys; read where they are used); the others (paths, segment sizes, roles, ports, ``cleanResourceInterval``,
#: ``checkCRCOnRecover``) take effect at the next start.
LIVE_STORE_SETTINGS = (
    "slave_timeout",
    "ha_send_heartbeat_interval",
    "ha_housekeeping_interval",
    "ha_transfer_batch_size",
    "ha_slave_fallbehind_max",
    "ha_max_gap_not_in_sync",
    "access_message_in_memory_max_ratio",
    # CommitLog.updateMaxMessageSize reads it before every put (store/src/main/java/org/apache/rocketmq/store/
    # CommitLog.java): the new config rebinds the append path with it.
    "max_message_size",
    # Pull batch limits: DefaultMessageStore.isTheBatchFull reads them from MessageStoreConfig on every pull.
    "max_transfer_count_on_message_in_memory",
    "max_transfer_bytes_on_message_in_memory",
    "max_transfer_count_on_message_in_disk",
    "max_transfer_bytes_on_message_in_disk",
    # Retention: CleanCommitLogService reads them from MessageStoreConfig at every pass
    # (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java).
    "file_reserved_time",
    "delete_when",
    "disk_max_used_space_ratio",
    "clean_file_forcibly_enable",
    "delete_commit_log_files_interval",
    "delete_consume_queue_files_interval",
    "destroy_maped_file_interval_forcibly",
    # CommitLog.FlushRealTimeService and DefaultMessageStore.FlushConsumeQueueService read theirs at every round.
    "flush_interval_commit_log",
    "flush_commit_log_least_pages",
    "flush_commit_log_thorough_interval",
    "flush_commit_log_timed",
    "flush_interval_consume_queue",
    "flush_consume_queue_least_pages",
    "flush_consume_queue_thorough_interval",
    # CommitLog.handleDiskFlush reads getSyncFlushTimeout() for every SYNC_FLUSH put's group commit request.
    "sync_flush_timeout",
    # AllocateMappedFileService and CommitLog read isWarmMapedFileEnable at every new segment
    # (store/src/main/java/org/apache/rocketmq/store/AllocateMappedFileService.java).
    "warm_mapped_file_enable",
    # DefaultMessageStore.isOSPageCacheBusy reads it at every call.
    "os_page_cache_busy_time_out_mills",
    # CommitLogDispatcherBuildIndex reads isMessageIndexEnable at every dispatch
    # (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java).
    "message_index_enable",
    # MultiDispatch and DefaultMessageStore.isLmqConsumeQueueNumExceeded read them at every put
    # (store/src/main/java/org/apache/rocketmq/store/MultiDispatch.java); enableLmq picks the broker's managers at
    # start (broker/src/main/java/org/apache/rocketmq/broker/BrokerController.java), so it stays as started.
    "enable_multi_dispatch",
    "max_lmq_consume_queue_num",
)

#: The smallest ``maxMessageSize`` a running store takes: CommitLog.updateMaxMessageSize (4.9.8) keeps its limit
#: when the new one is below 10 bytes.
MIN_LIVE_MAX_MESSAGE_SIZE: Final = 10


def store_config_updated(current: StoreConfig, config: BrokerConfig) -> StoreConfig:
    """``current`` with the :data:`LIVE_STORE_SETTINGS` of ``config``; ``current`` itself when none changed."""
    fresh = store_config_of(config)
    changes = {
        name: getattr(fresh, name) for name in LIVE_STORE_SETTINGS if getattr(fresh, name) != getattr(current, name)
    }
    if changes.get("max_message_size", MIN_LIVE_MAX_MESSAGE_SIZE) < MIN_LIVE_MAX_MESSAGE_SIZE:
        del changes["max_message_size"]
    return attrs.evolve(current, **changes) if changes else current


def config_dir_of(config: BrokerConfig) -> Path:
    """``<storePathRootDir>/config``, where Java keeps topics.json and friends."""
    return Path(config.store_path_root_dir).expanduser() / "config"


def build_context(config: BrokerConfig, store: MessageStore | None = None) -> BrokerState:
    """A context with fresh managers (not loaded: call :func:`load_managers`) over ``config``'s directories.

    The store is created (not loaded) unless given. Raises ``ValueError`` for a bad ``flushDiskType``.
    """
    config_dir = config_dir_of(config)
    store_host = pack_socket_address(config.broker_ip1, config.listen_port)
    if store is None and config.enable_dleger_commit_log:
        from broker.dledger_mode import as_follower, dledger_store  # only in DLedger mode

        store = dledger_store(config, store_config_of(config), store_host)
        config = as_follower(config)
    if store is None:
        store = MessageStore(store_config_of(config), store_host=store_host)
    ctx = BrokerState(
        config=config,
        store=store,
        topics=TopicConfigManager(config, config_dir),
        groups=SubscriptionGroupManager(config, config_dir),
        offsets=ConsumerOffsetManager(config_dir, config.flush_consumer_offset_interval, config.enable_lmq),
        clients=ClientRegistry(
            channel_expired_timeout=config.channel_expired_timeout / 1000,
            subscription_expired_timeout=config.subscription_expired_timeout / 1000,
            notify_enabled=config.notify_consumer_ids_changed_enable,
        ),
        locks=RebalanceLockManager(config.rebalance_lock_max_live_time / 1000),
        broker_addr=config.broker_addr,
        store_host=store_host,
        stats=BrokerStatsManager(
            store,
            config.broker_cluster_name,
            replica=config.broker_role == "SLAVE",
            queue_stat=config.enable_detail_stat,
            lmq=config.enable_lmq,
            series_limit=config.metrics_otel_cardinality_limit,
        ),
        half_messages=HalfMessages(config_dir),
    )
    ctx.topics.on_changed = ctx.on_topic_changed
    return ctx


def dledger_store_of(ctx: BrokerState) -> DLedgerMessageStore | None:
    """``ctx``'s store when it is DLedger's commit log (:func:`build_context` makes one with
    ``enableDLegerCommitLog``, a setting kept until the next start), else None. The dledger package is imported only
    then: an idle broker without DLedger does not carry it."""
    if not ctx.config.enable_dleger_commit_log:
        return None
    from dledger.commitlog_store import DLedgerMessageStore  # only in DLedger mode

    return ctx.store if isinstance(ctx.store, DLedgerMessageStore) else None


def load_managers(ctx: BrokerState) -> None:
    """Load topics, groups, offsets and half message counts from ``config/``. Blocking; raises ConfigFileError for
    unreadable files."""
    ctx.topics.load()
    ctx.groups.load()
    ctx.offsets.load()
    ctx.half_messages.load()
