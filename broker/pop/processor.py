"""Pop consumption over remoting: POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME,
NOTIFICATION, PEEK_MESSAGE and POLLING_INFO as RocketMQ 5.3.3's PopMessageProcessor, AckMessageProcessor,
ChangeInvisibleTimeProcessor, NotificationProcessor, PeekMessageProcessor and PollingInfoProcessor answer them
(broker/src/main/java/org/apache/rocketmq/broker/processor/), over the broker's one
:class:`~broker.pop.PopService` (the gRPC front door's too; docs/grpc.md#pop-over-remoting).

A pop's body is a pull's: the stored records, each with property ``POP_CK`` holding its handle in
``ExtraInfoUtil.buildExtraInfo`` form (:meth:`ReceiptHandle.extra_info`), which the client sends back as
``extraInfo``; a message of the pop retry topic goes out under its original topic (5.3.3 rewrites it so too). The
header's ``startOffsetInfo`` / ``msgOffsetInfo`` / ``orderCountInfo`` say the same per queue, as Java's do. An orderly
message carries its delivery attempt as ``reconsumeTimes`` (Java's client reads it from ``orderCountInfo``).

A pop that finds nothing waits for an arrival until ``bornTime + pollTime`` in the processor's own nursery, not in a
pool worker (PopLongPollingService suspends the request), then answers POLLING_TIMEOUT "NO_MESSAGE_IN_QUEUE"; past the
broker's polling limits it answers POLLING_FULL at once. A NOTIFICATION waits so too, for a queue a pop could read.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import attrs
import trio

from broker.context import BrokerState
from broker.pop import AckOutcome, Popped, PopService, ReceiptHandle
from broker.pop.receipt import FIFO_REVIVE_QID, TOPIC_TYPE_RETRY
from processors.common import RequestRejected, parse_header
from processors.filter import Sql92Filter, Sql92ParseError, compile_sql92
from processors.filter.cache import compile_offloaded
from processors.pull import build_subscription
from remoting.codec.bodies.heartbeat import EXPRESSION_SQL92, EXPRESSION_TAG, SUB_ALL
from remoting.codec.bodies.pop import BatchAck, BatchAckMessageRequestBody
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.errors import CodecError, HeaderFieldError, PropertiesTooLongError
from remoting.codec.headers.base import Header
from remoting.codec.headers.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    NotificationRequestHeader,
    NotificationResponseHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from remoting.codec.message import encode_record
from remoting.codec.record_copy import raw_properties, record_from_stored
from remoting.codec.topics import pop_normal_topic, pop_retry_topic
from remoting.errors import RemotingConnectError
from remoting.processor import RequestContext
from store.errors import PutRefusedError
from store.get_message import PropertyFilter
from store.metadata_files import PERM_READ

__all__ = ["PROPERTY_POP_CK", "AckMessageProcessor", "PopMessageProcessor"]

log = logging.getLogger(__name__)

#: The message property holding a popped message's handle (common/.../message/MessageConst.java PROPERTY_POP_CK).
PROPERTY_POP_CK: Final = "POP_CK"
#: 5.3.3's ``FAQUrl.suggestTodo(FAQUrl.APPLY_TOPIC_URL)`` (common/src/main/java/org/apache/rocketmq/common/help/).
FAQ_SUFFIX_5: Final = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
#: What a pop that found nothing answers (GetMessageStatus.NO_MESSAGE_IN_QUEUE's name).
_NO_MESSAGE: Final = "NO_MESSAGE_IN_QUEUE"
#: Ours: how often the long polls of closed connections are ended (the pull hold service's check interval).
_CLOSED_CHECK_S: Final = 5.0
#: PopMessageRequestHeader.isTimeoutTooMuch: a request this long past ``bornTime + pollTime`` (ms) is refused.
_TOO_LATE_MS: Final = 500

PopOf = Callable[[], PopService]
H = TypeVar("H", bound=Header)
#: A pop's tags (``None``: any) and SQL92 filter.
_Filters = tuple[frozenset[str] | None, PropertyFilter | None]


def _peer(ctx: RequestContext) -> str:
    """``channel.remoteAddress()`` as Java prints it in remarks."""
    host, port = ctx.remote_address[:2]
    return f"/{host}:{port}"


def _alive(ctx: RequestContext) -> Callable[[], bool]:
    """Whether the request's client can still be answered (a wake passes over one gone: PopLongPollingService)."""
    return lambda: not ctx.connection.closed


