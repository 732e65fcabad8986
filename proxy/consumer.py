"""The consumer RPCs: ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue and
QueryAssignment (RocketMQ's proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/consumer/ and route/), over the
broker's :class:`~broker.pop.PopService`.

Every consumer RPC first refuses an illegal or system topic or group (GrpcValidator.validateTopicAndConsumerGroup).
Receive checks the request as RocketMQ's proxy does (invisible time within [10 s, 12 h] unless auto-renew, which gets
60 s; polling window, without one the time left less half the client's request timeout, clamped to [5 s, 20 s], cut to
the caller's deadline, else ILLEGAL_POLLING_TIME, checked first; batch ≤ 32), then pops; with nothing to hand out it
waits for an arrival its filter matches on the topic or its retry topic (an orderly one also for the end of a queue's
batch in flight) until the window ends. The answer is RocketMQ's stream shape: a status, the messages, a
``delivery_timestamp``. The receive is orderly (FIFO) when the group's ``consumeMessageOrderly`` says so, the
client's own Settings flag deciding only for a group not created yet (as the Settings answered say); a FIFO receive
repeating the attempt id of a queue's delivery in flight gets that delivery again (ReceiveMessageActivity passes
``attempt_id`` down).
ForwardMessageToDeadLetterQueue is a CONSUMER_SEND_MSG_BACK through the broker's own send-back processor
(:class:`~proxy.local.LocalInvoker`), as in RocketMQ's local mode; a popped message whose attempts are used up is not
handed out but goes the same way (without waiting for the flush) and is acked, as RocketMQ's
ConsumerProcessor.popMessage does.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any, Final

import attrs
import trio

from broker.context import BrokerState
from broker.pop import AckOutcome, Popped, PopService, ReceiptHandle
from processors.common import RequestRejected
from processors.filter import Sql92Filter, Sql92ParseError, compile_sql92
from processors.filter.cache import INLINE_LIMIT, compile_offloaded
from processors.pull import build_subscription
from processors.send_back import dead_letter_header
from proxy.common import (
    Code,
    RpcError,
    check_group,
    check_topic,
    code_of_broker_refusal,
    peer_of,
    proxy_error,
    proxy_status,
    routed_perm,
    status,
    status_of_relayed_answer,
    topic_not_found,
)
from proxy.config import ProxyConfig
from proxy.convert import grpc_message
from proxy.local import LocalInvoker
from proxy.pb import definition, service
from proxy.renew import RenewTable
from proxy.route import BrokerQueues
from proxy.sessions import ClientSession, SessionTable
from remoting.codec.bodies.broker_metadata import PERM_READ, PERM_WRITE, SubscriptionGroupConfig, TopicConfig
from remoting.codec.bodies.heartbeat import EXPRESSION_SQL92, EXPRESSION_TAG, SUB_ALL
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.topics import pop_retry_topic
from store.errors import PutRefusedError
from store.get_message import PropertyFilter

__all__ = ["Consuming", "check_names"]


@attrs.frozen
class _Receive:
    """A checked ReceiveMessage request."""

    group: str
    topic: str
    namespace: str
    invisible: int
    poll: float
    batch: int
    tags: frozenset[str] | None
    property_filter: PropertyFilter | None
    fifo: bool
    client_id: str
    #: the request asks for auto-renew and the proxy's ``enableProxyAutoRenew`` is on
    auto_renew: bool
    #: the request's ``attempt_id`` (the official clients send one per receive and repeat it on a retry), or None
    attempt_id: str | None
    #: the filter's expression and type, as the pop records the group's subscription
    expression: tuple[str, str] = ("", EXPRESSION_TAG)


_MAX_BATCH: Final = 32
_CLIENT_ID: Final = "x-mq-client-id"
_CLIENT_VERSION: Final = "x-mq-client-version"
#: ReceiveMessageActivity.ILLEGAL_POLLING_TIME_INTRODUCED_CLIENT_VERSION: older clients get BAD_REQUEST instead.
_ILLEGAL_POLLING_TIME_SINCE: Final = "5.0.3"
#: RocketMQ's ReceiveMessageResponseStreamWriter.NACK_INVISIBLE_TIME: a message a broken stream did not write is
#: visible again this soon.
NACK_INVISIBLE_MS: Final = 1000

log = logging.getLogger(__name__)


class Consuming:
    """Stateless between requests (the pop state is the broker's); writes go through ``invoker``."""

    def __init__(
        self, broker: BrokerState, config: ProxyConfig, pop: PopService, sessions: SessionTable, invoker: LocalInvoker
    ) -> None:
        self.broker = broker
        self.config = config
        self.pop = pop
        self.sessions = sessions
        self.invoker = invoker
        self.renew = RenewTable(pop, sessions, config)

    def _group(self, name: str) -> str:
        if not name or self.broker.groups.find(name) is None:
            raise RpcError(Code.CONSUMER_GROUP_NOT_FOUND, f"group {name!r} not found")
        return name

    def _topic(self, name: str) -> TopicConfig:
        config = self.broker.topics.get(name)
        if config is None:
            raise topic_not_found(name)
        return config

    def _filter(
        self, topic: str, expression: Any, compiled: Sql92Filter | Sql92ParseError | None = None
    ) -> tuple[frozenset[str] | None, PropertyFilter | None]:
        """The tags (``None``: any) or the SQL92 property filter of a receive, in RocketMQ 5's grammar (with CONTAINS,
        STARTSWITH, ENDSWITH; ``compiled``: compiled already, or its parse error); ILLEGAL_FILTER_EXPRESSION when it
        does not parse. SQL92 is served whatever ``enablePropertyFilter`` says, as RocketMQ 5's PopMessageProcessor
        does."""
        if expression.type == definition.FilterType.SQL:
            try:
                if compiled is None:
                    compiled = compile_sql92(expression.expression, string_operators=True)
            except Sql92ParseError as exc:
                compiled = exc
            if isinstance(compiled, Sql92ParseError):  # the memo's error is not raised: its traceback would grow
                raise RpcError(Code.ILLEGAL_FILTER_EXPRESSION, str(compiled))
            return None, compiled.matches_raw
        try:
            subscription = build_subscription(topic, expression.expression or "*", "TAG")
        except ValueError as exc:
            raise RpcError(Code.ILLEGAL_FILTER_EXPRESSION, str(exc)) from None
        return (None if subscription.sub_string == SUB_ALL else frozenset(subscription.tags_set)), None

    def _invisible_ms(self, req: Any) -> int:
        """ReceiveMessageActivity (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/consumer/
        ReceiveMessageActivity.java): an auto-renew receive gets ``defaultInvisibleTimeMills`` while
        ``enableProxyAutoRenew`` is on; any other's ``invisible_duration`` (0 when missing) must lie within
        [minInvisibleTimeMillsForRecv, maxInvisibleTimeMills] (:meth:`_check_invisible`), else
        ILLEGAL_INVISIBLE_TIME."""
        config = self.config
        if req.auto_renew and config.enable_proxy_auto_renew:
            return config.default_invisible_time_mills
        invisible = req.invisible_duration.ToMilliseconds()
        self._check_invisible(invisible, config.min_invisible_time_mills_for_recv)
        return int(invisible)

    def _check_invisible(self, invisible: int, low: int) -> None:
        """GrpcValidator.validateInvisibleTime (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/common/
        GrpcValidator.java): ILLEGAL_INVISIBLE_TIME below ``low`` or above ``maxInvisibleTimeMills``, which bounds
        nothing when it is 0 or less."""
        if invisible < low:
            raise RpcError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min is {low}")
        high = self.config.max_invisible_time_mills
        if 0 < high < invisible:
            raise RpcError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {high}")

    def _poll_seconds(self, req: Any, deadline: float | None, settings: Any, client_version: str | None) -> float:
        """ReceiveMessageActivity's polling time (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/consumer/
        ReceiveMessageActivity.java): the request's ``long_polling_timeout``, else the time left before
        the deadline less half the request timeout of the client's ``settings`` (the time its answer has to reach
        the client; the official Go simple consumer sends no polling timeout), within [min, max]
        LongPollingTimeoutMillis and cut to the deadline; ILLEGAL_POLLING_TIME when less than the minimum is left,
        BAD_REQUEST to a client without a version or one older than 5.0.3 (compared as Java compares the strings),
        which predates that code. Without a deadline (RocketMQ's proxy fails such a request) the maximum."""
        config = self.config
        low = config.grpc_client_consumer_min_long_polling_timeout_millis / 1000
        high = config.grpc_client_consumer_max_long_polling_timeout_millis / 1000
        poll: float
        if req.HasField("long_polling_timeout"):
            poll = req.long_polling_timeout.ToMilliseconds() / 1000
        elif deadline is not None:
            request_timeout = 0 if settings is None else settings.request_timeout.ToMilliseconds()
            poll = deadline - request_timeout / 2000
        else:
            poll = high
        poll = min(max(poll, low), high)
        if deadline is not None and poll > deadline:
            poll = deadline
            if poll < low:
                old = client_version is None or client_version < _ILLEGAL_POLLING_TIME_SINCE
                raise RpcError(
                    Code.BAD_REQUEST if old else Code.ILLEGAL_POLLING_TIME,
                    "The deadline time remaining is not enough for polling, please check network condition",
                )
        return poll

    def receive_now(self, req: Any, metadata: dict[str, str], deadline: float | None) -> list[Any] | None:
        """One ReceiveMessage without waiting: its response stream, or ``None`` when nothing is visible yet and the
        caller should long-poll with :meth:`receive`; ``None`` too when the store waits for its puts (DLedger mode,
        SYNC_FLUSH, SYNC_MASTER): the pop's checkpoints are waited for in :meth:`receive`; ``None`` too for a long
        SQL92 filter, which :meth:`receive` compiles off the event loop."""
        if self.broker.store.waits_for_put(True) or _long_sql92(req.filter_expression):
            return None
        try:
            checked = self._check(req, metadata, deadline)
            popped = self._pop(checked)
        except RpcError as err:
            return [service.ReceiveMessageResponse(status=status(err.code, err.message)), _now_marker()]
        return self._stream(checked, popped) if popped else None

    async def receive(self, req: Any, metadata: dict[str, str], deadline: float | None) -> list[Any]:
        """The response stream of one ReceiveMessage (a status first, then messages, then a delivery time), after
        waiting up to the polling window for a message. A receive that would park past the broker's polling limits
        (:meth:`PopService.park`) answers TOO_MANY_REQUESTS "polling full", as ReceiveMessageResponseStreamWriter
        writes POLLING_FULL."""
        start = trio.current_time()
        compiled = await _compile_long_sql92(req.filter_expression)
        if deadline is not None:  # the compile took some of what the client waits
            deadline = max(0.0, deadline - (trio.current_time() - start))
        try:
            checked = self._check(req, metadata, deadline, compiled)
            end = trio.current_time() + checked.poll
            popped = await self._pop_landed(checked)
            if not popped and end > trio.current_time():
                group, topic = checked.group, checked.topic
                if not self.pop.park(group, topic):
                    raise RpcError(Code.TOO_MANY_REQUESTS, "polling full")
                try:
                    # until a matching arrival, or for a FIFO group an ack or a queue's batch in flight visible
                    # again (PopService.run_lock_timer), wakes it
                    while not popped and (left := end - trio.current_time()) > 0:
                        if self.pop.read_on:
                            # the pop stopped short of entries it did not read: read on at once (after letting the
                            # other clients' work run), as RocketMQ wakes a pop that left restNum > 0
                            await trio.lowlevel.checkpoint()
                        else:
                            await self.pop.wait_arrival(
                                [topic, pop_retry_topic(group, topic)],
                                left,
                                group,
                                checked.tags,
                                checked.property_filter,
                            )
                        popped = await self._pop_landed(checked)
                finally:
                    self.pop.unpark(group, topic)
        except RpcError as err:
            return [service.ReceiveMessageResponse(status=status(err.code, err.message)), _now_marker()]
        return self._stream(checked, popped)

    def _check(
        self,
        req: Any,
        metadata: dict[str, str],
        deadline: float | None,
        compiled: Sql92Filter | Sql92ParseError | None = None,
    ) -> _Receive:
        """The receive's checks in ReceiveMessageActivity's order (proxy/src/main/java/org/apache/rocketmq/proxy/
        grpc/v2/consumer/ReceiveMessageActivity.java): the polling time, the topic's and group's names
        (validateTopicAndConsumerGroup: a system topic or group is no consumer's, and popping the revive topic would
        take its checkpoints from the revive loop), the invisible time, the filter; then ConsumerProcessor.popMessage's
        (proxy/src/main/java/org/apache/rocketmq/proxy/processor/ConsumerProcessor.java): the topic's route and a
        readable queue in it; and last the group known, which is the broker's PopMessageProcessor's check."""
        session = self.sessions.sessions.get(metadata.get(_CLIENT_ID, ""))
        settings = None if session is None else session.settings
        known = self.broker.groups.get(req.group.name)  # read before the pop may auto-create it
        poll = self._poll_seconds(req, deadline, settings, metadata.get(_CLIENT_VERSION))
        topic = req.message_queue.topic.name
        check_names(topic, req.group.name)
        invisible = self._invisible_ms(req)
        tags, property_filter = self._filter(topic, req.filter_expression, compiled)
        _read_perm(self._topic(topic), self.broker.config.broker_permission)
        group = self._group(req.group.name)
        fifo = _fifo(known, session)
        return _Receive(
            group=group,
            topic=topic,
            namespace=req.message_queue.topic.resource_namespace,
            invisible=invisible,
            poll=poll,
            batch=min(max(req.batch_size, 1), _MAX_BATCH),
            tags=tags,
            property_filter=property_filter,
            fifo=fifo,
            client_id=metadata.get(_CLIENT_ID, ""),
            auto_renew=bool(req.auto_renew) and self.config.enable_proxy_auto_renew,
            attempt_id=req.attempt_id if req.HasField("attempt_id") else None,
            expression=(req.filter_expression.expression, _expression_type(req.filter_expression)),
        )

    async def _pop_landed(self, r: _Receive) -> list[Popped]:
        """:meth:`_pop`, answered once its checkpoints landed (:meth:`PopService.landed`: in DLedger mode, committed
        by a quorum or failed), as 5.3.3's PopMessageProcessor.appendCheckPoint puts them before the pop answers."""
        return await self.pop.written("ck", functools.partial(self._pop, r))

    def _pop(self, r: _Receive) -> list[Popped]:
        """The pop, its refusals as statuses: the broker's (:meth:`PopService.pop`'s checks, a checkpoint the timer
        refused) as RocketMQ's cluster-mode proxy answers a broker's refusal (:func:`code_of_broker_refusal`: a topic
        deleted during a long poll TOPIC_NOT_FOUND, an unknown group CONSUMER_GROUP_NOT_FOUND, NO_PERMISSION for a
        group whose ``consumeEnable`` is false INTERNAL_SERVER_ERROR), the store's INTERNAL_SERVER_ERROR; either way
        nothing is handed out and the offset does not move. Without what it moved to the DLQ
        (:meth:`_forward_exhausted`); MESSAGE_NOT_FOUND "no match message" when that was all."""
        try:
            popped = self.pop.pop(
                r.group, r.topic, r.batch, r.invisible, r.tags, fifo=r.fifo, property_filter=r.property_filter,
                attempt_id=r.attempt_id, expression=r.expression,
            )  # fmt: skip
        except RequestRejected as exc:
            raise RpcError(code_of_broker_refusal(exc.code), exc.remark) from None
        except PutRefusedError as exc:
            raise RpcError(Code.INTERNAL_SERVER_ERROR, f"{exc.put_status}: {exc}") from None
        limit = self.pop.max_attempts(r.group)
        exhausted = [p for p in popped if p.attempt > limit]
        for p in exhausted:
            self._forward_exhausted(r, p)
        if exhausted and len(exhausted) == len(popped):
            # ReceiveMessageResponseStreamWriter: a FOUND pop the filter left empty is answered at once
            raise RpcError(Code.MESSAGE_NOT_FOUND, "no match message")
        return [p for p in popped if p.attempt <= limit] if exhausted else popped

    def _forward_exhausted(self, r: _Receive, popped: Popped) -> None:
        """ConsumerProcessor.popMessage's TO_DLQ (PopMessageResultFilterImpl: attempts past the group's
        ``retryMaxTimes + 1``): not handed out but forwarded to the DLQ as ForwardMessageToDeadLetterQueue forwards
        (the broker's send-back, :meth:`PopService.dead_letter`), then acked. A refused forward is logged: the message
        stays invisible and comes back with the attempt raised, to be forwarded again, as in RocketMQ; so is a refused
        ACK record (the copy stays in the DLQ; the message comes back and is forwarded again)."""
        handle = popped.handle
        try:
            self.pop.dead_letter(r.group, handle.commit_log_offset, handle.real_topic(r.group, r.topic))
        except (RequestRejected, PutRefusedError) as exc:
            log.warning("moving %s of %s to the DLQ failed: %s", popped.message.msg_id, r.group, exc)
            return
        try:  # a refused ACK record is logged and the receive answers (proxy/src/main/java/org/apache/rocketmq/proxy/
            # processor/ConsumerProcessor.java popMessage acks the forwarded message without waiting on it)
            outcome = self.pop.ack(r.group, r.topic, handle)
        except PutRefusedError as exc:
            log.warning("moved %s of %s to the DLQ; its ack failed: %s", popped.message.msg_id, r.group, exc)
            return
        if outcome is not AckOutcome.OK:
            log.info("moved %s of %s to the DLQ; its ack answered %s", popped.message.msg_id, r.group, outcome.value)

    def _stream(self, r: _Receive, popped: list[Popped]) -> list[Any]:
        if not popped:
            return [
                service.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no new message")),
                _now_marker(),
            ]
        out = [service.ReceiveMessageResponse(status=status())]
        for p in popped:
            topic = self.pop.original_topic(r.group, p.message)
            message = grpc_message(p.message, topic, p.handle, p.attempt, r.namespace)
            if r.auto_renew and r.client_id:
                message_id = message.system_properties.message_id
                self.renew.add(r.client_id, r.group, r.topic, message_id, p.handle, p.attempt)
            out.append(service.ReceiveMessageResponse(message=message))
        out.append(_now_marker())
        return out

    def nack_unwritten(self, responses: list[Any], req: Any, metadata: dict[str, str]) -> None:
        """The messages of a ReceiveMessage stream that broke before they were written (the client went away):
        each becomes visible again after :data:`NACK_INVISIBLE_MS`, as RocketMQ's proxy does
        (ReceiveMessageResponseStreamWriter.processThrowableWhenWriteMessage), instead of after its whole invisible
        time. Not waited for, as processThrowableWhenWriteMessage leaves changeInvisibleTime's future unread; one
        whose auto-renewal is in flight is made visible by the renewal once over (:meth:`RenewTable.nack`). A refusal
        is logged; the message then comes back when its handle says."""
        group, topic, client = req.group.name, req.message_queue.topic.name, metadata.get(_CLIENT_ID, "")
        for response in responses:
            if not response.HasField("message"):
                continue
            props = response.message.system_properties
            try:
                text = self.renew.nack(client, group, props.message_id, props.receipt_handle, NACK_INVISIBLE_MS)
                if text is not None:
                    self.pop.change_invisible(group, topic, self._handle(text), NACK_INVISIBLE_MS)
            except (RpcError, PutRefusedError, RequestRejected) as exc:
                log.warning("nacking %s of %s after a broken receive stream failed: %s", props.message_id, group, exc)

    def _handle(self, text: str) -> ReceiptHandle:
        try:
            return ReceiptHandle.decode(text)
        except ValueError:
            raise RpcError(Code.INVALID_RECEIPT_HANDLE, "receipt handle is malformed") from None

    async def ack(self, req: Any, metadata: dict[str, str]) -> Any:
        """AckMessageActivity.ackMessageOneByOne: the names checked (:func:`check_names`), then each entry answered
        on its own (a handle that does not decode is that entry's INVALID_RECEIPT_HANDLE; an ACK record the store
        refuses, a full disk, that entry's INTERNAL_SERVER_ERROR, as processAckMessage turns whatever one entry's ack
        throws into that entry's status: proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/consumer/
        AckMessageActivity.java). Answered once the ACK records landed (:meth:`PopService.landed`: in DLedger mode,
        committed by a quorum or failed; one that failed is logged and its entry still OK, as the broker's
        AckMessageProcessor answers it SUCCESS), after any auto-renewal of its handles in flight
        (:meth:`RenewTable.settled`); without suspending when nothing is to be waited for."""
        group, topic = req.group.name, req.topic.name
        check_names(topic, group)
        response = service.AckMessageResponse()
        handles = [(entry.message_id, entry.receipt_handle) for entry in req.entries]
        await self.renew.settled(metadata.get(_CLIENT_ID, ""), group, handles)
        await self.pop.written("ack", functools.partial(self._ack_entries, req, metadata, response))
        response.status.CopyFrom(_overall_ack_status({e.status.code for e in response.entries}))
        return response

    def _ack_entries(self, req: Any, metadata: dict[str, str], response: Any) -> None:
        group, topic = req.group.name, req.topic.name
        for entry in req.entries:
            result = response.entries.add(message_id=entry.message_id, receipt_handle=entry.receipt_handle)
            try:
                text = self.renew.take(metadata.get(_CLIENT_ID, ""), group, entry.message_id, entry.receipt_handle)
                outcome = self.pop.ack(group, topic, self._handle(text))
                result.status.CopyFrom(_ack_status(outcome))
            except RpcError as err:
                result.status.CopyFrom(status(err.code, err.message))
            except PutRefusedError as exc:
                result.status.CopyFrom(status(Code.INTERNAL_SERVER_ERROR, f"ack failed: {exc.put_status}: {exc}"))

    async def change_invisible(self, req: Any, metadata: dict[str, str]) -> Any:
        """ChangeInvisibleDurationActivity: the names checked (:func:`check_names`), then the invisible time. A new
        CK the broker cannot park (past a lowered ``timerMaxDelaySec``, a full disk) answers, as RocketMQ 5.3's
        proxy does for the broker's SYSTEM_ERROR, INTERNAL_SERVER_ERROR "changeInvisibleDuration failed: status is
        abnormal"; so does a new CK that did not land in time (:meth:`PopService.change_landed`: in DLedger mode, not
        committed by a quorum), the broker's SYSTEM_ERROR too. The old handle stays good (the old CK is acked only
        after the new one is stored). An auto-renewal of the handle in flight is waited for first
        (:meth:`RenewTable.settled`), as removeReceiptHandle waits for the handle's lock."""
        check_names(req.topic.name, req.group.name)
        invisible = req.invisible_duration.ToMilliseconds()
        self._check_invisible(invisible, 0)
        handles = [(req.message_id, req.receipt_handle)]
        await self.renew.settled(metadata.get(_CLIENT_ID, ""), req.group.name, handles)
        text = self.renew.take(metadata.get(_CLIENT_ID, ""), req.group.name, req.message_id, req.receipt_handle)
        handle = self._handle(text)
        try:
            with self.pop.writes() as ends:
                outcome, renewed = self.pop.change_invisible(req.group.name, req.topic.name, handle, int(invisible))
        except (RequestRejected, PutRefusedError) as exc:
            log.warning("changing the invisibility of %s of %s refused: %s", req.message_id, req.group.name, exc)
            return _change_failed()
        if not await self.pop.change_landed(ends):
            return _change_failed()
        answered = _ack_status(outcome)
        if answered.code == Code.INTERNAL_SERVER_ERROR:
            # AckStatus.NO_EXIST: ChangeInvisibleDurationActivity.convertToChangeInvisibleDurationResponse words it
            # its own way (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/consumer/
            # ChangeInvisibleDurationActivity.java)
            answered = status(Code.INTERNAL_SERVER_ERROR, "changeInvisibleDuration failed: status is abnormal")
        response = service.ChangeInvisibleDurationResponse(status=answered)
        if renewed is not None:
            response.receipt_handle = renewed.encode()
        return response

    async def forward_to_dlq(self, req: Any, metadata: dict[str, str]) -> Any:
        """ForwardMessageToDLQActivity: the topic and group names checked (ILLEGAL_TOPIC, ILLEGAL_CONSUMER_GROUP),
        then ProducerProcessor.forwardMessageToDeadLetterQueue: CONSUMER_SEND_MSG_BACK with delay level -1 through the
        broker's send-back processor, which checks and writes as for a 4.x consumer (group not found, broker not
        writable, a group without retry queues answering SUCCESS with nothing written). Its answer is the answer
        (:func:`status_of_relayed_answer`); a SUCCESS is then acked, best effort (the official clients forward again
        on anything but OK: answering a failed ack, an expired handle's or one the store refused, stored one more copy
        each time)."""
        group, topic = req.group.name, req.topic.name
        check_names(topic, group)
        client = metadata.get(_CLIENT_ID, "")
        await self.renew.settled(client, group, [(req.message_id, req.receipt_handle)])
        handle = self._handle(self.renew.take(client, group, req.message_id, req.receipt_handle))
        header = dead_letter_header(group, handle.commit_log_offset, handle.real_topic(group, topic), req.message_id)
        send_back = request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields())
        answer = await self.invoker.invoke(send_back, peer_of(metadata))
        if answer.code == ResponseCode.SUCCESS:
            # Whatever the ack does, a refused ACK record too: the copy is stored, and an error answered would make
            # the client store another (proxy/src/main/java/org/apache/rocketmq/proxy/processor/ProducerProcessor.java
            # acks in whenCompleteAsync, its result unread).
            try:
                outcome = self.pop.ack(group, topic, handle)
                if outcome not in (AckOutcome.OK, AckOutcome.STALE):
                    log.info("forwarded %s of %s to the DLQ; its ack answered %s", req.message_id, group, outcome.value)
            except PutRefusedError as exc:
                log.warning("forwarded %s of %s to the DLQ; its ack failed: %s", req.message_id, group, exc)
        answered = status_of_relayed_answer(answer.code, answer.remark)
        return service.ForwardMessageToDeadLetterQueueResponse(status=answered)

    def query_assignment(self, req: Any, queues: list[BrokerQueues] | None) -> Any:
        """RouteActivity.queryAssignment (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/route/
        RouteActivity.java) over ``queues``, the topic's queues by broker (:meth:`proxy.route.ClusterRoutes.queues`,
        the names checked before): TOPIC_NOT_FOUND without any; each broker name with a readable queue assigned at its
        master's endpoint, once with queue id -1, or for an orderly group once per read queue; FORBIDDEN "no readable
        queue" when no broker has one."""
        if queues is None:
            raise topic_not_found(req.topic.name)
        group = self.broker.groups.get(req.group.name)  # read only: Java's LocalMetadataService creates nothing
        orderly = group is not None and group.consume_message_orderly
        response = service.QueryAssignmentResponse(status=status())
        for entry in queues:
            master = entry.master
            if not entry.perm & PERM_READ or entry.read_queue_nums <= 0 or master is None:
                continue
            broker = definition.Broker(name=entry.name, id=0, endpoints=master)
            for qid in range(entry.read_queue_nums) if orderly else [-1]:
                queue = response.assignments.add().message_queue
                queue.topic.CopyFrom(req.topic)
                queue.id = qid
                queue.permission = _permission(entry.perm)
                queue.broker.CopyFrom(broker)
        if not response.assignments:
            raise RpcError(Code.FORBIDDEN, "no readable queue")
        return response


