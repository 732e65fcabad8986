"""Broker configuration with RocketMQ's property names (``mqbroker -c broker.conf``).

Each field's property name is its camelCase form (``metadata["key"]`` where that differs, e.g.
``brokerIP1``); defaults are RocketMQ 4.9.8's, brokerIP1's computed as Java's is (the host's address,
:mod:`remoting.local_address`) unless ``listenHost`` names one interface, brokerName's too (the host's name).
:func:`load_broker_config` reads a properties file with :func:`remoting.codec.java_properties.config_from_properties`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import attrs

from remoting.codec.java_properties import (
    JAVA_LONG,
    PORT,
    config_from_properties,
    decode_properties_file,
    parse_properties,
    property_name,
)
from remoting.cpus import available_cpus
from remoting.local_address import advertised_host, local_host_name
from remoting.server import ListenerSettings

#: MessageRequestMode's names; another ``defaultMessageRequestMode`` is skipped, as 5.3.3's setter's ``valueOf``
#: fails and MixAll.properties2Object swallows it.
MESSAGE_REQUEST_MODES: Final = ("PULL", "POP")


#: RocketMQ 5.3.3's MessageStoreConfig ``mappedFileSizeTimerLog`` default: the timer log's segment size (the broker's
#: setting below and the timer classes' own default, broker/timer/).
TIMER_LOG_FILE_SIZE: Final = 100 << 20


@attrs.frozen
class BrokerConfig(ListenerSettings):
    """The broker's settings; the ``tls.*`` ones and the listeners' limits (``serverMaxConnections``,
    ``serverMaxRequestsInFlight``, ``serverMaxBufferedBytes``) come from :class:`remoting.server.ListenerSettings`."""

    broker_cluster_name: str = "DefaultCluster"
    #: Default: the host's name, ``DEFAULT_BROKER`` when it does not resolve (4.9.8's ``localHostName()``), so brokers
    #: started without one on different hosts do not collide. The embedded cluster names its own (``broker-a``, ...).
    broker_name: str = attrs.field(factory=lambda: local_host_name("DEFAULT_BROKER"))
    broker_id: int = attrs.field(default=0, metadata=JAVA_LONG)
    broker_role: str = "ASYNC_MASTER"
    #: Interface the main port binds (ours: Java binds every interface).
    listen_host: str = "0.0.0.0"
    #: The address registered with the name servers and written into message ids. Default: ``listenHost`` when it
    #: names one interface, else the host's address as Java's BrokerConfig picks it (remoting/local_address.py).
    broker_ip1: str = attrs.field(
        default=attrs.Factory(lambda self: advertised_host(self.listen_host), takes_self=True),
        metadata={"key": "brokerIP1"},
    )
    #: The HA address's host; empty means ``brokerIP1`` (Java defaults both to the local address).
    broker_ip2: str = attrs.field(default="", metadata={"key": "brokerIP2"})
    listen_port: int = attrs.field(default=10911, metadata=PORT)
    #: Also serve the "VIP" channel on ``listenPort - 2`` (everything but PULL_MESSAGE), which Java clients up to 4.4
    #: and rocketmq-dashboard use by default; a port that cannot be bound fails the start, as in Java. Ours: Java
    #: always opens it; skipped when listenPort is 0 (no port to derive it from).
    fast_channel_enable: bool = True
    #: Master HA port; 0 means ``listenPort + 1`` as Java derives it.
    ha_listen_port: int = attrs.field(default=0, metadata=PORT)
    namesrv_addr: str = ""
    store_path_root_dir: str = str(Path.home() / "store")
    #: The CommitLog's directory, or several ``,``-separated (RocketMQ's multi-path CommitLog); empty:
    #: ``<storePathRootDir>/commitlog``.
    store_path_commit_log: str = ""
    #: With several CommitLog directories: ``,``-separated ones whose segments are read but never written.
    read_only_commit_log_store_paths: str = ""
    flush_disk_type: str = "ASYNC_FLUSH"
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * 20
    max_message_size: int = 4 * 1024 * 1024
    #: The periodic flushes (store/services.py FlushService, MessageStoreConfig's names and defaults): the CommitLog
    #: every ``flushIntervalCommitLog`` ms once ``flushCommitLogLeastPages`` pages are unsynced, everything every
    #: ``flushCommitLogThoroughInterval`` ms; the ConsumeQueues the same with their own three, the checkpoint in
    #: their thorough round. Read at every round: UPDATE_BROKER_CONFIG applies at the next one.
    flush_interval_commit_log: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval: int = 10_000
    #: Sleep the whole interval between two CommitLog rounds (Java's default); false: a round starts at each append
    #: (ASYNC_FLUSH), at the latest after the interval.
    flush_commit_log_timed: bool = True
    flush_interval_consume_queue: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60_000
    #: Recovery after a crash checks each record's body CRC (read at start).
    check_crc_on_recover: bool = attrs.field(default=True, metadata={"key": "checkCRCOnRecover"})
    message_index_enable: bool = True
    #: Light Message Queues and multi-dispatch (store/multi_dispatch.py; MessageStoreConfig's names and defaults):
    #: ``%LMQ%`` topics and groups need no creation, LMQ groups' offsets go to lmqConsumerOffset.json. ``enableLmq``
    #: is read at start; the other two apply live (UPDATE_BROKER_CONFIG), as the store reads them at every put.
    enable_lmq: bool = False
    enable_multi_dispatch: bool = False
    max_lmq_consume_queue_num: int = 20_000
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    #: Write the zeros of each new CommitLog segment ahead; the key is spelled ``warmMapedFileEnable`` as in
    #: store/src/main/java/org/apache/rocketmq/store/config/MessageStoreConfig.java.
    warm_mapped_file_enable: bool = attrs.field(default=False, metadata={"key": "warmMapedFileEnable"})
    sync_flush_timeout: int = 5000
    file_reserved_time: int = 72
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    clean_file_forcibly_enable: bool = True
    #: Pause (ms) between two CommitLog segment deletions of one retention pass (MessageStoreConfig's name).
    delete_commit_log_files_interval: int = 100
    #: Pause (ms) after each ConsumeQueue whose expired files a pass deleted (CleanConsumeQueueService).
    delete_consume_queue_files_interval: int = 100
    #: Java's grace (ms) before a segment readers still reference is destroyed anyway; shown and stored, nothing to
    #: wait for here (a deleted segment is unlinked at once, the slices readers hold keep its mapping until dropped).
    destroy_maped_file_interval_forcibly: int = 120_000
    #: Period (ms) of the retention passes (CleanCommitLogService then CleanConsumeQueueService; read at start).
    clean_resource_interval: int = 10_000
    auto_create_topic_enable: bool = True
    #: RocketMQ 5: whether a topic may be given ``message.type=MIXED`` (UPDATE_AND_CREATE_TOPIC's attributes).
    enable_mixed_message_type: bool = False
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 8
    cluster_topic_enable: bool = True
    trace_topic_enable: bool = False
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    broker_topic_enable: bool = True
    long_polling_enable: bool = True
    #: Pops parked for long polling (5.x gRPC receives that found nothing): at most ``popPollingSize`` + 1 per topic,
    #: group and queue, and fewer than ``maxPopPollingSize`` in all; past either a receive answers "polling full"
    #: (RocketMQ 5's BrokerConfig and PopLongPollingService.polling).
    pop_polling_size: int = 1024
    max_pop_polling_size: int = attrs.field(default=100_000, metadata=JAVA_LONG)
    #: Every message whose queue offset + 1 is a multiple of this wakes a parked pop of each group on its topic
    #: whatever the pop's filter (0 or less: never), read at each arrival (RocketMQ 5.3.3's BrokerConfig, read by
    #: broker/src/main/java/org/apache/rocketmq/broker/longpolling/PopLongPollingService.java notifyMessageArriving).
    pop_long_polling_force_notify_interval: int = attrs.field(default=800, metadata=JAVA_LONG)
    #: The share of pops, in percent, that read the group's pop retry topic before the topic (the others read it only
    #: when the topic left the pop short), read at each pop (RocketMQ 5.3.3's BrokerConfig; broker/src/main/java/org/
    #: apache/rocketmq/broker/processor/PopMessageProcessor.java ``needRetry``).
    pop_from_retry_probability: int = 20
    #: A FIFO queue whose batch in flight becomes visible again wakes a parked pop of its group (RocketMQ 5.3.3's
    #: BrokerConfig; broker/src/main/java/org/apache/rocketmq/broker/offset/ConsumerOrderInfoLockManager.java, whose
    #: timer checks it when it fires). An orderly ack wakes one either way, as AckMessageProcessor.ackOrderly does.
    enable_notify_after_pop_order_lock_release: bool = True
    #: Milliseconds the pop revive loop waits before each round, read every time (RocketMQ 5.3.3's BrokerConfig, read
    #: by broker/src/main/java/org/apache/rocketmq/broker/processor/PopReviveService.java ``run``).
    revive_interval: int = attrs.field(default=1000, metadata=JAVA_LONG)
    #: QUERY_ASSIGNMENT balances a group's queues among its consumers on the broker; off, each is given every queue
    #: (RocketMQ 5.3.3's BrokerConfig, read by broker/src/main/java/org/apache/rocketmq/broker/processor/
    #: QueryAssignmentProcessor.java ``doLoadBalance``).
    server_load_balancer_enable: bool = True
    #: The mode QUERY_ASSIGNMENT answers for a topic and group without one set (``PULL`` or ``POP``; a retry topic is
    #: always PULL), and the ``popShareQueueNum`` of a POP default (5.3.3's BrokerConfig).
    default_message_request_mode: str = attrs.field(
        default="PULL",
        validator=attrs.validators.in_(MESSAGE_REQUEST_MODES),
        metadata={"choices": MESSAGE_REQUEST_MODES},
    )
    default_pop_share_queue_num: int = -1
    #: Milliseconds a topic's route QUERY_ASSIGNMENT read from the name server serves before it is read again (5.3.3's
    #: BrokerConfig, broker/src/main/java/org/apache/rocketmq/broker/topic/TopicRouteInfoManager.java's period).
    load_balance_poll_name_server_interval: int = attrs.field(default=30_000, metadata=JAVA_LONG)
    #: The broker's own read/write permission (PermName bits: 4 read, 2 write): without read pulls answer
    #: NO_PERMISSION, without write sends and send-backs do (RocketMQ sets it to 4 to drain a broker before removal).
    broker_permission: int = 6
    #: Let consumers read from slaves: a pull then suggests the group's ``brokerId`` (``whichBrokerWhenConsumeSlowly``
    #: when the master's backlog is not in memory). Off, every pull suggests the master; a slave still serves the
    #: pull itself, as RocketMQ 4.9.8 does (its status switch overwrites the PULL_RETRY_IMMEDIATELY it set first).
    slave_read_enable: bool = False
    #: A slave corrects a pull's offset errors as a master does (RocketMQ's MessageStoreConfig setting). Off, it
    #: answers them with the requested offset as the next one, and PULL_OFFSET_MOVED becomes PULL_RETRY_IMMEDIATELY
    #: suggesting the group's ``brokerId``, with no offset-moved event: a slave lagging behind its master must not
    #: move a consumer's offset.
    offset_check_in_slave: bool = False
    #: INVOKE_BROKER_TO_RESET_OFFSET resets on the broker, as RocketMQ 5.3.3's ``useServerSideResetOffset`` (its
    #: default is true; 4.9.8 has no such key and behaves as false, our default): each queue is committed and held
    #: for the group's next pull (answered PULL_OFFSET_MOVED to it) or pop, client commits ignored meanwhile, online
    #: consumers or not and none told. False: 4.9.8's Broker2Client.resetOffset pushes the new offsets to the
    #: online consumers (docs/mqadmin.md#consumer-offset-resets).
    use_server_side_reset_offset: bool = False
    #: Refuse transactional (half message) sends with NO_PERMISSION; END_TRANSACTION of accepted ones still works.
    reject_transaction_message: bool = False
    #: Most messages one pull returns while its data is in memory (Java's MessageStoreConfig setting of that name)...
    max_transfer_count_on_message_in_memory: int = 32
    #: ...most bytes, and the same two once the data is on disk (``accessMessageInMemoryMaxRatio``).
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_disk: int = 8
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024
    #: QUERY_MESSAGE: most records a key query returns (``maxNum`` is capped to it), and a unique-key query's count
    #: (MessageStoreConfig's maxMsgsNumBatch and defaultQueryMaxNum).
    max_msgs_num_batch: int = 64
    default_query_max_num: int = 32
    #: Serve SQL92 subscriptions (broker-side property filters); off by default, as in RocketMQ.
    enable_property_filter: bool = False
    #: Match each message of ``%RETRY%<group>`` against the group's SQL92 subscription of the topic it came from (Java's
    #: ExpressionForRetryMessageFilter, chosen by PullMessageProcessor); off by default, as in RocketMQ.
    filter_support_retry: bool = False
    short_polling_time_mills: int = attrs.field(default=1000, metadata=JAVA_LONG)
    register_name_server_period: int = 30_000
    register_broker_timeout_mills: int = 6000
    #: REGISTER_BROKER with the zlib body (``compressed`` header), for a topic table too large for a 16 MiB frame
    #: (common/.../BrokerConfig.java ``compressedRegister``, read by BrokerOuterAPI.registerBrokerAll).
    compressed_register: bool = False
    #: False: a periodic round asks each name server QUERY_DATA_VERSION first and registers only where the topic
    #: table changed (common/.../BrokerConfig.java ``forceRegister``, BrokerController.java ``needRegister``).
    force_register: bool = True
    rebalance_lock_max_live_time: int = attrs.field(default=60_000, metadata=JAVA_LONG)
    #: A client channel silent for this long (ms) is dropped by the registry's 10 s scan (Java's 120 s constant).
    channel_expired_timeout: int = attrs.field(default=120_000, metadata=JAVA_LONG)
    #: A subscription a pop recorded for a group (ConsumerManager's compensation table) is forgotten this long (ms)
    #: after its last pop, by the same scan (5.3.3's ``subscriptionExpiredTimeout``).
    subscription_expired_timeout: int = attrs.field(default=600_000, metadata=JAVA_LONG)
    server_channel_max_idle_time_seconds: int = 120
    flush_consumer_offset_interval: int = 5000
    notify_consumer_ids_changed_enable: bool = True
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    #: delayOffset.json save interval (ms), as Java's flushDelayOffsetInterval.
    flush_delay_offset_interval: int = attrs.field(default=10_000, metadata=JAVA_LONG)
    #: Timer messages (RocketMQ 5 names): slot width in ms (snapped down to 100, 200, 500 or 1000 as Java's setter;
    #: ours defaults to 100 for sub-second precision, Java 1000), the longest accepted delay, and the checkpoint save
    #: interval (Java's default: store/src/main/java/org/apache/rocketmq/store/config/MessageStoreConfig.java; a
    #: crash repeats the deliveries made since the last save).
    #: RocketMQ 5.3's ``timerWheelEnable``: false runs no timer (none is opened), refuses every message carrying a
    #: ``TIMER_*`` time (SYSTEM_ERROR) and every pop (its checkpoints need the timer).
    timer_wheel_enable: bool = True
    timer_precision_ms: int = 100
    timer_max_delay_sec: int = 3 * 24 * 3600
    timer_flush_interval_ms: int = 1000
    #: RocketMQ 5.3: a timer message whose delivery slot already holds more than this many entries is refused
    #: (SYSTEM_ERROR, WHEEL_TIMER_FLOW_CONTROL): at random above it, always at twice it; Java's default is no limit.
    timer_congest_num_each_slot: int = 2**31 - 1
    #: RocketMQ 5.3: hold the timer's filing of new timer messages into the wheel (``timerStopEnqueue``) or its
    #: deliveries and rolls (``timerStopDequeue``) while true, read live (updateBrokerConfig applies at once).
    timer_stop_enqueue: bool = False
    timer_stop_dequeue: bool = False
    #: RocketMQ 5.3.3: a timer delivery or roll the store refuses (disk full, ...) is retried until taken while true;
    #: false (Java's default) drops it at the third refusal in a row, logged. Read at each refusal.
    timer_enable_retry_until_success: bool = False
    #: RocketMQ 5.3's roll window in slots (default two days of slots, capped at the wheel's size less 60): a timer
    #: due later is written again to the CommitLog each window, so keep ``fileReservedTime`` above window x precision.
    timer_roll_window_slot: int = 3600 * 24 * 2
    #: RocketMQ 5.3: serve RECALL_MESSAGE (and the gRPC RecallMessage); off by default, as in RocketMQ, when a recall
    #: answers NO_PERMISSION "recall failed, operation is forbidden"...
    recall_message_enable: bool = False
    #: RocketMQ 5: DELETE_TOPIC_IN_BROKER also deletes the pop retry topic ``%RETRY%<group>_<topic>`` of every group
    #: with an offset on the topic, so a topic created again under the name gets none of the old messages.
    clear_retry_topic_when_delete_topic: bool = True
    #: ...and whether a recall is still served while ``brokerPermission`` has no write bit.
    allow_recall_when_broker_not_writeable: bool = True
    #: Slots in the on-disk timer wheel (RocketMQ 5.3's fixed ``TIMER_WHEEL_TTL_DAY`` x 86,400 whatever the
    #: precision; a setting of ours, so tests can use a small wheel; its span is slots x precision, later timers are
    #: rolled on). A wheel of another shape is migrated at a clean start.
    timer_wheel_slots: int = 7 * 24 * 3600
    #: The timer log's segment size, RocketMQ 5.3.3's MessageStoreConfig ``mappedFileSizeTimerLog``, as its default
    #: (100 MiB). Ours: one that is not a multiple of the 32-byte entry fails the start.
    mapped_file_size_timer_log: int = TIMER_LOG_FILE_SIZE
    #: The business pools' workers and queue capacities (common/.../BrokerConfig.java; the controller sizes its
    #: pools with them, docs/protocol.md#714-processor-pools-and-flow-control). The admin and consumer-manage queues
    #: are unbounded, as 4.9.8's ``Executors.newFixedThreadPool``.
    send_message_thread_pool_nums: int = min(available_cpus(), 4)
    pull_message_thread_pool_nums: int = 16 + 2 * available_cpus()
    query_message_thread_pool_nums: int = 8 + available_cpus()
    process_reply_message_thread_pool_nums: int = 16 + 2 * available_cpus()
    admin_broker_thread_pool_nums: int = 16
    client_manage_thread_pool_nums: int = 32
    consumer_manage_thread_pool_nums: int = 32
    heartbeat_thread_pool_nums: int = min(32, available_cpus())
    end_transaction_thread_pool_nums: int = max(8 + 2 * available_cpus(), 4 * min(available_cpus(), 4))
    #: RocketMQ 5's ack executor (ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME).
    ack_message_thread_pool_nums: int = 16
    send_thread_pool_queue_capacity: int = 10_000
    pull_thread_pool_queue_capacity: int = 100_000
    query_thread_pool_queue_capacity: int = 20_000
    reply_thread_pool_queue_capacity: int = 10_000
    client_manager_thread_pool_queue_capacity: int = 1_000_000
    heartbeat_thread_pool_queue_capacity: int = 50_000
    end_transaction_pool_queue_capacity: int = 100_000
    admin_thread_pool_queue_capacity: int = 100_000
    ack_thread_pool_queue_capacity: int = 100_000
    #: Broker fast failure (common/.../BrokerConfig.java; broker/.../latency/BrokerFastFailure.java): a request that
    #: waited in the send, pull, heartbeat, end-transaction or ack pool's queue this many ms or longer is answered
    #: SYSTEM_BUSY ``[TIMEOUT_CLEAN_QUEUE]...`` instead of being processed (a oneway one is dropped). All six apply
    #: to a running broker at once when UPDATE_BROKER_CONFIG changes them, as Java's sweep reads them every 10 ms.
    broker_fast_failure_enable: bool = True
    wait_time_mills_in_send_queue: int = attrs.field(default=200, metadata=JAVA_LONG)
    wait_time_mills_in_pull_queue: int = attrs.field(default=5000, metadata=JAVA_LONG)
    wait_time_mills_in_heartbeat_queue: int = attrs.field(default=31_000, metadata=JAVA_LONG)
    wait_time_mills_in_transaction_queue: int = attrs.field(default=3000, metadata=JAVA_LONG)
    wait_time_mills_in_ack_queue: int = attrs.field(default=3000, metadata=JAVA_LONG)  # RocketMQ 5's ack pool
    #: MessageStoreConfig's: an append that held the store's put lock longer than this (ms) makes the store
    #: page-cache busy (store/message_store.py): sends are answered SYSTEM_BUSY ``[REJECTREQUEST]``, and with fast
    #: failure on the queued ones ``[PCBUSY_CLEAN_QUEUE]``. Live: UPDATE_BROKER_CONFIG applies it to the next append.
    os_page_cache_busy_time_out_mills: int = attrs.field(default=1000, metadata=JAVA_LONG)
    #: Transactions (docs/protocol.md#78-transactions): a half message is checked once older than this (ms, since its
    #: born time)...
    transaction_time_out: int = attrs.field(default=6000, metadata=JAVA_LONG)
    #: ...at most this many times, then discarded to TRANS_CHECK_MAX_TIME_TOPIC...
    transaction_check_max: int = 15
    #: ...in check rounds this far apart (ms).
    transaction_check_interval: int = attrs.field(default=60_000, metadata=JAVA_LONG)
    #: Replication (RocketMQ's MessageStoreConfig names and defaults; docs/architecture.md#replication). A slave
    #: reports its offset and a master heartbeats after this long idle (ms)...
    ha_send_heartbeat_interval: int = 5000
    #: ...an HA connection silent this long (ms) is closed...
    ha_housekeeping_interval: int = 20_000
    #: ...a transfer frame carries at most this many CommitLog bytes...
    ha_transfer_batch_size: int = 32 * 1024
    #: ...and a SYNC_MASTER answers SLAVE_NOT_AVAILABLE while its fastest slave is this many bytes behind.
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024
    #: RocketMQ 5: a slave this many bytes behind or more shows as not in sync (``mqadmin haStatus``).
    ha_max_gap_not_in_sync: int = 256 * 1024 * 1024
    #: A slave's static master HA address (``host:port``); empty: learned from the name-server registration.
    ha_master_address: str = ""
    #: SYNC_MASTER: ms a send waits for a slave's acknowledgement before FLUSH_SLAVE_TIMEOUT.
    slave_timeout: int = 3000
    #: Data more than this percentage of RAM behind the CommitLog head is "not in memory": pulls then suggest
    #: ``whichBrokerWhenConsumeSlowly`` (with ``slaveReadEnable``) and read smaller batches.
    access_message_in_memory_max_ratio: int = 40
    #: Protect the broker from consumers reading far behind (common/.../BrokerConfig.java; BrokerController
    #: .protectBroker, every 3 minutes): a group whose last pull of a queue was more than
    #: ``consumerFallbehindThreshold`` CommitLog bytes behind the head gets ``consumeEnable`` false.
    disable_consume_if_consumer_read_slowly: bool = False
    consumer_fallbehind_threshold: int = attrs.field(default=16 << 30, metadata=JAVA_LONG)
    #: Epoch ms before which every send, batch send and reply answers SYSTEM_ERROR "broker unable to service, until
    #: ..." (common/.../BrokerConfig.java, checked by SendMessageProcessor.preSend); 0: sends are served at once.
    start_accept_send_request_time_stamp: int = attrs.field(default=0, metadata=JAVA_LONG)
    #: Request-reply (processors/reply.py): store replies besides pushing them to the requester.
    store_reply_message_enable: bool = True
    #: RocketMQ 5's metrics settings (docs/metrics.md): ``PROM`` (or 2) serves Prometheus text at
    #: ``http://<metricsPromExporterHost, default brokerIP1>:<metricsPromExporterPort>/metrics``; ``DISABLE`` (or 0)
    #: serves nothing and times no request; ``OTLP_GRPC`` and ``LOG`` are not supported (logged, nothing exported).
    metrics_exporter_type: str = "DISABLE"
    metrics_prom_exporter_host: str = ""
    metrics_prom_exporter_port: int = attrs.field(default=5557, metadata=PORT)
    #: Extra labels on every metric: ``key1:value1,key2:value2``.
    metrics_label: str = ""
    #: Label sets kept per metric; more go to one ``otel_metric_overflow="true"`` series (RocketMQ 5.3's setting).
    metrics_otel_cardinality_limit: int = 50_000
    #: Every broker series labelled ``aggregation="delta"`` (over a ``metricsLabel`` pair of that name), as RocketMQ
    #: 5.3.3's BrokerMetricsManager ``init``; ``/metrics`` values stay cumulative, as 5.3.3's Prometheus exporter
    #: serves them (only its OTLP exporter switches to delta temporality).
    metrics_in_delta: bool = False
    #: ACL 1.0 (docs/architecture.md#acl-and-tls-at-the-edge): every request is checked against the plain_acl.yml
    #: accounts before it reaches a pool.
    acl_enable: bool = False
    #: The broker's own client (registration, a slave's sync from its master) talks TLS: NettyClientConfig's setting,
    #: which BrokerStartup reads from broker.conf too. None (not set): ``tls.enable``, else whether
    #: ``tls.server.mode`` is enforcing (BrokerStartup's default, applied before the file, so an explicit
    #: ``useTLS=false`` is plaintext even then); the broker shows the value it uses. Read at start.
    use_tls: bool | None = attrs.field(default=None, metadata={"key": "useTLS"})
    #: The same client's other NettyClientConfig settings (remoting/src/main/java/org/apache/rocketmq/remoting/netty/
    #: NettyRemotingClient.java): the connect timeout (ms; read at start), the idle time (s; 0 or less: never) after
    #: which a connection is closed (UPDATE_BROKER_CONFIG: for the connections opened after it), and whether a request
    #: that timed out closes its connection (UPDATE_BROKER_CONFIG: from the next timeout on).
    connect_timeout_millis: int = 3000
    client_channel_max_idle_time_seconds: int = 120
    client_close_socket_if_timeout: bool = True
    #: ``;``-separated keys UPDATE_BROKER_CONFIG refuses with NO_PERMISSION, besides the fixed ``configBlackList``,
    #: ``brokerConfigPath`` and ``rocketmqHome`` (read at start; changed only by a restart, as Java's).
    config_black_list: str = "configBlackList;brokerConfigPath"
    #: RocketMQ's home directory: the ACL files are ``conf/plain_acl.yml`` and ``conf/acl/**.yml`` under it (Java reads
    #: ``rocketmq.home.dir`` or the ``ROCKETMQ_HOME`` environment variable).
    rocketmq_home: str = attrs.field(factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    #: The default ACL file, relative to rocketmqHome (Java's system property of that name).
    acl_plain_file: str = attrs.field(default="conf/plain_acl.yml", metadata={"key": "rocketmq.acl.plain.file"})
    #: MessageStoreConfig's: true makes RocketMQ 4.9.8 hold dispatch back at the CommitLog's confirm offset, which only
    #: a plugin store sets (in DLedger mode the committed end, which dispatch never passes anyway). Accepted and shown;
    #: true is not applied (``mqbroker`` says so).
    duplication_enable: bool = False
    #: DLedger mode (docs/architecture.md#dledger): the CommitLog is a Raft log replicated across ``dLegerPeers``
    #: (``n0-127.0.0.1:40911;n1-...``, DLedger's own port per member); this member is ``dLegerSelfId``. The leader
    #: registers as brokerId 0, a follower as its id's number + 1 (DLedgerRoleChangeHandler).
    enable_dleger_commit_log: bool = attrs.field(default=False, metadata={"key": "enableDLegerCommitLog"})
    dleger_group: str = attrs.field(default="", metadata={"key": "dLegerGroup"})
    dleger_peers: str = attrs.field(default="", metadata={"key": "dLegerPeers"})
    dleger_self_id: str = attrs.field(default="", metadata={"key": "dLegerSelfId"})
    #: The entry data directory; empty: ``<storePathRootDir>/dledger-<dLegerSelfId>/data``.
    store_path_dledger_commit_log: str = attrs.field(default="", metadata={"key": "storePathDLedgerCommitLog"})
    #: ``;``-separated member ids the leader hands leadership to when they are live and caught up.
    preferred_leader_id: str = ""
    #: DLedger's timings (DLedgerConfig's names and defaults): heartbeats, votes, the quorum wait.
    heart_beat_time_interval_ms: int = 2000
    max_heart_beat_leak: int = 3
    min_vote_interval_ms: int = 300
    max_vote_interval_ms: int = 1000
    max_wait_ack_time_ms: int = 2500
    #: Push several entries per DLedger PUSH (RocketMQ's MessageStoreConfig setting; off by default as there): sends
    #: that arrive while a push is unanswered are replicated in the next request, up to DLedger's 4 KiB
    #: ``maxBatchPushSize`` (docs/architecture.md#dledger).
    enable_batch_push: bool = False
    #: RocketMQ 4.9.8 keys without effect here, with Java's defaults (common/.../BrokerConfig.java,
    #: store/.../config/MessageStoreConfig.java, remoting/.../netty/NettyServerConfig.java and NettyClientConfig.java;
    #: NettyServerConfig's others come from ListenerSettings): those Java takes and never reads (``maxDelayTime``,
    #: ``commercial*``...), and those it reads for a mechanism this broker does not have (docs/architecture.md#settings
    #: says why, key by key). Shown by GET_BROKER_CONFIG and ``-p``, kept and written back by UPDATE_BROKER_CONFIG, as
    #: Java's Configuration holds every field of those objects (common/src/main/java/org/apache/rocketmq/common/
    #: Configuration.java).
    server_worker_threads: int = 8
    client_worker_threads: int = 4
    client_callback_executor_threads: int = available_cpus()
    client_oneway_semaphore_value: int = 65535
    client_async_semaphore_value: int = 65535
    client_socket_snd_buf_size: int = 0
    client_socket_rcv_buf_size: int = 0
    client_pooled_byte_buf_allocator_enable: bool = False
    transient_store_pool_enable: bool = False
    transient_store_pool_size: int = 5
    commit_interval_commit_log: int = 200
    commit_commit_log_least_pages: int = 4
    commit_commit_log_thorough_interval: int = 200
    fast_fail_if_no_buffer_in_store_pool: bool = False
    enable_consume_queue_ext: bool = False
    mapped_file_size_consume_queue_ext: int = 48 * 1024 * 1024
    bit_map_length_consume_queue_ext: int = 64
    enable_calc_filter_bit_map: bool = False
    expect_consumer_num_use_filter: int = 32
    max_error_rate_of_bloom_filter: int = 20
    filter_data_clean_time_span: int = attrs.field(default=24 * 3600 * 1000, metadata=JAVA_LONG)
    enable_schedule_async_deliver: bool = False
    schedule_async_deliver_max_pending_limit: int = 2000
    schedule_async_deliver_max_resend_num2_blocked: int = 3
    put_message_future_thread_pool_nums: int = min(available_cpus(), 4)
    put_thread_pool_queue_capacity: int = 10_000
    transfer_msg_by_heap: bool = True
    use_reentrant_lock_when_put_message: bool = True
    message_store_plug_in: str = ""
    fetch_namesrv_addr_by_address_server: bool = False
    enable_detail_stat: bool = True
    auto_delete_unused_stats: bool = False
    enable_schedule_message_stats: bool = True
    disk_fall_recorded: bool = True
    isolate_log_enable: bool = False
    debug_lock_enable: bool = False
    message_index_safe: bool = False
    redelete_hanged_file_interval: int = 120_000
    flush_least_pages_when_warm_maped_file: int = 1024 // 4 * 16
    max_delay_time: int = 40
    flush_consumer_offset_history_interval: int = 60_000
    high_speed_mode: bool = False
    filter_server_nums: int = 0
    put_msg_index_hight_water: int = 600_000
    consumer_manager_thread_pool_queue_capacity: int = 1_000_000
    commercial_enable: bool = True
    commercial_timer_count: int = 1
    commercial_trans_count: int = 1
    commercial_big_count: int = 1
    commercial_base_count: int = 1
    channel_not_active_interval: int = attrs.field(default=60_000, metadata=JAVA_LONG)

    @property
    def broker_addr(self) -> str:
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def ha_server_addr(self) -> str:
        host = self.broker_ip2 or self.broker_ip1
        return f"{host}:{self.ha_listen_port or self.listen_port + 1}"

    @property
    def ha_bind_port(self) -> int:
        """The port the HA listener binds: ``haListenPort``, else ``listenPort + 1``, else (port 0) any free one."""
        if self.ha_listen_port:
            return self.ha_listen_port
        return self.listen_port + 1 if self.listen_port else 0

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]


BROKER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")


class SlaveIdError(ValueError):
    """A slave's ``brokerId`` is 0 or less: BrokerStartup refuses the start (``System.exit(-3)``)."""