def _with_faq(rejected: RequestRejected) -> RequestRejected:
    """The pop service's refusal with the FAQ link 5.3.3's processors append to an unknown topic or group."""
    if rejected.code in (ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST):
        return RequestRejected(rejected.code, f"{rejected.remark.rstrip()} {FAQ_SUFFIX_5}")
    return rejected


class PopMessageProcessor:
    """Serves POP_MESSAGE; ``pop_of`` gives the broker's pop service (its revive loop running). Run :meth:`run` for
    the long-polling pops. See the module docstring."""

    REQUEST_CODES: Final = (
        RequestCode.POP_MESSAGE,
        RequestCode.NOTIFICATION,
        RequestCode.PEEK_MESSAGE,
        RequestCode.POLLING_INFO,
    )

    def __init__(self, broker: BrokerState, pop_of: PopOf) -> None:
        self.broker = broker
        self.pop_of = pop_of
        self._nursery: trio.Nursery | None = None
        #: the long polls running, each by its cancel scope, with its request's context (:meth:`_drop_closed`)
        self._parked: dict[trio.CancelScope, RequestContext] = {}
        self._any_parked = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the long-polling pops and notifications until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._drop_closed)
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None

    def _park(self, ctx: RequestContext, request: RemotingCommand, wait: Callable[[], Awaitable[None]]) -> None:
        """Run the long poll ``wait`` in the processor's nursery, its request suspended (out of the connection's
        request budget and labelled long polling, as a parked pull)."""
        assert self._nursery is not None
        ctx.connection.mark_suspended(request.opaque)
        self._nursery.start_soon(self._parked_run, ctx, wait)
        self._any_parked.set()

    async def _parked_run(self, ctx: RequestContext, wait: Callable[[], Awaitable[None]]) -> None:
        with trio.CancelScope() as scope:
            self._parked[scope] = ctx
            try:
                await wait()
            finally:
                del self._parked[scope]

    async def _drop_closed(self) -> None:
        """Every :data:`_CLOSED_CHECK_S` seconds while any waits, end the long polls whose connection closed: nobody
        can be answered, and each held a polling slot (``popPollingSize``, ``maxPopPollingSize``) until an arrival or
        the end of the window its client chose (the pull hold service drops such pulls likewise; PopLongPollingService
        keeps them until then)."""
        while True:
            await self._any_parked.wait()
            await trio.sleep(_CLOSED_CHECK_S)
            for scope, ctx in list(self._parked.items()):
                if ctx.connection.closed:
                    scope.cancel()
            if not self._parked:
                self._any_parked = trio.Event()

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.NOTIFICATION:
            return self._notification(ctx, request)
        if request.code in (RequestCode.PEEK_MESSAGE, RequestCode.POLLING_INFO):
            try:
                return (
                    self._peek(ctx, request) if request.code == RequestCode.PEEK_MESSAGE else self._info(ctx, request)
                )
            except RequestRejected as rejected:
                return rejected.to_response(request)
        pop = self.pop_of()
        try:
            header = _parse_born(PopMessageRequestHeader, request, pop.now_ms())
            if pop.now_ms() - header.born_time - header.poll_time > _TOO_LATE_MS:
                raise RequestRejected(
                    ResponseCode.POLLING_TIMEOUT,
                    f"the broker[{self.broker.config.broker_ip1}] pop message is timeout too much",
                )
            self._check(ctx, pop, header)
            filters = _filter(header, await _compile_long_sql92(header))
            popped = await self._pop_landed(ctx, pop, header, filters)
        except RequestRejected as rejected:
            return rejected.to_response(request)
        if popped or header.poll_time <= 0 or self._nursery is None:
            return self._answer(request, pop, header, popped)
        if ctx.connection.closed:  # queued before its connection closed: nobody to answer, nothing to park
            return None
        if not pop.park(header.consumer_group, header.topic, header.queue_id):
            return self._answer(request, pop, header, [], ResponseCode.POLLING_FULL)
        self._park(ctx, request, functools.partial(self._long_poll, ctx, request, pop, header, filters))
        return None

    @staticmethod
    def _check(ctx: RequestContext, pop: PopService, header: PopMessageRequestHeader) -> None:
        """The pop service's checks of the request, the topic, the queue and the group, then the pop's subscription
        recorded, before the expression is parsed, in PopMessageProcessor.processRequest's order (5.3.3): a malformed
        SQL92 expression sent to an unknown topic is TOPIC_NOT_EXIST, and one refused as SUBSCRIPTION_PARSE_FAILED is
        recorded all the same (FilterAPI.build, then compensateSubscribeData, then ConsumerFilterManager.build)."""
        try:
            pop.check_pop(header.consumer_group, header.topic, header.max_msg_nums, header.queue_id, _peer(ctx))
        except RequestRejected as rejected:
            raise _with_faq(rejected) from None
        pop.compensate(header.consumer_group, header.topic, header.exp or "", header.exp_type or EXPRESSION_TAG)

    def _pop(
        self, ctx: RequestContext, pop: PopService, header: PopMessageRequestHeader, filters: _Filters
    ) -> list[Popped]:
        tags, property_filter = filters
        if header.max_msg_nums <= 0:  # popMsgFromQueue stops once it holds maxMsgNums: none
            return []
        try:
            return pop.pop(
                header.consumer_group, header.topic, header.max_msg_nums, header.invisible_time, tags,
                fifo=header.order, property_filter=property_filter, attempt_id=header.attempt_id,
                queue_id=header.queue_id, peer=_peer(ctx), init_mode=header.init_mode,
                expression=(header.exp or "", header.exp_type or EXPRESSION_TAG),
            )  # fmt: skip
        except RequestRejected as rejected:
            raise _with_faq(rejected) from None
        except PutRefusedError as exc:  # a checkpoint the store refused: nothing was handed out
            raise RequestRejected(ResponseCode.SYSTEM_ERROR, f"{exc.put_status}: {exc}") from None

    async def _pop_landed(
        self, ctx: RequestContext, pop: PopService, header: PopMessageRequestHeader, filters: _Filters
    ) -> list[Popped]:
        """:meth:`_pop`, once its checkpoints landed (:meth:`PopService.written`)."""
        return await pop.written("ck", functools.partial(self._pop, ctx, pop, header, filters))

    async def _long_poll(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        pop: PopService,
        header: PopMessageRequestHeader,
        filters: _Filters,
    ) -> None:
        """Wait for an arrival and pop again until something is found or the polling window ends, then answer. A
        client gone meanwhile gets nothing popped for it (PopLongPollingService wakes no request whose channel is
        inactive)."""
        group, topic = header.consumer_group, header.topic
        try:
            # Read again first: a message may have come between process()'s read and this task's start, and nothing
            # waited for it yet (PopLongPollingService files the request in the processor's own call).
            popped = [] if ctx.connection.closed else await self._pop_landed(ctx, pop, header, filters)
            while not popped and (left := (header.born_time + header.poll_time - pop.now_ms()) / 1000) > 0:
                if pop.read_on:
                    await trio.lowlevel.checkpoint()
                else:
                    await pop.wait_arrival(
                        [topic, pop_retry_topic(group, topic)],
                        left,
                        group,
                        *filters,
                        queue_id=header.queue_id,
                        alive=_alive(ctx),
                    )
                if ctx.connection.closed:
                    return
                popped = await self._pop_landed(ctx, pop, header, filters)
            answer = self._answer(request, pop, header, popped)
        except RequestRejected as rejected:
            answer = rejected.to_response(request)
        except Exception as exc:  # a task of the processor's nursery: a failure answers, it never stops the broker
            log.warning("long-polling pop of %s on %s failed", group, topic, exc_info=True)
            answer = request.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        finally:
            pop.unpark(group, topic, header.queue_id)
        _answer_late(ctx, answer)

    def _notification(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        """NOTIFICATION: SUCCESS with ``hasMsg`` once a pop could find something or at ``bornTime + pollTime``
        (``pollingFull`` past the polling limits), after NotificationProcessor's checks."""
        pop = self.pop_of()
        try:
            header = _parse_born(NotificationRequestHeader, request, pop.now_ms())
            self._check_peeking(ctx, header)
        except RequestRejected as rejected:
            return rejected.to_response(request)
        group, topic = header.consumer_group, header.topic
        found = pop.has_message(group, topic, header.queue_id, header.attempt_id, fifo=header.order)
        if found or header.born_time + header.poll_time <= pop.now_ms() or self._nursery is None:
            return _has_msg(request, found)
        if ctx.connection.closed:
            return None
        if not pop.park(group, topic, header.queue_id, notification=True):
            return _has_msg(request, False, polling_full=True)
        self._park(ctx, request, functools.partial(self._long_notification, ctx, request, pop, header))
        return None

    def _check_peeking(
        self,
        ctx: RequestContext,
        header: NotificationRequestHeader | PeekMessageRequestHeader | PollingInfoRequestHeader,
    ) -> None:
        """NotificationProcessor's, PeekMessageProcessor's and PollingInfoProcessor's checks in their order, with their
        codes and remarks."""
        config, ip = self.broker.topics.get(header.topic), self.broker.config.broker_ip1
        if not self.broker.config.broker_permission & PERM_READ:
            raise RequestRejected(ResponseCode.NO_PERMISSION, f"the broker[{ip}] peeking message is forbidden")
        if config is None:
            raise _no_topic(header.topic)
        if not config.perm & PERM_READ:
            raise RequestRejected(ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] peeking message is forbidden")
        if header.queue_id >= config.read_queue_nums:
            raise _illegal_queue(
                ResponseCode.INVALID_PARAMETER, ctx, header.topic, header.queue_id, config.read_queue_nums
            )
        group = self.broker.groups.find(header.consumer_group)
        if group is None:
            raise RequestRejected(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{header.consumer_group}] does not exist, {FAQ_SUFFIX_5}",
            )
        if not group.consume_enable:
            raise RequestRejected(
                ResponseCode.NO_PERMISSION, f"subscription group no permission, {header.consumer_group}"
            )

    def _peek(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """PEEK_MESSAGE: SUCCESS "FOUND" with the stored records as they are (no ``POP_CK``: nothing was popped),
        else PULL_NOT_FOUND "NO_MESSAGE_IN_QUEUE"; the header's ``restNum`` either way."""
        header = parse_header(PeekMessageRequestHeader, request)
        self._check_peeking(ctx, header)
        pop = self.pop_of()
        records, rest = pop.peek(header.consumer_group, header.topic, header.queue_id, header.max_msg_nums)
        fields = PopMessageResponseHeader(pop_time=0, invisible_time=0, revive_qid=0, rest_num=rest).to_ext_fields()
        if not records:
            return request.response(ResponseCode.PULL_NOT_FOUND, _NO_MESSAGE, fields)
        return request.response(ResponseCode.SUCCESS, "FOUND", fields, b"".join(records))

    def _info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """POLLING_INFO: how many pops (not notifications: PollingInfoProcessor reads PopMessageProcessor's polling
        service) wait on the request's key."""
        header = parse_header(PollingInfoRequestHeader, request)
        self._check_peeking(ctx, header)
        parked = self.pop_of().parked(header.consumer_group, header.topic, header.queue_id)
        return request.response(ResponseCode.SUCCESS, None, PollingInfoResponseHeader(parked).to_ext_fields())

    async def _long_notification(
        self, ctx: RequestContext, request: RemotingCommand, pop: PopService, header: NotificationRequestHeader
    ) -> None:
        """Wait for an arrival on the topic or its retry topic until a pop could find something or the window ends."""
        group, topic = header.consumer_group, header.topic
        try:
            found = pop.has_message(
                group, topic, header.queue_id, header.attempt_id, fifo=header.order
            )  # see _long_poll
            while not found and (left := (header.born_time + header.poll_time - pop.now_ms()) / 1000) > 0:
                await pop.wait_arrival(
                    [topic, pop_retry_topic(group, topic)],
                    left,
                    group,
                    queue_id=header.queue_id,
                    notification=True,
                    alive=_alive(ctx),
                )
                if ctx.connection.closed:
                    return
                found = pop.has_message(group, topic, header.queue_id, header.attempt_id, fifo=header.order)
            answer = _has_msg(request, found)
        except Exception as exc:  # a task of the processor's nursery: a failure answers, it never stops the broker
            log.warning("long-polling notification of %s on %s failed", group, topic, exc_info=True)
            answer = request.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        finally:
            pop.unpark(group, topic, header.queue_id, notification=True)
        _answer_late(ctx, answer)

    def _answer(
        self,
        request: RemotingCommand,
        pop: PopService,
        header: PopMessageRequestHeader,
        popped: list[Popped],
        code: ResponseCode = ResponseCode.POLLING_TIMEOUT,
    ) -> RemotingCommand:
        """SUCCESS with the messages, else ``code`` (POLLING_TIMEOUT, POLLING_FULL) "NO_MESSAGE_IN_QUEUE"."""
        revive_qid = FIFO_REVIVE_QID if header.order else 0
        pop_time = popped[0].handle.pop_time if popped else pop.now_ms()
        starts, offsets, counts = _offset_infos(popped, header.order)
        fields = PopMessageResponseHeader(
            pop_time=pop_time,
            invisible_time=header.invisible_time,
            revive_qid=revive_qid,
            rest_num=self._rest(pop, header),
            start_offset_info=starts,
            msg_offset_info=offsets,
            order_count_info=counts if header.order else None,
        ).to_ext_fields()
        if not popped:
            return request.response(code, _NO_MESSAGE, fields)
        group = header.consumer_group
        body = b"".join(_record(p, pop.original_topic(group, p.message)) for p in popped)
        return request.response(ResponseCode.SUCCESS, "FOUND", fields, body)

    def _rest(self, pop: PopService, header: PopMessageRequestHeader) -> int:
        """Entries of the queues popped that the group has not read (PopMessageProcessor's ``restNum``): the topic's,
        and the group's pop retry topic's when the pop read it (:attr:`PopService.retry_read`); orderly,
        those of a queue past where this pop's read of it ended (``maxOffset - nextBeginOffset``: what its filter
        skipped after the last message handed out is not counted), none of a queue blocked by a batch in flight
        (popMsgFromQueue adds nothing for a queue checkBlock finds blocked)."""
        config = self.broker.topics.get(header.topic)
        if config is None:
            return 0
        group, topic = header.consumer_group, header.topic
        qids = [header.queue_id] if header.queue_id >= 0 else range(config.read_queue_nums)
        if not header.order:
            retry = pop_retry_topic(group, topic)
            retry_config = self.broker.topics.get(retry) if pop.retry_read else None
            retry_qids = range(0 if retry_config is None else retry_config.read_queue_nums)
            rest = sum(pop.rest_of(group, retry, q) for q in retry_qids)
            return rest + sum(pop.rest_of(group, topic, q) for q in qids)
        store, rest = self.broker.store, 0
        for qid in qids:
            if qid in pop.read_ends:
                rest += max(store.max_offset_in_queue(topic, qid) - pop.read_ends[qid], 0)
            elif not pop.fifo_blocked(group, topic, qid):
                rest += pop.rest_of(group, topic, qid)
        return rest


def _no_topic(topic: str) -> RequestRejected:
    return RequestRejected(
        ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! {FAQ_SUFFIX_5}"
    )


def _illegal_queue(
    code: ResponseCode, ctx: RequestContext, topic: str, queue_id: int, read_queues: int
) -> RequestRejected:
    """The refusal of a queue id outside the topic's read queues, in 5.3.3's processors' words (``code``: each
    processor's own)."""
    return RequestRejected(
        code,
        f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{read_queues}] "
        f"consumer:[{_peer(ctx)}]",
    )