def _fifo(group: SubscriptionGroupConfig | None, session: ClientSession | None) -> bool:
    """Whether a receive pops orderly: ``subscription.fifo`` of the Settings as GrpcClientSettingsManager
    .getClientSettings merges them (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/common/
    GrpcClientSettingsManager.java), which ReceiveMessageActivity reads: the group's ``consumeMessageOrderly`` once it
    exists (mergeSubscriptionData), whatever the client asked; before that, the client's own flag."""
    if group is not None:
        return group.consume_message_orderly
    return session is not None and session.fifo


def _long_sql92(expression: Any) -> bool:
    return expression.type == definition.FilterType.SQL and len(expression.expression) >= INLINE_LIMIT


async def _compile_long_sql92(expression: Any) -> Sql92Filter | Sql92ParseError | None:
    """A receive's long SQL92 filter compiled in a worker thread (:func:`~processors.filter.cache.compile_offloaded`),
    as RocketMQ 5's PopMessageProcessor parses it on its pop thread (ConsumerFilterManager.build): the servicer's
    compile on an executor thread leaves it memoised, but the memo may have let it go since (a short one compiles
    inline). ``None``: not SQL92."""
    if expression.type != definition.FilterType.SQL:
        return None
    return await compile_offloaded(expression.expression, string_operators=True)


