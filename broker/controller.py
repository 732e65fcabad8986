"""``BrokerController``: one broker assembled in one nursery tree (docs/architecture.md#layers).

Usage::

    controller = BrokerController(config)
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(controller.serve)   # port 0 works: the real port is registered
        ...
        nursery.cancel_scope.cancel()                         # shutdown

:meth:`BrokerController.serve` loads the store (recovery runs in a worker thread) and the managers, starts the store
services, the manager persisters, the client registry's housekeeping, the hold service, the remoting server (whose
close listener tells the client registry) and the name-server registration, then reports the broker address
(``brokerIP1`` and the bound port). Cancellation shuts down in two steps: first the front (listeners, pools, hold
service, registration, which unregisters from every name server), then the back (the store flushes, checkpoints and
unmaps; each manager saves its file one last time), so no request runs against a closing store.

Request routing follows the table of docs/protocol.md#21-requests-rocketrio-serves: each code goes to its processor on
the pool Java uses for it (docs/protocol.md#714-processor-pools-and-flow-control); unknown codes answer
REQUEST_CODE_NOT_SUPPORTED.

The modules of the features RocketMQ's defaults leave off (the ACL rules, DLedger, ``/metrics``) are imported where
their setting turns them on, so an idle default broker does not carry them (docs/architecture.md#layers).

Errors before ``task_status.started``: ``OSError`` when the port cannot be bound or the store directory is unusable,
:class:`~store.errors.StoreError` subclasses (a store locked by another process, corrupt config files).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from broker.acl.processor import REQUEST_CODES as ACL_CODES
from broker.acl.processor import AclAdminProcessor
from broker.broker_config import BrokerConfig, checked_roles, properties_without_setting
from broker.context import BrokerState, build_context, config_dir_of, dledger_store_of, load_managers
from broker.pop import PopService
from broker.pop.assignment import QueryAssignmentProcessor
from broker.pop.processor import AckMessageProcessor, PopMessageProcessor
from broker.pop.revive import ReviveService
from broker.protection import BrokerProtection
from broker.registration import BrokerRegistration
from broker.replication import ReplicationRole
from broker.role_services import RoleServices
from broker.schedule import ScheduleMessageService
from broker.security import (
    acl_admission_of,
    acl_manager_of,
    client_idle_timeout,
    client_use_tls,
    namesrv_client_context,
    server_config_of,
)
from broker.slave_sync import SlaveSynchronize
from broker.timer.checkpoint_sync import TimerCheckpointProcessor
from broker.timer.runtime_info import RuntimeInfoProcessor
from broker.timer.service import TimerMessageService
from broker.transaction import TransactionalMessageBridge, TransactionCheckService
from processors.admin import REQUEST_CODES as ADMIN_CODES
from processors.admin import AdminBrokerProcessor
from processors.client_manage import ClientManageProcessor
from processors.consume_ops import ConsumeOpsProcessor
from processors.end_transaction import EndTransactionProcessor
from processors.ha_status import HAStatusProcessor
from processors.hold import HoldService
from processors.locks import LockBatchProcessor
from processors.offsets import ConsumerOffsetProcessor
from processors.pull import PullMessageProcessor
from processors.put_future import PutFutureService
from processors.query import QueryMessageProcessor
from processors.recall import RecallMessageProcessor
from processors.reply import ReplyMessageProcessor
from processors.send import SendMessageProcessor
from processors.send_back import ConsumerSendMsgBackProcessor
from processors.stats import StatsProcessor
from processors.store_ops import StoreOpsProcessor
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.topics import SCHEDULE_TOPIC, TIMER_TOPIC
from remoting.connection import Address, Connection
from remoting.dispatch import Dispatcher, ProcessorPool, Reject, broker_pools, not_supported_remark
from remoting.errors import RemotingConnectError
from remoting.processor import RequestContext
from remoting.rpc_metrics import RpcLatency, prometheus_wanted
from remoting.server import RemotingServer, idle_timeout_of
from remoting.tls import tls_properties_in
from store.results import AppendResult
from store.services import check_period

if TYPE_CHECKING:
    from broker.metrics.snapshot import PopGauges
    from dledger.commitlog_store import DLedgerMessageStore
    from remoting.prometheus import PrometheusExporter

log = logging.getLogger(__name__)


#: What Java's fast port leaves to its default processor, which answers REQUEST_CODE_NOT_SUPPORTED: the codes of the
#: pull executor (4.9.8 and 5.3.3's BrokerController.registerProcessor register them on the main port only).
FAST_PORT_REFUSED = frozenset({
    RequestCode.PULL_MESSAGE, RequestCode.POP_MESSAGE, RequestCode.PEEK_MESSAGE, RequestCode.NOTIFICATION,
    RequestCode.POLLING_INFO,
})  # fmt: skip


class FastChannelDispatcher(Dispatcher):
    """The VIP channel's dispatcher: the main dispatcher's table and pools, except that :data:`FAST_PORT_REFUSED` is
    refused with REQUEST_CODE_NOT_SUPPORTED, as on Java's fast port, once ACL admitted it (its RPC hooks run before
    the default processor that refuses it: remoting/.../netty/NettyRemotingAbstract.java processRequestCommand). The
    main server runs the pools, so this one reports running."""

    def __init__(self, main: Dispatcher) -> None:
        super().__init__()
        self._main = main

    @property
    def running(self) -> bool:
        return True

    @property
    def has_fast_paths(self) -> bool:
        return self._main.has_fast_paths

    def fast_request(self, ctx: RequestContext, fields: dict[str, Any], body: bytes) -> bool:
        return fields.get("code") not in FAST_PORT_REFUSED and self._main.fast_request(ctx, fields, body)

    async def dispatch(self, ctx: RequestContext, request: RemotingCommand) -> None:
        if request.code not in FAST_PORT_REFUSED:
            await self._main.dispatch(ctx, request)
            return
        admission = self._main.admission
        answer = None if admission is None else admission(ctx, request)
        if answer is None:
            answer = request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, not_supported_remark(request.code))
        if request.is_oneway:
            ctx.connection.oneway_done(request, answer)
            return
        with contextlib.suppress(RemotingConnectError):
            await ctx.connection.send(answer)


class BrokerController:
    """Owns a broker's context, pools, dispatcher, server and registration. See the module docstring."""

    def __init__(self, config: BrokerConfig, *, config_path: Path | None = None) -> None:
        # useTLS as the client uses it, so GET_BROKER_CONFIG shows it: Java's Configuration holds the NettyClientConfig
        # BrokerStartup set it on (broker/src/main/java/org/apache/rocketmq/broker/BrokerController.java).
        config = attrs.evolve(checked_roles(config), use_tls=client_use_tls(config))
        self.config = config
        self.context: BrokerState = build_context(config)
        self.context.config_path = config_path
        if config_path is not None:  # BrokerStartup: registerConfig(properties), the -c file's keys
            self.context.file_only_properties = properties_without_setting(config_path)
            self.context.file_tls_properties = tls_properties_in(config_path)
        self.pools: dict[str, ProcessorPool] = broker_pools(sizes=pool_sizes(config))
        self._page_cache_busy = self.context.store.is_os_page_cache_busy
        apply_fast_failure(self.pools, config, self._page_cache_busy)
        self.context.config_changed_hook = self._config_changed
        # Java's hold service re-checks held queues every 5 s (1 s with short polling) as a safety net behind the
        # arrival listener.
        check = 5.0 if config.long_polling_enable else config.short_polling_time_mills / 1000
        self.hold = HoldService(check_interval=check, max_offset_of=self.context.store.max_offset_in_queue)
        self.context.hold = self.hold
        self.put_futures = PutFutureService()
        if config.broker_role != "SLAVE" and not config.enable_dleger_commit_log:
            # DefaultMessageStore.start starts the schedule
            check_period("flushDelayOffsetInterval", config.flush_delay_offset_interval)
        check_period("cleanResourceInterval", config.clean_resource_interval)  # then its addScheduleTask, on every role
        self.schedule = ScheduleMessageService(
            self.context.store,
            config_dir_of(config),
            flush_interval=config.flush_delay_offset_interval / 1000,
        )
        self.schedule.on_delivered = self._count_schedule_delivery
        self.timer = TimerMessageService(
            self.context.store,
            config_dir_of(config),
            precision_ms=config.timer_precision_ms,
            wheel_slots=config.timer_wheel_slots,
            roll_window_slot=config.timer_roll_window_slot,
            log_file_size=config.mapped_file_size_timer_log,
            max_delay_sec=lambda: self.context.config.timer_max_delay_sec,  # updateBrokerConfig applies at once
            congest_num_each_slot=lambda: self.context.config.timer_congest_num_each_slot,
            stop_enqueue=lambda: self.context.config.timer_stop_enqueue,
            stop_dequeue=lambda: self.context.config.timer_stop_dequeue,
            retry_until_success=lambda: self.context.config.timer_enable_retry_until_success,
            flush_interval=lambda: self.context.config.timer_flush_interval_ms / 1000,  # updateBrokerConfig: at once
            enabled=lambda: self.context.config.timer_wheel_enable,
            series_limit=config.metrics_otel_cardinality_limit,
        )
        self.timer.on_put = self.context.stats.record_timer_put
        self.transaction_bridge = TransactionalMessageBridge(
            self.context, delay_rewrite=self.schedule.rewrite, timer_rewrite=self.timer.rewrite
        )
        self.transaction_check = TransactionCheckService(self.context, self.transaction_bridge)
        self.role_services = RoleServices(self.context, self.schedule, self.timer, self.transaction_check)
        self.replication = ReplicationRole(self.context, None)
        self.acl = acl_manager_of(config)
        admission = acl_admission_of(self.acl)
        self.dispatcher = Dispatcher(admission, admission.admits_fields if admission is not None else None)
        self._register_processors()
        # Requests are timed for /metrics only when it is served (docs/metrics.md).
        wanted = prometheus_wanted(config.metrics_exporter_type)
        self.rpc_latency = RpcLatency(config.metrics_otel_cardinality_limit) if wanted else None
        self.metrics: PrometheusExporter | None = None
        if self.rpc_latency is not None:  # the exporter's modules only then: prometheus-client is ~3 MB idle
            from broker.metrics import broker_exporter

            self.metrics = broker_exporter(
                self.context, self.pools, self.rpc_latency, self.timer.gauges, self.pop_gauges
            )
        self.remoting_server = RemotingServer(self.dispatcher, server_config_of(config), self.rpc_latency)
        self.remoting_server.add_close_listener(self._on_connection_closed)
        self.fast_server = RemotingServer(
            FastChannelDispatcher(self.dispatcher), self.remoting_server.config, self.rpc_latency
        )
        self.fast_server.add_close_listener(self._on_connection_closed)
        self.fast_address: Address | None = None
        self.registration: BrokerRegistration | None = None
        self.address: Address | None = None
        #: the broker's one pop service and its revive loop (:meth:`pop_service`), and the nursery the remoting pop
        #: starts that loop in while the front runs
        self._pop: tuple[PopService, ReviveService] | None = None
        self._front_nursery: trio.Nursery | None = None

    def _config_changed(self, config: BrokerConfig) -> None:
        """UPDATE_BROKER_CONFIG: the pools' fast failure waits at once, and the idle time for the connections the main
        listener accepts from now on, as NettyRemotingServer's ``initChannel`` reads it for each new channel (the fast
        channel keeps its own: BrokerController gives that server a clone of NettyServerConfig); the broker's own
        client's idle time for its next connections and its close-on-timeout for every invocation."""
        apply_fast_failure(self.pools, config, self._page_cache_busy)
        idle = idle_timeout_of(config.server_channel_max_idle_time_seconds)
        self.remoting_server.config = attrs.evolve(self.remoting_server.config, idle_timeout=idle)
        if self.registration is not None:  # BrokerOuterAPI's NettyRemotingClient reads its NettyClientConfig likewise
            self.registration.client.idle_timeout = client_idle_timeout(config)
            self.registration.client.set_close_on_timeout(config.client_close_socket_if_timeout)

    @property
    def broker_addr(self) -> str:
        """``brokerIP1:port`` as registered (the real port once serving)."""
        return self.context.broker_addr

    def _register_processors(self) -> None:
        ctx, pools, register = self.context, self.pools, self.dispatcher.register
        send = SendMessageProcessor(
            ctx, delay_rewrite=self.schedule.rewrite, timer_rewrite=self.timer.rewrite, put_futures=self.put_futures
        )
        # SendMessageProcessor.rejectRequest: refused while the store is page-cache busy (sends and send-backs).
        busy = ctx.store.is_os_page_cache_busy
        register(
            (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE),
            send,
            pools["send"],
            reject=busy,
        )
        self.dispatcher.register_fast(RequestCode.SEND_MESSAGE_V2, send.fast, timed=True)
        register(
            ConsumerSendMsgBackProcessor.REQUEST_CODES,
            ConsumerSendMsgBackProcessor(ctx, self.schedule.rewrite),
            pools["send"],
            reject=busy,
        )
        register(RequestCode.PULL_MESSAGE, PullMessageProcessor(ctx, self.hold), pools["pull"])
        # 5.3.3's BrokerController: pops on the pull executor (a long-polling pop leaves its worker,
        # :class:`PopMessageProcessor`), acks and changes of invisibility on the ack executor.
        self.pop_processor = PopMessageProcessor(ctx, self.running_pop_service)
        register(PopMessageProcessor.REQUEST_CODES, self.pop_processor, pools["pull"])
        register(AckMessageProcessor.REQUEST_CODES, AckMessageProcessor(ctx, self.running_pop_service), pools["ack"])
        # 5.3.3 serves these on its load-balance executor (ours: the client-manage pool).
        self.assignment = QueryAssignmentProcessor(ctx)
        register(QueryAssignmentProcessor.REQUEST_CODES, self.assignment, pools["client_manage"])
        register(QueryMessageProcessor.CODES, QueryMessageProcessor(ctx), pools["query"])
        client_manage = ClientManageProcessor(ctx)
        register(RequestCode.HEART_BEAT, client_manage, pools["heartbeat"])
        register(
            (RequestCode.UNREGISTER_CLIENT, RequestCode.CHECK_CLIENT_CONFIG), client_manage, pools["client_manage"]
        )
        register(RequestCode.GET_CONSUMER_LIST_BY_GROUP, client_manage, pools["consumer_manage"])
        offsets = ConsumerOffsetProcessor(ctx)
        register(
            (RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.UPDATE_CONSUMER_OFFSET), offsets, pools["consumer_manage"]
        )
        # Java's AdminBrokerProcessor answers the queue-offset queries and the locks on the admin pool.
        register(
            (
                RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                RequestCode.GET_MAX_OFFSET,
                RequestCode.GET_MIN_OFFSET,
                RequestCode.GET_EARLIEST_MSG_STORETIME,
            ),
            offsets,
            pools["admin"],
        )
        register(LockBatchProcessor.REQUEST_CODES, LockBatchProcessor(ctx), pools["admin"])
        register(StatsProcessor.REQUEST_CODES, StatsProcessor(ctx), pools["admin"])
        register(HAStatusProcessor.REQUEST_CODES, HAStatusProcessor(ctx), pools["admin"])
        admin = AdminBrokerProcessor(ctx, pools)
        admin.on_topic_deleted = self.timer.forget_topic
        register(ADMIN_CODES, admin, pools["admin"])
        register(
            RequestCode.GET_BROKER_RUNTIME_INFO,
            RuntimeInfoProcessor(admin, self.schedule, self.timer),
            pools["admin"],
        )
        register(
            EndTransactionProcessor.REQUEST_CODES,
            EndTransactionProcessor(ctx, self.transaction_bridge),
            pools["end_transaction"],
        )
        register(ConsumeOpsProcessor.REQUEST_CODES, ConsumeOpsProcessor(ctx), pools["admin"])
        store_ops = StoreOpsProcessor(
            ctx, delay_offsets=self.schedule.confirmed_offsets, bridge=self.transaction_bridge
        )
        register(StoreOpsProcessor.REQUEST_CODES, store_ops, pools["admin"])
        register(RequestCode.GET_ALL_DELAY_OFFSET, store_ops, pools["admin"])
        register(TimerCheckpointProcessor.REQUEST_CODES, TimerCheckpointProcessor(self.timer), pools["admin"])
        reply = ReplyMessageProcessor(ctx, delay_rewrite=self.schedule.rewrite, timer_rewrite=self.timer.rewrite)
        register(ReplyMessageProcessor.REQUEST_CODES, reply, pools["reply"])
        register(RecallMessageProcessor.REQUEST_CODES, RecallMessageProcessor(ctx, self.timer.rewrite), pools["send"])
        register(ACL_CODES, AclAdminProcessor(self.acl, ctx), pools["admin"])

    def pop_gauges(self) -> PopGauges | None:
        """PopMetricsManager's gauges for ``/metrics``; ``None`` before the pop service exists."""
        if self._pop is None:
            return None
        from broker.metrics.snapshot import PopGauges  # loaded already: only the exporter calls this

        pop, revive = self._pop
        return PopGauges(*pop.buffer_sizes(), *revive.gauges())

    def pop_service(self) -> tuple[PopService, ReviveService]:
        """The broker's one :class:`PopService` and :class:`ReviveService`, built at the first call (once the store
        and managers are loaded; the broker's start makes that call for the revive loop). Its arrival listener is
        chained behind the store's when the first receive waits (:attr:`PopService.arrival_hook`), so long-polling
        pops wake on new messages and, until one waits, an append pays nothing for it. The gRPC front door
        (:func:`proxy.startup.build_activity`) and the remoting pop (:mod:`broker.pop.processor`) share them: one set
        of FIFO state, one revive loop."""
        if self._pop is not None:
            return self._pop
        ctx = self.context
        pop = PopService(ctx, self.timer.rewrite)

        def attach() -> None:
            previous = ctx.store.arrival_listener

            def on_arrival(topic: str, queue_id: int, offset: int, tags_code: int, properties: str = "") -> None:
                if previous is not None:
                    previous(topic, queue_id, offset, tags_code, properties)
                pop.notify_arrival(topic, queue_id, offset, tags_code, properties)

            ctx.store.arrival_listener = on_arrival
            interest = ctx.store.arrival_interest
            if interest is not None:  # None: every arrival is notified already

                def on_interest(topic: str, queue_id: int) -> bool:
                    return interest(topic, queue_id) or pop.waiting(topic, queue_id)

                ctx.store.arrival_interest = on_interest

        pop.arrival_hook = attach
        self._pop = pop, ReviveService(pop)
        return self._pop

    def running_pop_service(self) -> PopService:
        """:meth:`pop_service`'s pop service with its revive loop running (started in the front's nursery with the
        broker unless something runs it already): what a remoting pop, ack or change of invisibility acts on."""
        pop, revive = self.pop_service()
        if not revive.running and self._front_nursery is not None:
            with contextlib.suppress(RuntimeError):  # the front is shutting down
                self._front_nursery.start_soon(revive.run)
        return pop

    def _count_schedule_delivery(self, level: int, topic: str, queue_id: int, appended: AppendResult) -> None:
        """A delay level's message was delivered to ``topic``'s ``queue_id``: 4.9.8's ScheduleMessageService
        ``PutResultProcess.onSuccess`` (store/src/main/java/org/apache/rocketmq/store/schedule/
        ScheduleMessageService.java) counts it (SCHEDULE_CONSUMER's gets, the topic's put items, BROKER_PUT_NUMS)
        only with ``enableScheduleMessageStats``, read at each delivery; without it the put is in the store's totals
        alone."""
        ctx = self.context
        if ctx.config.enable_schedule_message_stats:
            ctx.stats.record_schedule_delivery(level - 1, appended.size)
            ctx.stats.record_delay_delivery(topic, queue_id, appended.queue_offset)
            ctx.stats.message_sizes.record_delivery(topic, appended.size)  # 5.3.3's ``messageSize.record``
        else:
            ctx.stats.record_uncounted_put(topic, queue_id, appended.queue_offset)

    def _on_connection_closed(self, connection: Connection) -> None:
        self.context.clients.connection_closed(connection)

    async def serve(self, *, task_status: trio.TaskStatus[Address] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the broker until cancelled; ``task_status.started`` gets ``(brokerIP1, bound port)``."""
        ctx = self.context
        store = ctx.store
        # load lets go of the store itself when it fails; a cancel waits for it and is raised in the try below.
        await trio.to_thread.run_sync(store.load)
        try:
            await trio.to_thread.run_sync(load_managers, ctx)
            await trio.to_thread.run_sync(self.assignment.modes.load)
            self.transaction_bridge.correct_progress()
            if self.acl is not None:
                await trio.to_thread.run_sync(self.acl.load)
        except BaseException:
            store.close()
            raise
        ctx.boot_timestamp = int(time.time() * 1000)
        store.arrival_listener = self.hold.notify_message_arriving
        store.arrival_interest = self.hold.waiting
        dledger = dledger_store_of(ctx)
        if dledger is not None:
            self._wake_services_on_commit(dledger)
        # Shutdown is ordered: the front (server, pools, hold, registration) stops first, so no request touches the
        # store while it flushes and unmaps; only then are the store and the manager persisters cancelled. The
        # shield keeps the outer cancellation away from them until the front is down.
        backend = trio.CancelScope(shield=True)
        async with trio.open_nursery() as outer:
            await outer.start(self._run_backend, backend)
            try:
                await self._run_front(task_status)
            finally:
                backend.cancel()

    async def _run_backend(
        self, scope: trio.CancelScope, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """The store services and the manager persisters (each saves once more when cancelled)."""
        ctx = self.context
        with scope:
            async with trio.open_nursery() as nursery:
                await nursery.start(ctx.store.run)
                await nursery.start(ctx.topics.run)
                await nursery.start(ctx.groups.run)
                await nursery.start(ctx.offsets.run)
                await nursery.start(ctx.half_messages.persister.run)
                await nursery.start(self.assignment.modes.persister.run)
                # The HA listener is bound now: advertise its real port (port 0 in tests picks a free one).
                ctx.config = attrs.evolve(ctx.config, ha_listen_port=ctx.store.ha.port)
                task_status.started()

    async def _run_front(self, task_status: trio.TaskStatus[Address]) -> None:
        """Client housekeeping, the hold service, the listeners and the registration, until cancelled."""
        ctx = self.context
        async with (
            # Closed on a sync call's timeout, as BrokerOuterAPI's NettyRemotingClient.invokeSync with
            # clientCloseSocketIfTimeout (true by default; remoting/.../netty/NettySystemConfig.java): a name server
            # or master connection gone silent is not used for every later registration and slave sync round.
            RemotingClient(
                connect_timeout=self.config.connect_timeout_millis / 1000,
                idle_timeout=client_idle_timeout(self.config),
                ssl_context=namesrv_client_context(self.config),
                close_on_timeout=self.config.client_close_socket_if_timeout,
            ) as client,
            trio.open_nursery() as nursery,
        ):
            await nursery.start(ctx.clients.run)
            await nursery.start(self.hold.run)
            await nursery.start(self.pop_processor.run)
            self._front_nursery = nursery
            # BrokerController.startBasicService starts PopReviveService with the broker (it revives on a master
            # only, :meth:`ReviveService.run`): what was popped before a restart comes again without a new pop.
            self.running_pop_service()
            await nursery.start(ctx.stats.run)
            await nursery.start(BrokerProtection(ctx).run)
            await nursery.start(self.put_futures.run)
            await nursery.start(self.role_services.run)
            if self.acl is not None:
                from broker.acl.watcher import watch_acl_files  # only with aclEnable

                await nursery.start(watch_acl_files, self.acl)
            host, port = await nursery.start(
                self.remoting_server.serve, self.config.listen_host, self.config.listen_port
            )
            ctx.set_bound_port(port)
            await self._start_fast_channel(nursery, port)
            self.registration = BrokerRegistration(ctx, client)
            self.assignment.client = client
            nursery.start_soon(self.assignment.run)
            dledger = dledger_store_of(ctx)
            if dledger is not None:
                from broker.dledger_mode import follow_roles, reassert_master  # only in DLedger mode

                follow_roles(ctx, dledger, self._role_changed)
                nursery.start_soon(reassert_master, ctx, dledger, self.registration.trigger)
            ctx.topic_changed_hook = self.registration.trigger
            ctx.register_hook = self.registration.register_now
            ctx.register_topic_hook = self.registration.register_increment
            self.registration.on_master = self.replication.on_master
            # A DLedger member may lead already (its log won while the broker started): it follows later.
            if self.replication.is_slave or dledger is not None:
                self.replication.slave_sync = SlaveSynchronize(ctx, client, self.schedule, timer=self.timer)
                await nursery.start(self.replication.slave_sync.run)
            await nursery.start(self.registration.run)
            if self.metrics is not None:
                await nursery.start(self.metrics.run)
            self.address = (ctx.config.broker_ip1, port)
            log.info("broker %s serving on %s:%d as %s", ctx.config.broker_name, host, port, ctx.broker_addr)
            task_status.started(self.address)

    def _wake_services_on_commit(self, store: DLedgerMessageStore) -> None:
        """In DLedger mode a delayed or timer message reaches its queue when its entry commits, after the rewrite's
        wake-up found nothing: wake the delay level and the timer then (they slept up to a minute otherwise)."""
        hold, schedule, timer = self.hold, self.schedule, self.timer

        def on_arrival(topic: str, queue_id: int, offset: int, tags_code: int, properties: str = "") -> None:
            hold.notify_message_arriving(topic, queue_id, offset, tags_code, properties)
            if topic == SCHEDULE_TOPIC:
                schedule.notify(queue_id + 1)
            elif topic == TIMER_TOPIC:
                timer.notify()

        def on_interest(topic: str, queue_id: int) -> bool:
            return topic in (SCHEDULE_TOPIC, TIMER_TOPIC) or hold.waiting(topic, queue_id)

        store.arrival_listener = on_arrival
        store.arrival_interest = on_interest

    def _role_changed(self) -> None:
        """A DLedger role change, after the live config was rewritten: the master's services follow, the metadata
        sync forgets its master until the registration's answer names the current one (on a slave its rounds start
        again, the first 3 s later), then an immediate registration (changeToMaster / changeToSlave and their
        ``handleSlaveSynchronize``, which sets the master address to null and, on a slave, schedules the rounds
        again: broker/src/main/java/org/apache/rocketmq/broker/BrokerController.java). A member that led
        kept the master it had followed before, a follower by then, and copied its older tables while the name
        server did not answer."""
        self.role_services.role_changed()
        sync = self.replication.slave_sync
        if sync is not None:
            sync.master_addr = None
            if self.context.config.broker_role == "SLAVE":
                sync.restart()
        assert self.registration is not None
        self.registration.trigger()

    async def _start_fast_channel(self, nursery: trio.Nursery, port: int) -> None:
        if not self.config.fast_channel_enable or self.config.listen_port == 0 or port <= 2:
            return
        try:
            self.fast_address = await nursery.start(self.fast_server.serve, self.config.listen_host, port - 2)
        except OSError as exc:
            # As 4.9.8's BrokerController.start: no broker without it. Clients with the VIP channel on (the
            # dashboard's default) would send their admin calls to whatever holds the port.
            raise OSError(
                exc.errno,
                f"cannot open the fast channel (VIP) on port {port - 2}: {exc.strerror or exc}; free the port, or "
                "set fastChannelEnable=false to run without it",
            ) from exc


def pool_sizes(config: BrokerConfig) -> dict[str, tuple[int, int | float]]:
    """Each business pool's ``(workers, queue capacity)`` from the broker's settings, as
    broker/src/main/java/org/apache/rocketmq/broker/BrokerController.java ``initialize`` builds its executors (the
    admin and consumer-manage queues unbounded there)."""
    return {
        "send": (config.send_message_thread_pool_nums, config.send_thread_pool_queue_capacity),
        "pull": (config.pull_message_thread_pool_nums, config.pull_thread_pool_queue_capacity),
        "query": (config.query_message_thread_pool_nums, config.query_thread_pool_queue_capacity),
        "admin": (config.admin_broker_thread_pool_nums, math.inf),
        "client_manage": (config.client_manage_thread_pool_nums, config.client_manager_thread_pool_queue_capacity),
        "heartbeat": (config.heartbeat_thread_pool_nums, config.heartbeat_thread_pool_queue_capacity),
        "consumer_manage": (config.consumer_manage_thread_pool_nums, math.inf),
        "end_transaction": (config.end_transaction_thread_pool_nums, config.end_transaction_pool_queue_capacity),
        "reply": (config.process_reply_message_thread_pool_nums, config.reply_thread_pool_queue_capacity),
        "ack": (config.ack_message_thread_pool_nums, config.ack_thread_pool_queue_capacity),
    }


def fast_failure_waits(config: BrokerConfig) -> dict[str, float | None]:
    """Each pool's ``max_wait`` (seconds) from the broker's fast-failure settings: ``waitTimeMillsIn{Send,Pull,
    Heartbeat,Transaction,Ack}Queue`` for the pools BrokerFastFailure.java sweeps, None for every pool when
    ``brokerFastFailureEnable`` is off (broker/src/main/java/org/apache/rocketmq/broker/latency/)."""
    on = config.broker_fast_failure_enable
    return {
        "send": config.wait_time_mills_in_send_queue / 1000 if on else None,
        "pull": config.wait_time_mills_in_pull_queue / 1000 if on else None,
        "heartbeat": config.wait_time_mills_in_heartbeat_queue / 1000 if on else None,
        "end_transaction": config.wait_time_mills_in_transaction_queue / 1000 if on else None,
        "ack": config.wait_time_mills_in_ack_queue / 1000 if on else None,
    }


def apply_fast_failure(pools: dict[str, ProcessorPool], config: BrokerConfig, page_cache_busy: Reject) -> None:
    """Set the pools' ``max_wait`` from ``config``, and with fast failure on let the send pool drain while
    ``page_cache_busy`` (BrokerFastFailure's PCBUSY sweep); at start, and after every UPDATE_BROKER_CONFIG: the
    workers read both for each request they take, so a change applies to requests already queued."""
    for name, wait in fast_failure_waits(config).items():
        pools[name].max_wait = wait
    pools["send"].page_cache_busy = page_cache_busy if config.broker_fast_failure_enable else None


async def serve_broker(
    config: BrokerConfig, *, task_status: trio.TaskStatus[Address] = trio.TASK_STATUS_IGNORED
) -> None:
    """Run a broker until cancelled; ``task_status.started`` gets its registered ``(host, port)``."""
    await BrokerController(config).serve(task_status=task_status)