def _answer_late(ctx: RequestContext, answer: RemotingCommand) -> None:
    """Send a long poll's answer; a connection closed meanwhile drops it."""
    try:
        ctx.connection.send_nowait(answer)
    except RemotingConnectError:
        log.debug("answer to opaque %d dropped: connection %s closed", answer.opaque, ctx.connection)


async def _compile_long_sql92(header: PopMessageRequestHeader) -> Sql92Filter | Sql92ParseError | None:
    """A long SQL92 expression compiled in a worker thread (:func:`~processors.filter.cache.compile_offloaded`), as
    PopMessageProcessor (5.3.3) parses it on its pop thread (ConsumerFilterManager.build): the event loop every client
    shares keeps serving while a 10,000-term one compiles (a short one compiles inline). ``None``: not SQL92."""
    if header.exp_type != EXPRESSION_SQL92 or not header.exp:
        return None
    return await compile_offloaded(header.exp, string_operators=True)


def _filter(header: PopMessageRequestHeader, compiled: Sql92Filter | Sql92ParseError | None = None) -> _Filters:
    """The pop's tags (``None``: any) or SQL92 filter (``compiled``: its expression compiled already, or its parse
    error); SUBSCRIPTION_PARSE_FAILED "parse the consumer's subscription failed" when it does not parse
    (PopMessageProcessor's answer)."""
    exp = header.exp
    if not exp:
        return None, None
    try:
        if header.exp_type and header.exp_type != "TAG":
            if header.exp_type != EXPRESSION_SQL92:
                raise ValueError(header.exp_type)
            if isinstance(compiled, Sql92ParseError):  # the memo's error: not raised again, its traceback would grow
                raise ValueError("the expression does not parse")
            return None, (compiled or compile_sql92(exp, string_operators=True)).matches_raw
        subscription = build_subscription(header.topic, exp, "TAG")
    except (ValueError, Sql92ParseError):
        raise RequestRejected(
            ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed"
        ) from None
    return (None if subscription.sub_string == SUB_ALL else frozenset(subscription.tags_set)), None