def _expression_type(expression: Any) -> str:
    """GrpcConverter.buildExpressionType: SQL is SQL92, anything else TAG."""
    return EXPRESSION_SQL92 if expression.type == definition.FilterType.SQL else EXPRESSION_TAG


def _read_perm(config: TopicConfig, broker_perm: int) -> int:
    """The topic's permission as its route shows it (:func:`routed_perm`); RpcError FORBIDDEN "no readable queue"
    without a readable queue, as RocketMQ's proxy answers a receive (ReceiveMessageQueueSelector finds none)."""
    perm = routed_perm(config.perm, broker_perm)
    if not perm & PERM_READ or config.read_queue_nums <= 0:
        raise proxy_error(Code.FORBIDDEN, "no readable queue")  # ConsumerProcessor.popMessage's ProxyException
    return perm


def check_names(topic: str, group: str) -> None:
    """GrpcValidator.validateTopicAndConsumerGroup, which every consumer RPC runs first: ILLEGAL_TOPIC for an illegal
    or system topic, then ILLEGAL_CONSUMER_GROUP for an illegal or system group (raised as RpcError)."""
    check_topic(topic)
    check_group(group)


def _permission(perm: int) -> Any:
    """RouteActivity.convertToPermission."""
    readable, writable = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    if readable and writable:
        return definition.Permission.READ_WRITE
    if readable:
        return definition.Permission.READ
    return definition.Permission.WRITE if writable else definition.Permission.NONE


