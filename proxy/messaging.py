"""``MessagingActivity``: the Trio side of ``apache.rocketmq.v2.MessagingService`` (RocketMQ's
GrpcMessagingApplication, proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/GrpcMessagingApplication.java).

Every RPC takes the request message and the request headers and returns the response message, synchronously unless it
must wait (sends, long polls, forwards to the DLQ); an :class:`~proxy.common.RpcError` raised inside becomes the
response's ``status`` (business errors travel with gRPC status OK, as in RocketMQ). With ``aclEnable`` every request
first passes :meth:`proxy.acl.GrpcAcl.check` (before the client-id check), and a Telemetry stream is authenticated when
it opens. QueryRoute and QueryAssignment offer every broker of the topic's route, each at its own gRPC endpoint
(:mod:`proxy.route`), for the topic's ``message.type``, or for all four types when it has none, as 4.x topics
(docs/grpc.md#rpcs). Telemetry Settings are checked as ClientActivity checks them, then answered with the merged
Settings (RocketMQ's GrpcClientSettingsManager defaults, the group read without creating it).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Final

from broker.context import BrokerState
from broker.pop import PopService
from processors.topic_attributes import MESSAGE_TYPE, TopicMessageType, topic_type
from proxy.common import (
    TLS_ONLY_KEY,
    Code,
    RpcError,
    check_group,
    check_topic,
    client_id_of,
    finish_now,
    peer_of,
    status,
    topic_not_found,
)
from proxy.config import ProxyConfig
from proxy.consumer import Consuming, check_names
from proxy.local import LocalInvoker
from proxy.pb import definition, service
from proxy.producer import Producing
from proxy.route import ClusterRoutes
from proxy.sessions import Push, SessionTable, subscription_data
from remoting.codec.bodies.broker_metadata import (
    PERM_READ,
    PERM_WRITE,
    CustomizedRetryPolicy,
    ExponentialRetryPolicy,
    GroupRetryPolicy,
    GroupRetryPolicyType,
    SubscriptionGroupConfig,
)

if TYPE_CHECKING:  # the ACL manager's modules load only with aclEnable (proxy.startup.build_activity)
    from proxy.acl import GrpcAcl

__all__ = ["MessagingActivity"]

log = logging.getLogger(__name__)

_NO_SETTINGS: Final = "cannot find client settings for this client"
#: processAndWriteClientSettings' description of a Settings without publishing or subscription (no prefix).
_NO_PUBSUB: Final = "there is no publishing or subscription data in settings"
_CONSUMER_TYPES: Final = frozenset({definition.ClientType.PUSH_CONSUMER, definition.ClientType.SIMPLE_CONSUMER})
_ALL_TYPES: Final = [definition.MessageType.NORMAL, definition.MessageType.FIFO, definition.MessageType.DELAY,
                     definition.MessageType.TRANSACTION]  # fmt: skip


def accepted_types(declared: TopicMessageType | None) -> list[Any]:
    """The queues' ``accept_message_types`` for a topic of type ``declared`` (RouteActivity's
    ``parseTopicMessageType``); every type for a topic without one (4.x topics)."""
    if declared is None or declared is TopicMessageType.MIXED:
        return _ALL_TYPES
    if declared is TopicMessageType.UNSPECIFIED:
        return [definition.MessageType.MESSAGE_TYPE_UNSPECIFIED]
    return [definition.MessageType.Value(declared.value)]


def queue_permissions(perm: int, reads: int, writes: int) -> list[Any]:
    """RouteActivity.genMessageQueueFromQueueData: the permission of each queue id, read-only ones first, then
    write-only, then read-write; a topic neither readable nor writable has at least one NONE queue."""
    readable, writable = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    kind = definition.Permission
    if readable and writable:
        both = min(reads, writes)
        return [kind.READ] * (reads - both) + [kind.WRITE] * (writes - both) + [kind.READ_WRITE] * both
    if writable:
        return [kind.WRITE] * writes
    if readable:
        return [kind.READ] * reads
    return [kind.NONE] * max(1, reads, writes)


class MessagingActivity:
    """One proxy's RPCs over one broker. See the module docstring."""

    def __init__(
        self,
        broker: BrokerState,
        config: ProxyConfig,
        pop: PopService,
        invoker: LocalInvoker,
        acl: GrpcAcl | None = None,
        routes: ClusterRoutes | None = None,
    ) -> None:
        self.broker = broker
        self.config = config
        self.acl = acl
        self.routes = routes or ClusterRoutes(broker, config, None)
        self.producing = Producing(broker, config, invoker)
        relay_timeout = config.grpc_proxy_relay_request_timeout_in_seconds
        self.sessions = SessionTable(broker, self.producing.transactions, relay_timeout)
        self.consuming = Consuming(broker, config, pop, self.sessions, invoker)

    async def guarded(
        self,
        fn: Callable[[Any, dict[str, str]], Awaitable[Any]],
        make: Callable[..., Any],
        req: Any,
        md: dict[str, str],
    ) -> Any:
        """Run ``fn`` after the ACL and client-id checks; an RpcError becomes ``make(status=...)``."""
        try:
            self.admit(req, md)
            return await fn(req, md)
        except Exception as exc:
            return _failed(make, exc)

    def guarded_sync(
        self, fn: Callable[[Any, dict[str, str]], Any], make: Callable[..., Any], req: Any, md: dict[str, str]
    ) -> Any:
        """:meth:`guarded` for the RPCs that never wait (served without a Trio task, see proxy/bridge.py)."""
        try:
            self.admit(req, md)
            return fn(req, md)
        except Exception as exc:
            return _failed(make, exc)

    def now_unless_waiting(
        self,
        fn: Callable[[Any, dict[str, str]], Coroutine[Any, Any, Any]],
        make: Callable[..., Any],
        req: Any,
        md: dict[str, str],
    ) -> Any | None:
        """:meth:`guarded` of ``fn`` run to its end synchronously (:func:`proxy.common.finish_now`) when the store
        answers puts at once; ``None`` when it waits for them (DLedger mode, SYNC_FLUSH, SYNC_MASTER): serve it with
        :meth:`guarded` instead. For an ack or a change of invisibility, answered once its records landed."""
        if self.broker.store.waits_for_put(True):
            return None
        return self.guarded_sync(lambda r, m: finish_now(fn(r, m)), make, req, md)

    def send_now(self, req: Any, md: dict[str, str]) -> Any | None:
        """SendMessage served synchronously when the store answers puts at once (:meth:`Producing.send_now`), as
        :meth:`guarded_sync`; ``None``: serve it with :meth:`guarded` and :meth:`Producing.send` instead."""
        if self.broker.store.waits_for_put(True):
            return None
        return self.guarded_sync(self.producing.send_now, service.SendMessageResponse, req, md)

    async def send(self, req: Any, md: dict[str, str]) -> Any:
        """SendMessage through a Trio task (it may wait for the group commit), as :meth:`guarded`."""
        return await self.guarded(self.producing.send, service.SendMessageResponse, req, md)

    def admit(self, req: Any, md: dict[str, str]) -> None:
        """The ACL check (when on), then the client id; raises RpcError."""
        if self.acl is not None:
            self.acl.check(req, md)
        client_id_of(md)

    # ---- routes -------------------------------------------------------------------------------------------------

    async def query_route(self, req: Any, md: dict[str, str]) -> Any:
        """QueryRoute (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/route/RouteActivity.java): the topic
        checked, then the queues of every broker of its route (:class:`proxy.route.ClusterRoutes`), each laid out
        as genMessageQueueFromQueueData lays them out from its perm, for each member of the broker name at its own
        gRPC endpoint. A topic neither the name server nor this broker knows is created here when
        ``autoCreateTopicEnable`` (ours; docs/grpc.md#rpcs), else TOPIC_NOT_FOUND."""
        topic = req.topic.name
        check_topic(topic)
        tls = bool(md.get(TLS_ONLY_KEY))  # came in on the TLS-only port: every broker at its TLS-only port
        entries = await self.routes.queues(topic, tls)
        if entries is None and self.broker.config.auto_create_topic_enable:
            created = self.broker.topics.create_topic_in_send_process(topic, "TBW102", 4)
            entries = None if created is None else [self.routes.own_queues(created, tls=tls)]
        if entries is None:
            raise topic_not_found(topic)
        response = service.QueryRouteResponse(status=status())
        local = self.broker.topics.get(topic)  # LocalMetadataService: the type is this broker's topic's
        accepted = accepted_types(None if local is None else topic_type(local.attribute(MESSAGE_TYPE)))
        for entry in entries:
            permissions = queue_permissions(entry.perm, entry.read_queue_nums, entry.write_queue_nums)
            for broker_id, endpoints in entry.members:
                broker = definition.Broker(name=entry.name, id=broker_id, endpoints=endpoints)
                for qid, perm in enumerate(permissions):
                    queue = response.message_queues.add(id=qid, permission=perm)
                    queue.topic.CopyFrom(req.topic)
                    queue.broker.CopyFrom(broker)
                    queue.accept_message_types.extend(accepted)
        return response

    def receive_now(self, req: Any, md: dict[str, str], deadline: float | None) -> list[Any] | None:
        """ReceiveMessage without waiting; ``None``: nothing yet, long-poll with :meth:`receive`."""
        try:
            self.admit(req, md)
        except RpcError as err:
            return [service.ReceiveMessageResponse(status=status(err.code, err.message))]
        return self.consuming.receive_now(req, md, deadline)

    async def receive(self, req: Any, md: dict[str, str], deadline: float | None) -> list[Any]:
        return await self.consuming.receive(req, md, deadline)

    async def query_assignment(self, req: Any, md: dict[str, str]) -> Any:
        """QueryAssignment over the queues of every broker of the topic's route (:class:`proxy.route.ClusterRoutes`),
        the names checked first (:meth:`Consuming.query_assignment`)."""
        check_names(req.topic.name, req.group.name)
        queues = await self.routes.queues(req.topic.name, bool(md.get(TLS_ONLY_KEY)))
        return self.consuming.query_assignment(req, queues)

    # ---- client life cycle ----------------------------------------------------------------------------------------

    def heartbeat(self, req: Any, md: dict[str, str]) -> Any:
        """ClientActivity.heartbeat (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/client/
        ClientActivity.java): a client whose Settings never came is UNRECOGNIZED_CLIENT_TYPE; then by the Settings'
        client type: a producer is registered for its topics, a push or simple consumer under ``request.group``
        (checked: ILLEGAL_CONSUMER_GROUP) with its Settings' subscriptions, any other type is UNRECOGNIZED_CLIENT_TYPE
        with the type's name. Raises RpcError."""
        client_id = client_id_of(md)
        known = self.sessions.sessions.get(client_id)
        if known is None or known.settings is None:
            return service.HeartbeatResponse(status=status(Code.UNRECOGNIZED_CLIENT_TYPE, _NO_SETTINGS))
        kind = known.settings.client_type
        group = None
        if kind in _CONSUMER_TYPES:
            check_group(req.group.name)
            group = req.group.name
        elif kind != definition.ClientType.PRODUCER:
            return service.HeartbeatResponse(status=status(Code.UNRECOGNIZED_CLIENT_TYPE, _type_name(kind)))
        self.sessions.heartbeat(self.sessions.session(client_id, md), peer_of(md), group=group)
        return service.HeartbeatResponse(status=status())

    def notify_termination(self, req: Any, md: dict[str, str]) -> Any:
        """ClientActivity.notifyClientTermination (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/client/
        ClientActivity.java): as :meth:`heartbeat`, a client without Settings is UNRECOGNIZED_CLIENT_TYPE. The
        Settings are taken away first (removeAndGetClientSettings); then a producer is unregistered from its
        Settings' topics, a push or simple consumer from ``request.group`` alone after that is checked
        (ILLEGAL_CONSUMER_GROUP, raised as RpcError; :meth:`SessionTable.terminate`), and any
        other type is UNRECOGNIZED_CLIENT_TYPE with the type's name; a refused client stays registered until its
        registration expires. A consumer's auto-renewed handles of the group are released at once
        (:meth:`proxy.renew.RenewTable.release_group`)."""
        client_id = client_id_of(md)
        known = self.sessions.sessions.get(client_id)
        if known is None or known.settings is None:
            return service.NotifyClientTerminationResponse(status=status(Code.UNRECOGNIZED_CLIENT_TYPE, _NO_SETTINGS))
        settings, known.settings = known.settings, None
        kind = settings.client_type
        if kind in _CONSUMER_TYPES:
            check_group(req.group.name)
        elif kind != definition.ClientType.PRODUCER:
            return service.NotifyClientTerminationResponse(
                status=status(Code.UNRECOGNIZED_CLIENT_TYPE, _type_name(kind))
            )
        if kind in _CONSUMER_TYPES:
            self.sessions.terminate(client_id, consumer_group=req.group.name)
            self.consuming.renew.release_group(client_id, req.group.name)
        else:
            self.sessions.terminate(client_id, producer_groups=[topic.name for topic in settings.publishing.topics])
        return service.NotifyClientTerminationResponse(status=status())

    def telemetry_opened(self, md: dict[str, str], push: Push) -> None:
        """A Telemetry stream opened: commands for this client go to ``push`` from now on, unless the ACL refuses
        the caller's credentials or its client id is blank: the stream stays open and its first command is refused
        (:meth:`telemetry`), as RocketMQ's request pipeline and validateContext run on each command."""
        try:
            if self.acl is not None:
                self.acl.check(None, md)
            client_id = client_id_of(md)
        except RpcError:
            return  # never attached to the client id's pushes
        self.sessions.session(client_id, md).push = push

    def telemetry_closed(self, md: dict[str, str], push: Push) -> None:
        session = self.sessions.sessions.get(md.get("x-mq-client-id", ""))
        if session is not None and session.push is push:
            session.push = None

    def telemetry(self, command: Any, md: dict[str, str]) -> Any | None:
        """One command from the client; returns the reply to write, if any. Raises RpcError for a Settings the
        checks of :meth:`_check_settings` refuse, its message described as ClientActivity.processTelemetryException
        describes it, "process client telemetryCommand failed. <message>" (the stream then ends with it, see
        proxy/servicer.py; nothing is registered).
        A command the ACL refuses, or any without a client id, raises its RpcError (UNAUTHORIZED, CLIENT_ID_REQUIRED)
        and changes nothing: the stream writes that status, then ends (proxy/servicer.py)."""
        if self.acl is not None:
            self.acl.check(command, md)
        client_id_of(md)  # GrpcMessagingApplication.validateContext, after the request pipeline
        if not command.HasField("settings"):
            self.sessions.relay_answer(command)  # a reply to a relayed request, if any: nothing to write back
            return None
        settings = command.settings
        try:
            self._check_settings(settings)
        except RpcError as err:  # processTelemetryException's description
            if err.message == _NO_PUBSUB:
                raise
            raise RpcError(err.code, f"process client telemetryCommand failed. {err.message}") from None
        session = self.sessions.session(client_id_of(md), md)
        session.settings = settings
        self.sessions.heartbeat(session, peer_of(md), update_subscriptions=True)
        return service.TelemetryCommand(status=status(), settings=self._merged(settings))

    @staticmethod
    def _check_settings(settings: Any) -> None:
        """ClientActivity.processAndWriteClientSettings' checks, before anything is registered: publishing or
        subscription present (BAD_REQUEST), each published topic legal and no system topic (ILLEGAL_TOPIC), the
        subscribing group legal and no system group (ILLEGAL_CONSUMER_GROUP), each subscription as FilterAPI.build
        takes it (ILLEGAL_FILTER_EXPRESSION); a subscribing client of no consumer type is INTERNAL_SERVER_ERROR "Client
        type is not consumer, type: <name>", as registerConsumer's buildConsumeType throws before the subscriptions are
        built. Raises RpcError."""
        if settings.HasField("publishing"):
            for topic in settings.publishing.topics:
                check_topic(topic.name)
        elif settings.HasField("subscription"):
            check_group(settings.subscription.group.name)
            if settings.client_type not in _CONSUMER_TYPES:
                kind = _type_name(settings.client_type)
                raise RpcError(Code.INTERNAL_SERVER_ERROR, f"Client type is not consumer, type: {kind}")
            subscription_data(settings.subscription)
        else:
            raise RpcError(Code.BAD_REQUEST, _NO_PUBSUB)

    def _metric(self, settings: Any) -> Any:
        """The ``metric`` answered in place of the client's, by ``metricCollectorMode``
        (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/common/GrpcClientSettingsManager.java mergeMetric):
        off none, on ``metricCollectorAddress`` as an IPv4 endpoint, proxy the client's access point. Raises RpcError
        for an ``on`` mode whose address is no ``host:port``."""
        mode = self.config.metric_collector_mode.lower()
        if mode == "on":
            host, _, rest = self.config.metric_collector_address.partition(":")
            port = rest.split(":")[0]
            if not port.isdigit():
                raise RpcError(
                    Code.INTERNAL_SERVER_ERROR,
                    f"metricCollectorAddress {self.config.metric_collector_address!r} is no host:port",
                )
            address = definition.Address(host=host, port=int(port))
            endpoints = definition.Endpoints(scheme=definition.AddressScheme.IPv4, addresses=[address])
            return definition.Metric(on=True, endpoints=endpoints)
        if mode == "proxy":
            return definition.Metric(on=True, endpoints=settings.access_point)
        return definition.Metric(on=False)

    def _merged(self, settings: Any) -> Any:
        """The Settings answered: the client's, with what the proxy decides merged in from ProxyConfig and the group
        (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/common/GrpcClientSettingsManager.java
        getClientSettings). A consumer whose group has no config yet gets its Settings as updateClientSettings stored
        them: a default group's merged under the client's own (its ``fifo``, batch size, polling timeout, backoff)."""
        if settings.HasField("publishing"):
            merged = self._producer_settings(settings)
        else:
            group = self.broker.groups.get(settings.subscription.group.name)  # LocalMetadataService: creates nothing
            if group is None:
                merged = self._consumer_settings(definition.Settings(), SubscriptionGroupConfig(""))
                merged.MergeFrom(settings)
            else:
                merged = self._consumer_settings(settings, group)
        merged.metric.CopyFrom(self._metric(settings))
        return merged

    def _producer_settings(self, settings: Any) -> Any:
        """mergeProducerData: the send attempts and backoff, the type check and the largest body of ProxyConfig."""
        merged = definition.Settings()
        merged.CopyFrom(settings)
        policy, config = merged.backoff_policy, self.config
        policy.max_attempts = config.grpc_client_producer_max_attempts
        policy.exponential_backoff.initial.FromMilliseconds(config.grpc_client_producer_backoff_initial_millis)
        policy.exponential_backoff.max.FromMilliseconds(config.grpc_client_producer_backoff_max_millis)
        policy.exponential_backoff.multiplier = config.grpc_client_producer_backoff_multiplier
        merged.publishing.validate_message_type = config.enable_topic_message_type_check
        merged.publishing.max_body_size = config.max_message_size
        return merged

    def _consumer_settings(self, settings: Any, group: SubscriptionGroupConfig) -> Any:
        """mergeSubscriptionData: batch size and polling timeout of ProxyConfig, ``fifo`` and the backoff of the
        group (its ``retryMaxTimes + 1`` attempts, its groupRetryPolicy, an unset policy of its type being that
        type's default)."""
        merged = definition.Settings()
        merged.CopyFrom(settings)
        sub = merged.subscription
        sub.receive_batch_size = self.config.grpc_client_consumer_long_polling_batch_size
        sub.long_polling_timeout.FromMilliseconds(self.config.grpc_client_consumer_max_long_polling_timeout_millis)
        sub.fifo = group.consume_message_orderly
        policy = merged.backoff_policy
        policy.max_attempts = group.retry_max_times + 1
        retry = group.group_retry_policy or GroupRetryPolicy()
        if retry.type is GroupRetryPolicyType.EXPONENTIAL:
            exponential = retry.exponential or ExponentialRetryPolicy()
            policy.exponential_backoff.initial.FromMilliseconds(exponential.initial)
            policy.exponential_backoff.max.FromMilliseconds(exponential.max)
            policy.exponential_backoff.multiplier = exponential.multiplier
        else:
            policy.ClearField("customized_backoff")
            for ms in (retry.customized or CustomizedRetryPolicy()).next:
                policy.customized_backoff.next.add().FromMilliseconds(ms)
        return merged


def _type_name(kind: int) -> str:
    """A client type as Java's enum ``name()`` writes it: ``UNRECOGNIZED`` for a number the proto does not name."""
    return definition.ClientType.Name(kind) if kind in definition.ClientType.values() else "UNRECOGNIZED"


def _failed(make: Callable[..., Any], exc: Exception) -> Any:
    if isinstance(exc, RpcError):
        return make(status=status(exc.code, exc.message))
    # A bug or a refused store append: the client gets a status, the broker goes on.
    log.error("gRPC request failed", exc_info=exc)
    return make(status=status(Code.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}"))
