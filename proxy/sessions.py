"""5.x client sessions: who is connected over gRPC, with which Settings, and how to reach its Telemetry stream.

A 5.x client has no connection the broker could write to, only its Telemetry stream. :class:`GrpcClientChannel`
stands in for one in the broker's client registry (a :class:`~remoting.connection.Connection` that never runs): the
registry lists it among producer and consumer connections (so ``mqadmin producerConnection`` / ``consumerConnection``
show 5.x clients, their subscriptions as ClientActivity.buildSubscriptionData builds them, a later Settings's replacing
a group's, a Heartbeat leaving them as they are), expires it like any
channel, and the transaction check service's CHECK_TRANSACTION_STATE written to it becomes a
``RecoverOrphanedTransactionCommand`` on the client's stream (RocketMQ's GrpcClientChannel,
proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/channel/GrpcClientChannel.java). An admin's
GET_CONSUMER_RUNNING_INFO with ``jstackEnable`` invoked on it becomes a ``PrintThreadStackTraceCommand`` with a nonce
(:meth:`SessionTable.relay`), and CONSUME_MESSAGE_DIRECTLY a ``VerifyMessageCommand`` with the nonce and the
message; the client's ``ThreadStackTrace`` or ``VerifyMessageResult`` with that nonce, on any Telemetry stream, is
the answer (:meth:`SessionTable.relay_answer`, RocketMQ's ClientActivity.reportThreadStackTrace and
reportVerifyMessageResult), and none within
``grpcProxyRelayRequestTimeoutInSeconds`` is SYSTEM_BUSY "call remote timeout" (GrpcChannelManager
.scanExpireResultFuture). Other requests are dropped: an invocation of one ends at its timeout
(:meth:`Connection.invoke` needs no sweeper for that). It is :attr:`~GrpcClientChannel.writable` only while the
client's Telemetry stream is open, as RocketMQ's ``isWritable``.

Owned by :class:`proxy.messaging.MessagingActivity` on the Trio thread; ``push`` callables are thread-safe (they hand
the command to the gRPC thread).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable
from typing import Any, Final, cast

import attrs
import orjson
import trio

from broker.context import BrokerState
from processors.pull import build_subscription
from proxy.common import Code, RpcError, TransactionData
from proxy.convert import grpc_message, recovery_command
from proxy.pb import definition, service
from remoting.codec.bodies import (
    EXPRESSION_SQL92,
    EXPRESSION_TAG,
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)
from remoting.codec.codes import CURRENT_VERSION, LanguageCode, RequestCode, ResponseCode, version_ordinal
from remoting.codec.command import RemotingCommand
from remoting.codec.errors import MessageDecodeError
from remoting.codec.headers import GetConsumerRunningInfoRequestHeader
from remoting.codec.headers.transaction import CheckTransactionStateRequestHeader
from remoting.codec.message import decode_record
from remoting.connection import Connection
from remoting.errors import RemotingClosedError, RemotingError, RemotingTimeoutError

__all__ = ["ClientSession", "GrpcClientChannel", "SessionTable", "subscription_data"]

log = logging.getLogger(__name__)

Push = Callable[[Any], None]
#: The remoting answer a relayed request gets: response code, remark, body.
Answer = tuple[int, str, bytes]

_LANGUAGES: Final = {
    "JAVA": LanguageCode.JAVA,
    "CPP": LanguageCode.CPP,
    "PYTHON": LanguageCode.PYTHON,
    "GOLANG": LanguageCode.GO,
    "DOTNET": LanguageCode.DOTNET,
    "NODE_JS": LanguageCode.NODE_JS,
}


@attrs.define(eq=False)
class ClientSession:
    """One 5.x client (by ``x-mq-client-id``): its last Settings and its Telemetry stream, if open."""

    client_id: str
    language: LanguageCode = LanguageCode.OTHER
    #: registered with its channel: ClientActivity.parseClientVersion of ``x-mq-client-version``
    version: int = CURRENT_VERSION
    settings: Any = None
    push: Push | None = None
    channel: GrpcClientChannel | None = None
    transactions: TransactionData = attrs.field(factory=lambda: TransactionData(15))
    #: Trio time of the client's last request through :meth:`SessionTable.session`
    last_seen: float = 0.0

    @property
    def client_type(self) -> int:
        return 0 if self.settings is None else int(self.settings.client_type)

    @property
    def group(self) -> str:
        if self.settings is None or not self.settings.HasField("subscription"):
            return ""
        return str(self.settings.subscription.group.name)

    @property
    def fifo(self) -> bool:
        return self.settings is not None and bool(self.settings.subscription.fifo)


class GrpcClientChannel(Connection):
    """A 5.x client as a broker channel; see the module docstring."""

    def __init__(self, session: ClientSession, remote: tuple[str, int], table: SessionTable) -> None:
        super().__init__(cast(Any, None), remote, ("0.0.0.0", 0))
        self.session = session
        self.table = table

    def __repr__(self) -> str:
        return f"<GrpcClientChannel {self.session.client_id}{' closed' if self.closed else ''}>"

    @property
    def writable(self) -> bool:
        """Its Telemetry stream is open (RocketMQ's GrpcClientChannel.isWritable): without it every command is
        dropped, though the client's heartbeats keep the channel registered."""
        return not self.closed and self.session.push is not None

    def send_nowait(self, cmd: RemotingCommand) -> None:
        log.debug("dropped remoting command %d to 5.x client %s", cmd.code, self.session.client_id)

    async def send(self, cmd: RemotingCommand) -> None:
        self.send_nowait(cmd)

    async def invoke(self, cmd: RemotingCommand, timeout: float, *, keep_open: bool = False) -> RemotingCommand:
        """A request RocketMQ's GrpcClientChannel relays (see :meth:`_telemetry_of`) is written to the client's
        Telemetry stream and answered by its reply (:meth:`SessionTable.relay`); any other is dropped and times
        out."""
        make = self._telemetry_of(cmd)
        if make is None:
            return await super().invoke(cmd, timeout, keep_open=keep_open)
        if self.closed:
            raise RemotingClosedError(f"{self!r}: cannot invoke, connection closed")
        return await self.table.relay(self, cmd, make, timeout)

    @staticmethod
    def _telemetry_of(cmd: RemotingCommand) -> Callable[[str], Any] | None:
        """The Telemetry command (given its nonce) GrpcClientChannel writes for ``cmd``: a PrintThreadStackTraceCommand
        for GET_CONSUMER_RUNNING_INFO with ``jstackEnable`` (processGetConsumerRunningInfo writes nothing without
        it), a VerifyMessageCommand with the message in the body, as a 5.x client receives it, for
        CONSUME_MESSAGE_DIRECTLY (processConsumeMessageDirectly); None for a request it does not relay. Raises
        RemotingError for a body that is no message (RocketMQ's write fails, the broker's call with it)."""
        if cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            if not GetConsumerRunningInfoRequestHeader.from_ext_fields(cmd.ext_fields).jstack_enable:
                return None

            def print_thread_stack_trace(nonce: str) -> Any:
                command = service.TelemetryCommand()
                command.print_thread_stack_trace_command.nonce = nonce
                return command

            return print_thread_stack_trace
        if cmd.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            try:
                stored = decode_record(cmd.body or b"")
            except MessageDecodeError as exc:
                raise RemotingError(f"the message to verify does not decode: {exc}") from None
            message = grpc_message(stored, stored.topic)  # GrpcConverter.buildMessage: its topic as stored

            def verify_message(nonce: str) -> Any:
                command = service.TelemetryCommand()
                command.verify_message_command.nonce = nonce
                command.verify_message_command.message.CopyFrom(message)
                return command

            return verify_message
        return None

    async def invoke_oneway(self, cmd: RemotingCommand, timeout: float | None = None) -> None:
        if cmd.code != RequestCode.CHECK_TRANSACTION_STATE or self.session.push is None:
            return
        header = CheckTransactionStateRequestHeader.from_ext_fields(cmd.ext_fields)
        try:
            half = decode_record(cmd.body or b"")
        except MessageDecodeError:
            log.warning("transaction check for %s carried an undecodable message", self.session.client_id)
            return
        tx_id = header.transaction_id or header.msg_id or ""
        group = half.properties.get("PGROUP") or half.topic  # the broker's check names the half's producer group
        now = trio.current_time()  # the check names the data again: it serves transactionDataExpireMillis anew
        self.session.transactions.add((group, tx_id), header.commit_log_offset, header.tran_state_table_offset, now)
        self.session.push(recovery_command(half, tx_id))


@attrs.define(eq=False)
class _Relay:
    """A request relayed to a 5.x client, waiting for the Telemetry reply with its nonce."""

    code: int
    done: trio.Event = attrs.field(factory=trio.Event)
    answer: Answer | None = None


class SessionTable:
    """Sessions by client id, their registration in the broker's client registry, and the requests relayed to them
    waiting for an answer (by nonce, RocketMQ's GrpcChannelManager); ``relay_timeout`` is
    ``grpcProxyRelayRequestTimeoutInSeconds``."""

    def __init__(
        self,
        broker: BrokerState,
        transactions: TransactionData,
        relay_timeout: float = 5.0,
    ) -> None:
        self.broker = broker
        self.sessions: dict[str, ClientSession] = {}
        self._transactions = transactions
        self.relay_timeout = relay_timeout
        self.relays: dict[str, _Relay] = {}
        self._nonces = itertools.count()

    async def relay(
        self, channel: GrpcClientChannel, cmd: RemotingCommand, make: Callable[[str], Any], timeout: float
    ) -> RemotingCommand:
        """Write ``make(nonce)`` to the client's Telemetry stream and wait for its reply with that nonce. None within
        ``relay_timeout`` answers SYSTEM_BUSY "call remote timeout", as GrpcChannelManager.scanExpireResultFuture
        completes the waiting future (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/channel/
        GrpcChannelManager.java); a ``timeout`` shorter than that raises RemotingTimeoutError, as the broker's own
        invokeSync ends first. Without an open stream nothing is written (GrpcClientChannel.writeTelemetryCommand
        logs it) and the wait is the same."""
        nonce = str(next(self._nonces))
        waiting = self.relays[nonce] = _Relay(cmd.code)
        client_id = channel.session.client_id
        try:
            push = channel.session.push
            if push is None:
                log.warning("no Telemetry stream of %s to relay request code %d to", client_id, cmd.code)
            else:
                push(make(nonce))
            with trio.move_on_after(min(self.relay_timeout, timeout)):
                await waiting.done.wait()
        finally:
            self.relays.pop(nonce, None)
        if waiting.answer is not None:
            code, remark, body = waiting.answer
            return cmd.response(code, remark, body=body)
        if self.relay_timeout < timeout:
            return cmd.response(ResponseCode.SYSTEM_BUSY, "call remote timeout")
        raise RemotingTimeoutError(f"no answer to request code {cmd.code} from {client_id} in {timeout}s")

    def relay_answer(self, command: Any) -> None:
        """A client's Telemetry reply to a relayed request, matched by nonce whoever sends it (ClientActivity
        .reportThreadStackTrace); a nonce nobody waits for (answered, timed out, unknown) is dropped."""
        kind = command.WhichOneof("command")
        if kind == "thread_stack_trace":
            nonce, code, answer = command.thread_stack_trace.nonce, RequestCode.GET_CONSUMER_RUNNING_INFO, _running_info
        elif kind == "verify_message_result":
            nonce, code, answer = command.verify_message_result.nonce, RequestCode.CONSUME_MESSAGE_DIRECTLY, _verified
        else:
            return
        waiting = self.relays.get(nonce)
        if waiting is None or waiting.code != code:  # not an answer to that request
            return
        del self.relays[nonce]
        waiting.answer = answer(command)
        waiting.done.set()

    def session(self, client_id: str, metadata: dict[str, str] | None = None) -> ClientSession:
        session = self.sessions.get(client_id)
        now = trio.current_time()
        if session is None:
            self._forget_gone(now)
            metadata = metadata or {}
            language = _LANGUAGES.get(metadata.get("x-mq-language", ""), LanguageCode.OTHER)
            version = _client_version(metadata.get("x-mq-client-version", ""))
            session = ClientSession(client_id, language, version, transactions=self._transactions)
            self.sessions[client_id] = session
        session.last_seen = now
        return session

    def _forget_gone(self, now: float) -> None:
        """Drop the sessions of clients that went away without NotifyClientTermination, their stream closed: those
        the client registry expired (no heartbeat for ``channelExpiredTimeout``), and those never registered (no
        Settings came) and not seen for as long."""
        expired = now - self.broker.clients.channel_expired_timeout
        gone = [
            cid
            for cid, s in self.sessions.items()
            if s.push is None and (s.channel.closed if s.channel is not None else s.last_seen < expired)
        ]
        for client_id in gone:
            del self.sessions[client_id]

    def heartbeat(
        self,
        session: ClientSession,
        peer: tuple[str, int],
        *,
        update_subscriptions: bool = False,
        group: str | None = None,
    ) -> None:
        """Register (or refresh) the session as producer of each publishing topic or consumer of ``group`` (a
        Heartbeat's ``request.group``), else of its Settings' group; a consumer's subscriptions replace the group's
        with ``update_subscriptions`` (ClientActivity registers a Settings with updateSubscription, a Heartbeat
        without). Raises RpcError for subscriptions :func:`subscription_data` refuses (the Telemetry Settings were
        checked so)."""
        settings = session.settings
        if settings is None:
            return
        channel = session.channel
        if channel is None or channel.closed:
            channel = session.channel = GrpcClientChannel(session, peer, self)
        clients = self.broker.clients
        info = clients.channel_info(channel, session.client_id, session.language, session.version)
        if settings.client_type == definition.ClientType.PRODUCER:
            for topic in settings.publishing.topics:
                clients.register_producer(topic.name, info)
        elif group is not None or settings.HasField("subscription"):
            push = settings.client_type == definition.ClientType.PUSH_CONSUMER
            clients.register_consumer(
                session.group if group is None else group,
                info,
                ConsumeType.CONSUME_PASSIVELY if push else ConsumeType.CONSUME_ACTIVELY,
                MessageModel.CLUSTERING,
                ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                subscription_data(settings.subscription),
                notify=False,
                update_subscriptions=update_subscriptions,
            )

    def terminate(self, client_id: str, producer_groups: Iterable[str] = (), consumer_group: str | None = None) -> None:
        """The client said goodbye (NotifyClientTermination): forget its session and unregister its channel from
        ``producer_groups`` (a producer's topics) or ``consumer_group`` (the request's group) alone, as
        ClientActivity.notifyClientTermination calls unRegisterProducer per topic or unRegisterConsumer for the
        request's group (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/client/ClientActivity.java): a group
        it joined otherwise (a Heartbeat naming another group) keeps it until its registration expires, and a producer
        group it leaves empty goes (ProducerManager.unregisterProducer). The group's other members are not notified
        (ClientProcessor.unRegisterConsumer: isNotifyConsumerIdsChangedEnable false). The channel is closed once it
        is in no group."""
        session = self.sessions.pop(client_id, None)
        channel = None if session is None else session.channel
        if channel is None:
            return
        clients = self.broker.clients
        for group in producer_groups:
            clients.unregister_producer(group, channel)
        if consumer_group is not None:
            clients.unregister_consumer(consumer_group, channel, notify=False)
        consuming = any(channel in info.channels for info in clients.consumer_groups.values())
        if not consuming and clients.find_producer_channel(client_id) is None:
            channel.close()


def _client_version(sent: str) -> int:
    """ClientActivity.parseClientVersion: the ordinal of the MQVersion.Version the upper-cased value names, else the
    proxy's own version (the official clients send a release number, ``5.0.7``)."""
    ordinal = version_ordinal(sent.upper())
    return CURRENT_VERSION if ordinal is None else ordinal


def _running_info(command: Any) -> Answer:
    """ClientActivity.reportThreadStackTrace: OK is SUCCESS with a ConsumerRunningInfo holding only the stacks (its
    JSON as fastjson writes it, keys sorted), VERIFY_FIFO_MESSAGE_UNSUPPORTED NO_PERMISSION, anything else (an absent
    status too) SYSTEM_ERROR, with RocketMQ's remarks."""
    code = command.status.code
    if code == definition.Code.OK:
        info = {
            "jstack": command.thread_stack_trace.thread_stack_trace,
            "mqPopTable": {},
            "mqTable": {},
            "properties": {},
            "statusTable": {},
            "subscriptionSet": [],
            "userConsumerInfo": {},
        }
        return ResponseCode.SUCCESS, "", orjson.dumps(info)
    if code == definition.Code.VERIFY_FIFO_MESSAGE_UNSUPPORTED:
        return ResponseCode.NO_PERMISSION, "forbidden to verify message", b""
    return ResponseCode.SYSTEM_ERROR, "verify message failed", b""


#: ClientActivity.buildConsumeMessageDirectlyResult: a VerifyMessageResult's status as the CMResult it stands for.
_CONSUME_RESULTS: Final = {
    definition.Code.OK: "CR_SUCCESS",
    definition.Code.FAILED_TO_CONSUME_MESSAGE: "CR_LATER",
    definition.Code.MESSAGE_CORRUPTED: "CR_RETURN_NULL",
}


def _verified(command: Any) -> Answer:
    """ClientActivity.reportVerifyMessageResult: SUCCESS whatever the status, with a ConsumeMessageDirectlyResult
    whose consumeResult the status gives (none for another status, as Java's null) and remark "from gRPC client"
    (its JSON as fastjson writes it, keys sorted, the defaults of Java's fields)."""
    result: dict[str, object] = {"autoCommit": True, "order": False, "remark": "from gRPC client", "spentTimeMills": 0}
    consumed = _CONSUME_RESULTS.get(command.status.code)
    if consumed is not None:
        result["consumeResult"] = consumed
    return ResponseCode.SUCCESS, "", orjson.dumps(result, option=orjson.OPT_SORT_KEYS)


def subscription_data(subscription: Any) -> list[SubscriptionData]:
    """A Settings' subscriptions as ClientActivity.buildSubscriptionData registers them: ``FilterAPI.build(topic,
    expression, SQL92 or TAG)``, so a TAG one carries its tags and codes and a SQL92 one its type (its expression is
    not parsed here, as there). Raises RpcError(ILLEGAL_FILTER_EXPRESSION) for what FilterAPI.build refuses: a TAG
    expression without a tag (``||``), an empty SQL92 one."""
    built = []
    for entry in subscription.subscriptions:
        sql = entry.expression.type == definition.FilterType.SQL
        kind = EXPRESSION_SQL92 if sql else EXPRESSION_TAG
        try:
            built.append(build_subscription(entry.topic.name, entry.expression.expression, kind))
        except ValueError as exc:  # ClientActivity.buildSubscriptionData's message; the cause to the log
            log.debug("subscription of %s refused: %s", entry.topic.name, exc)
            raise RpcError(Code.ILLEGAL_FILTER_EXPRESSION, "expression format is not correct") from None
    return built