def checked_roles(config: BrokerConfig) -> BrokerConfig:
    """RocketMQ's start-up rules for roles (``BrokerStartup``): ``brokerRole`` one of :data:`BROKER_ROLES`, a master's
    ``brokerId`` forced to 0, a slave's required above 0. Raises ``ValueError`` (:class:`SlaveIdError` for the id)."""
    if config.broker_role not in BROKER_ROLES:
        raise ValueError(f"brokerRole: expected one of {', '.join(BROKER_ROLES)}, got {config.broker_role!r}")
    if config.broker_role == "SLAVE":
        if config.broker_id <= 0:
            raise SlaveIdError("Slave's brokerId must be > 0")
        return config
    return config if config.broker_id == 0 else attrs.evolve(config, broker_id=0)


#: The settings whose RocketMQ 4.9.8 default is null, which ours holds as ``""``: BrokerConfig's ``rocketmqHome`` and
#: ``namesrvAddr`` (from the environment, null without it) and MessageStoreConfig's paths and DLedger names
#: (store/src/main/java/org/apache/rocketmq/store/config/MessageStoreConfig.java). Neither GET_BROKER_CONFIG
#: nor a rewrite of a removed ``-c`` file holds them while empty, as ``MixAll.object2Properties`` skips a null field
#: (:func:`without_java_nulls`).
NULL_WHEN_EMPTY: Final = frozenset({
    "rocketmqHome", "namesrvAddr", "storePathCommitLog", "storePathDLedgerCommitLog", "readOnlyCommitLogStorePaths",
    "haMasterAddress", "dLegerGroup", "dLegerPeers", "dLegerSelfId", "preferredLeaderId",
})  # fmt: skip