def _parse_born(cls: type[H], request: RemotingCommand, now_ms: int) -> H:
    """The request's header; a missing or zero ``bornTime`` is now (PopMessageProcessor and NotificationProcessor
    set it so). A missing or bad field answers SYSTEM_ERROR naming it, as Java's decodeCommandCustomHeader does."""
    fields = request.ext_fields
    if fields.get("bornTime", "0") == "0":
        fields = {**fields, "bornTime": str(now_ms)}
    try:
        return cls.from_ext_fields(fields)
    except HeaderFieldError as exc:
        raise RequestRejected(ResponseCode.SYSTEM_ERROR, str(exc)) from None


def _has_msg(request: RemotingCommand, found: bool, *, polling_full: bool = False) -> RemotingCommand:
    fields = NotificationResponseHeader(has_msg=found, polling_full=polling_full).to_ext_fields()
    return request.response(ResponseCode.SUCCESS, None, fields)


def _illegal_orderly(
    ctx: RequestContext, broker: BrokerState, group: str, topic: str, handle: ReceiptHandle
) -> RequestRejected:
    """AckMessageProcessor.ackOrderly's MESSAGE_ILLEGAL for an offset the queue's delivery does not hold
    (ConsumerOrderInfoManager.commitAndNext answering -1)."""
    old = broker.offsets.query(group, topic, handle.queue_id)
    return RequestRejected(
        ResponseCode.MESSAGE_ILLEGAL,
        f"offset is illegal, key:{topic}@{group}@{handle.queue_id}, old:{old}, commit:{handle.offset}, next:-1, "
        f"{_peer(ctx)}",
    )