def _overall_ack_status(codes: set[int]) -> Any:
    """AckMessageActivity.setAckResponseStatus (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/consumer/
    AckMessageActivity.java): the one code of all entries with its name as the message, MULTIPLE_RESULTS for mixed
    codes, INTERNAL_SERVER_ERROR "ack message result is empty" for a request without entries."""
    if len(codes) > 1:
        return status(Code.MULTIPLE_RESULTS, Code.Name(Code.MULTIPLE_RESULTS))
    if codes:
        [code] = codes
        return status(code, Code.Name(code))
    return status(Code.INTERNAL_SERVER_ERROR, "ack message result is empty")


def _change_failed() -> Any:
    """What RocketMQ 5.3's proxy answers for the broker's SYSTEM_ERROR to a change of invisibility."""
    return service.ChangeInvisibleDurationResponse(
        status=status(Code.INTERNAL_SERVER_ERROR, "changeInvisibleDuration failed: status is abnormal")
    )


def _ack_status(outcome: AckOutcome) -> Any:
    if outcome in (AckOutcome.OK, AckOutcome.STALE):
        return status()
    if outcome is AckOutcome.EXPIRED:
        return proxy_status(Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired")  # AbstractProcessor's
    return status(Code.INTERNAL_SERVER_ERROR, "ack failed: status is abnormal")


def _now_marker() -> Any:
    marker = service.ReceiveMessageResponse()
    marker.delivery_timestamp.FromMilliseconds(int(time.time() * 1000))
    return marker