def without_java_nulls(texts: dict[str, str]) -> dict[str, str]:
    """``texts`` without the :data:`NULL_WHEN_EMPTY` settings that are empty (Java's null). Ours: one set to ``""``
    explicitly is left out too, where Java shows ``key=``."""
    return {key: text for key, text in texts.items() if text or key not in NULL_WHEN_EMPTY}


#: What ``mqbroker -m`` prints: the settings RocketMQ 4.9.8 marks ``@ImportantField`` (common/.../BrokerConfig.java,
#: store/.../config/MessageStoreConfig.java) that this broker has.
IMPORTANT_PROPERTIES: Final = frozenset({
    "namesrvAddr", "brokerIP1", "brokerName", "brokerClusterName", "brokerId", "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup", "msgTraceTopicName", "traceTopicEnable", "rejectTransactionMessage",
    "fetchNamesrvAddrByAddressServer", "transactionTimeOut", "transactionCheckMax", "transactionCheckInterval",
    "aclEnable", "storePathRootDir", "storePathCommitLog", "storePathDLedgerCommitLog", "flushIntervalCommitLog",
    "commitIntervalCommitLog", "flushCommitLogTimed", "deleteWhen", "fileReservedTime",
    "maxTransferBytesOnMessageInMemory", "maxTransferCountOnMessageInMemory", "maxTransferBytesOnMessageInDisk",
    "maxTransferCountOnMessageInDisk", "accessMessageInMemoryMaxRatio", "messageIndexEnable", "messageIndexSafe",
    "haMasterAddress", "brokerRole", "flushDiskType", "cleanFileForciblyEnable", "transientStorePoolEnable",
})  # fmt: skip