def _offset_infos(popped: list[Popped], order: bool) -> tuple[str, str, str]:
    """``startOffsetInfo``, ``msgOffsetInfo`` and ``orderCountInfo`` of a pop's messages: per (topic type, queue),
    ``"<type> <queueId> <start>"``, ``"<type> <queueId> <o1>,<o2>"`` and, orderly, ``"<type> qo<queueId>%<offset>
    <attempts - 1>"`` per message, ``;``-separated (ExtraInfoUtil.buildStartOffsetInfo, buildMsgOffsetInfo and
    buildQueueOffsetOrderCountInfo)."""
    queues: dict[tuple[int, int], list[Popped]] = {}
    for p in popped:
        queues.setdefault((p.handle.topic_type, p.handle.queue_id), []).append(p)
    starts = ";".join(f"{t} {q} {ps[0].handle.start_offset}" for (t, q), ps in queues.items())
    offsets = ";".join(f"{t} {q} " + ",".join(str(p.handle.offset) for p in ps) for (t, q), ps in queues.items())
    counts = ";".join(f"{p.handle.topic_type} qo{p.handle.queue_id}%{p.handle.offset} {p.attempt - 1}" for p in popped)
    return starts, offsets, counts if order else ""


def _record(popped: Popped, topic: str) -> bytes:
    """The stored record of a popped message as the client reads it: its ``POP_CK``, its original topic, its
    delivery attempt as ``reconsumeTimes``; queue, offsets and times as stored. A record whose properties leave no
    room for ``POP_CK`` goes without it (normal topic: Java's client builds it from the header's offset infos, as for
    every record 5.3.3 sends as stored) or not at all (retry topic: PopMessageProcessor's re-encoding fails and leaves
    it out; its checkpoint brings it back)."""
    msg, handle = popped.message, popped.handle
    props = raw_properties(msg, frozenset({PROPERTY_POP_CK}))
    ck = f"{PROPERTY_POP_CK}\x01{handle.extra_info()}"
    try:
        return _encoded(popped, topic, f"{props}\x02{ck}" if props else ck)
    except PropertiesTooLongError:
        if handle.topic_type == TOPIC_TYPE_RETRY:
            log.error("pop of %s: retry message at %d of queue %d left out, no room for POP_CK", topic,
                      handle.offset, handle.queue_id)  # fmt: skip
            return b""
        return _encoded(popped, topic, props)