#: The order ``mqbroker -p``/``-m`` print settings in: RocketMQ 4.9.8's BrokerStartup prints BrokerConfig, then
#: NettyServerConfig, NettyClientConfig and MessageStoreConfig, each field in its class's declaration order
#: (MixAll.printObjectProperties walks ``getDeclaredFields``; broker/src/main/java/org/apache/rocketmq/broker/
#: BrokerStartup.java). NettyClientConfig's write-buffer marks, NettyServerConfig's too, are printed once here;
#: MessageStoreConfig's field ``isEnableBatchPush`` is printed under its key ``enableBatchPush``.
JAVA_PRINT_ORDER: Final = (
    "rocketmqHome", "namesrvAddr", "brokerIP1", "brokerIP2", "brokerName", "brokerClusterName", "brokerId",
    "brokerPermission", "defaultTopicQueueNums", "autoCreateTopicEnable", "clusterTopicEnable", "brokerTopicEnable",
    "autoCreateSubscriptionGroup", "messageStorePlugIn", "msgTraceTopicName", "traceTopicEnable",
    "sendMessageThreadPoolNums", "putMessageFutureThreadPoolNums", "pullMessageThreadPoolNums",
    "processReplyMessageThreadPoolNums", "queryMessageThreadPoolNums", "adminBrokerThreadPoolNums",
    "clientManageThreadPoolNums", "consumerManageThreadPoolNums", "heartbeatThreadPoolNums",
    "endTransactionThreadPoolNums", "flushConsumerOffsetInterval", "flushConsumerOffsetHistoryInterval",
    "rejectTransactionMessage", "fetchNamesrvAddrByAddressServer", "sendThreadPoolQueueCapacity",
    "putThreadPoolQueueCapacity", "pullThreadPoolQueueCapacity", "replyThreadPoolQueueCapacity",
    "queryThreadPoolQueueCapacity", "clientManagerThreadPoolQueueCapacity",
    "consumerManagerThreadPoolQueueCapacity", "heartbeatThreadPoolQueueCapacity", "endTransactionPoolQueueCapacity",
    "filterServerNums", "longPollingEnable", "shortPollingTimeMills", "notifyConsumerIdsChangedEnable",
    "highSpeedMode", "commercialEnable", "commercialTimerCount", "commercialTransCount", "commercialBigCount",
    "commercialBaseCount", "transferMsgByHeap", "maxDelayTime", "regionId", "registerBrokerTimeoutMills",
    "slaveReadEnable", "disableConsumeIfConsumerReadSlowly", "consumerFallbehindThreshold",
    "brokerFastFailureEnable", "waitTimeMillsInSendQueue", "waitTimeMillsInPullQueue",
    "waitTimeMillsInHeartbeatQueue", "waitTimeMillsInTransactionQueue", "startAcceptSendRequestTimeStamp",
    "traceOn", "enableCalcFilterBitMap", "expectConsumerNumUseFilter", "maxErrorRateOfBloomFilter",
    "filterDataCleanTimeSpan", "filterSupportRetry", "enablePropertyFilter", "compressedRegister", "forceRegister",
    "registerNameServerPeriod", "transactionTimeOut", "transactionCheckMax", "transactionCheckInterval",
    "aclEnable", "storeReplyMessageEnable", "enableDetailStat", "autoDeleteUnusedStats", "isolateLogEnable",
    "configBlackList", "listenPort", "serverWorkerThreads", "serverCallbackExecutorThreads",
    "serverSelectorThreads", "serverOnewaySemaphoreValue", "serverAsyncSemaphoreValue",
    "serverChannelMaxIdleTimeSeconds", "serverSocketSndBufSize", "serverSocketRcvBufSize",
    "writeBufferHighWaterMark", "writeBufferLowWaterMark", "serverSocketBacklog",
    "serverPooledByteBufAllocatorEnable", "useEpollNativeSelector", "clientWorkerThreads",
    "clientCallbackExecutorThreads", "clientOnewaySemaphoreValue", "clientAsyncSemaphoreValue",
    "connectTimeoutMillis", "channelNotActiveInterval", "clientChannelMaxIdleTimeSeconds", "clientSocketSndBufSize",
    "clientSocketRcvBufSize", "clientPooledByteBufAllocatorEnable", "clientCloseSocketIfTimeout", "useTLS",
    "storePathRootDir", "storePathCommitLog", "storePathDLedgerCommitLog", "readOnlyCommitLogStorePaths",
    "mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "enableConsumeQueueExt",
    "mappedFileSizeConsumeQueueExt", "bitMapLengthConsumeQueueExt", "flushIntervalCommitLog",
    "commitIntervalCommitLog", "useReentrantLockWhenPutMessage", "flushCommitLogTimed", "flushIntervalConsumeQueue",
    "cleanResourceInterval", "deleteCommitLogFilesInterval", "deleteConsumeQueueFilesInterval",
    "destroyMapedFileIntervalForcibly", "redeleteHangedFileInterval", "deleteWhen", "diskMaxUsedSpaceRatio",
    "fileReservedTime", "putMsgIndexHightWater", "maxMessageSize", "checkCRCOnRecover", "flushCommitLogLeastPages",
    "commitCommitLogLeastPages", "flushLeastPagesWhenWarmMapedFile", "flushConsumeQueueLeastPages",
    "flushCommitLogThoroughInterval", "commitCommitLogThoroughInterval", "flushConsumeQueueThoroughInterval",
    "maxTransferBytesOnMessageInMemory", "maxTransferCountOnMessageInMemory", "maxTransferBytesOnMessageInDisk",
    "maxTransferCountOnMessageInDisk", "accessMessageInMemoryMaxRatio", "messageIndexEnable", "maxHashSlotNum",
    "maxIndexNum", "maxMsgsNumBatch", "messageIndexSafe", "haListenPort", "haSendHeartbeatInterval",
    "haHousekeepingInterval", "haTransferBatchSize", "haMasterAddress", "haSlaveFallbehindMax", "brokerRole",
    "flushDiskType", "syncFlushTimeout", "slaveTimeout", "messageDelayLevel", "flushDelayOffsetInterval",
    "cleanFileForciblyEnable", "warmMapedFileEnable", "offsetCheckInSlave", "debugLockEnable", "duplicationEnable",
    "diskFallRecorded", "osPageCacheBusyTimeOutMills", "defaultQueryMaxNum", "transientStorePoolEnable",
    "transientStorePoolSize", "fastFailIfNoBufferInStorePool", "enableDLegerCommitLog", "dLegerGroup",
    "dLegerPeers", "dLegerSelfId", "preferredLeaderId", "enableBatchPush", "enableScheduleMessageStats",
    "enableLmq", "enableMultiDispatch", "maxLmqConsumeQueueNum", "enableScheduleAsyncDeliver",
    "scheduleAsyncDeliverMaxPendingLimit", "scheduleAsyncDeliverMaxResendNum2Blocked",
)  # fmt: skip


def load_broker_config(path: str | Path | None = None, **overrides: object) -> tuple[BrokerConfig, list[str]]:
    """The broker's settings from the properties file ``path`` (if any), then ``overrides`` (snake_case field
    names); returns them and the file's unknown keys."""
    props = {} if path is None else parse_properties(decode_properties_file(Path(path).read_bytes()))
    return config_from_properties(BrokerConfig, props, **overrides)


def properties_without_setting(path: Path) -> dict[str, str]:
    """The keys of the properties file at ``path`` that no setting has, with their text (none when it is missing):
    Java's Configuration holds them all (``registerConfig``, common/src/main/java/org/apache/rocketmq/common/
    Configuration.java), as :attr:`broker.context.BrokerState.file_only_properties` does."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    settings = {property_name(field) for field in attrs.fields(BrokerConfig)}
    return {key: text for key, text in parse_properties(decode_properties_file(raw)).items() if key not in settings}