def _encoded(popped: Popped, topic: str, props: str) -> bytes:
    msg = popped.message
    copy = record_from_stored(msg, topic, msg.queue_id, props, msg.store_host_packed, popped.attempt - 1)
    return encode_record(copy, msg.queue_offset, msg.commit_log_offset, msg.store_timestamp)


class AckMessageProcessor:
    """Serves ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME over ``pop_of``'s pop service."""

    REQUEST_CODES: Final = (
        RequestCode.ACK_MESSAGE,
        RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
        RequestCode.BATCH_ACK_MESSAGE,
    )

    def __init__(self, broker: BrokerState, pop_of: PopOf) -> None:
        self.broker = broker
        self.pop_of = pop_of

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        try:
            if request.code == RequestCode.ACK_MESSAGE:
                return await self._ack(ctx, request)
            if request.code == RequestCode.BATCH_ACK_MESSAGE:
                return await self._batch_ack(ctx, request)
            return await self._change(ctx, request)
        except RequestRejected as rejected:
            return rejected.to_response(request)

    def _check(self, ctx: RequestContext, header: AckMessageRequestHeader | ChangeInvisibleTimeRequestHeader) -> None:
        """AckMessageProcessor's and ChangeInvisibleTimeProcessor's first checks: the header's topic known
        (TOPIC_NOT_EXIST), its queue one of the topic's read queues (MESSAGE_ILLEGAL)."""
        config = self.broker.topics.get(header.topic)
        if config is None:
            raise _no_topic(header.topic)
        if not 0 <= header.queue_id < config.read_queue_nums:
            raise _illegal_queue(
                ResponseCode.MESSAGE_ILLEGAL, ctx, header.topic, header.queue_id, config.read_queue_nums
            )

    def _handle(self, header: AckMessageRequestHeader | ChangeInvisibleTimeRequestHeader) -> tuple[ReceiptHandle, str]:
        """The handle the request names and the topic the pop service knows it by. The header names the topic the
        message lies in (Java's DefaultMQPushConsumerImpl.ackAsync and the proxy's ConsumerProcessor put
        ExtraInfoUtil.getRealTopic there: the pop retry topic for a redelivery); the pop service wants the popped
        topic. An ``extraInfo`` that does not parse answers SYSTEM_ERROR, as Java's ExtraInfoUtil throwing out of
        the processor does."""
        try:
            handle = ReceiptHandle.from_extra_info(header.extra_info, header.queue_id, header.offset)
        except ValueError as exc:
            raise RequestRejected(ResponseCode.SYSTEM_ERROR, f"IllegalArgumentException: {exc}") from None
        group = header.consumer_group
        origin = pop_normal_topic(group, header.topic) if handle.topic_type == TOPIC_TYPE_RETRY else header.topic
        stored = self.broker.store.commit_log_offset_at(
            handle.real_topic(group, origin), handle.queue_id, handle.offset
        )
        return (handle if stored is None else attrs.evolve(handle, commit_log_offset=stored)), origin

    async def _ack(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = parse_header(AckMessageRequestHeader, request)
        self._check(ctx, header)
        store, topic, qid = self.broker.store, header.topic, header.queue_id
        low, high = store.min_offset_in_queue(topic, qid), store.max_offset_in_queue(topic, qid)
        if not low <= header.offset <= high:
            raise RequestRejected(
                ResponseCode.NO_MESSAGE,
                f"offset is illegal, key:{topic}@{qid}, commit:{header.offset}, store:{low}~{high}",
            )
        handle, origin = self._handle(header)
        acked = functools.partial(self._acked, header.consumer_group, origin, handle)
        outcome = await self.pop_of().written("ack", acked)
        if outcome is AckOutcome.NOT_FOUND and handle.fifo:
            raise _illegal_orderly(ctx, self.broker, header.consumer_group, topic, handle)
        return request.response(ResponseCode.SUCCESS)

    def _acked(self, group: str, topic: str, handle: ReceiptHandle) -> AckOutcome:
        try:
            return self.pop_of().ack(group, topic, handle, refuse_expired=False)
        except PutRefusedError as exc:
            raise RequestRejected(ResponseCode.SYSTEM_ERROR, f"{exc.put_status}: {exc}") from None

    async def _batch_ack(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """BATCH_ACK_MESSAGE: each entry acks ``startOffset + i`` for each bit ``i`` of its bit set, skipping offsets
        outside the queue (AckMessageProcessor.appendAck's batch branch); no entries answers NO_MESSAGE, an orderly
        offset its delivery does not hold MESSAGE_ILLEGAL, the other entries acked all the same."""
        try:
            body = BatchAckMessageRequestBody.decode(request.body) if request.body else None
        except CodecError as exc:
            raise RequestRejected(ResponseCode.SYSTEM_ERROR, f"JSONException: {exc}") from None
        if body is None or not body.acks:
            return request.response(ResponseCode.NO_MESSAGE)
        refused: RequestRejected | None = None
        pop = self.pop_of()
        with pop.writes() as ends:
            for entry in body.acks:
                for handle in self._batch_handles(entry, body.broker_name or self.broker.config.broker_name):
                    if self._acked(entry.consumer_group, entry.topic, handle) is AckOutcome.NOT_FOUND and handle.fifo:
                        refused = _illegal_orderly(ctx, self.broker, entry.consumer_group, entry.topic, handle)
        await pop.landed(ends, "ack")
        return request.response(ResponseCode.SUCCESS) if refused is None else refused.to_response(request)

    def _batch_handles(self, entry: BatchAck, broker_name: str) -> list[ReceiptHandle]:
        """The handles one entry acks: those of its offsets its queue holds. A ``retry`` other than "0" or "1"
        answers SYSTEM_ERROR (ExtraInfoUtil.getRealTopic's IllegalArgumentException; "2", the V2 retry topic, names
        no topic we pop from)."""
        if entry.retry not in ("0", "1"):
            raise RequestRejected(ResponseCode.SYSTEM_ERROR, "IllegalArgumentException: getRetry fail, format is wrong")
        topic_type = int(entry.retry)
        real = pop_retry_topic(entry.consumer_group, entry.topic) if topic_type == TOPIC_TYPE_RETRY else entry.topic
        store, qid = self.broker.store, entry.queue_id
        low, high = store.min_offset_in_queue(real, qid), store.max_offset_in_queue(real, qid)
        handles = []
        for offset in entry.offsets(low, high) if low >= 0 else ():
            stored = store.commit_log_offset_at(real, qid, offset)
            handles.append(ReceiptHandle(
                entry.start_offset, entry.pop_time, entry.invisible_time, entry.revive_queue_id, topic_type,
                broker_name, qid, offset, 0 if stored is None else stored,
            ))  # fmt: skip
        return handles

    async def _change(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = parse_header(ChangeInvisibleTimeRequestHeader, request)
        self._check(ctx, header)
        store, topic, qid = self.broker.store, header.topic, header.queue_id
        if not store.min_offset_in_queue(topic, qid) <= header.offset < store.max_offset_in_queue(topic, qid):
            return request.response(ResponseCode.NO_MESSAGE)
        handle, origin = self._handle(header)
        pop = self.pop_of()
        try:
            with pop.writes() as ends:
                outcome, renewed = pop.change_invisible(
                    header.consumer_group, origin, handle, header.invisible_time, refuse_expired=False
                )
        except (PutRefusedError, RequestRejected):
            # appendCheckPointThenAckOrigin's new CK refused (a full store, or HookUtils refusing its deliver time past
            # timerMaxDelaySec or with the timer off): a bare SYSTEM_ERROR, the old CK left alone
            return request.response(ResponseCode.SYSTEM_ERROR)
        if not await pop.change_landed(ends):
            return request.response(ResponseCode.SYSTEM_ERROR)
        if outcome is AckOutcome.NOT_FOUND:
            return request.response(ResponseCode.NO_MESSAGE)
        assert renewed is not None  # found, expired or not: renewed
        fields = ChangeInvisibleTimeResponseHeader(renewed.pop_time, renewed.invisible_time, renewed.revive_qid)
        return request.response(ResponseCode.SUCCESS, None, fields.to_ext_fields())
