"""PULL_MESSAGE (11): :class:`PullMessageProcessor`, with long polling through :class:`~processors.hold.HoldService`.

Checks, in Java's order (docs/protocol.md#79-pull-checks-and-results): broker readable, group known (auto-created when
allowed) and allowed to consume, topic known and readable, queue id within ``readQueueNums``, then the subscription:
parsed from the request when the SUBSCRIPTION flag is set (SUBSCRIPTION_PARSE_FAILED on a malformed expression),
otherwise the group's heartbeat subscription (SUBSCRIPTION_NOT_EXIST, NO_PERMISSION for a forbidden broadcast,
SUBSCRIPTION_NOT_LATEST). TAG expressions filter on the consume-queue tags code. SQL92 expressions are served when
``enablePropertyFilter`` is on (otherwise, and for other expression types, SYSTEM_ERROR as in Java): compiled once per
``(group, topic, subVersion)`` by :class:`~processors.filter.ConsumerFilterCache` and evaluated on each candidate's
properties read from its CommitLog record; a malformed one answers SUBSCRIPTION_PARSE_FAILED with the parser's message
when it came with the request, FILTER_DATA_NOT_EXIST (as Java) when it came from the heartbeat. With
``filterSupportRetry`` a pull of ``%RETRY%<group>`` also matches each message against the group's SQL92 subscription of
the topic it came from. A parked SQL92 pull wakes only for an arriving message its filter matches.

With ``enableLmq`` and ``enableMultiDispatch``, a pull of an ``%LMQ%`` topic while the store has more LMQ
ConsumeQueues than ``maxLmqConsumeQueueNum`` answers SYSTEM_ERROR ``store getMessage return null`` (Java's
DefaultMessageStore.getMessage returns null).

The store result maps to a code and ``nextBeginOffset`` by the store-status table of
docs/protocol.md#79-pull-checks-and-results. **Every** response, errors included, carries ``suggestWhichBrokerId``,
``nextBeginOffset``, ``minOffset`` and ``maxOffset`` (clients read them unconditionally). A FOUND body is the raw
CommitLog records concatenated, never re-encoded. The COMMIT flag stores ``commitOffset`` on the first execution only
(on a master). A PULL_NOT_FOUND with the SUSPEND flag on the first execution is parked in the hold service and answered
later (``process`` returns ``None``); the re-run neither suspends nor commits. An execution that finds an
admin's reset of its queue pending takes it and, under ``useServerSideResetOffset``, answers PULL_OFFSET_MOVED to
it without reading the store or committing (:meth:`PullMessageProcessor._answer_reset`). Every execution that reaches
the store goes to the statistics (a found pull or a miss) with its ``nextBeginOffset``, the queue's pull offset,
found or not, parked or not (RocketMQ 5's ``commitPullOffset`` in ``DefaultPullMessageResultHandler``).

:meth:`PullMessageProcessor.pull` is synchronous on purpose: between the store lookup and parking the request
nothing may await, or a message arriving in between would not wake it. So :meth:`PullMessageProcessor.process` first
compiles its long SQL92 expressions in a worker thread (:func:`~processors.filter.cache.compile_offloaded`): the
subscription's, and on a retry topic with ``filterSupportRetry`` the group's it matches retry messages with. One pull
shows its filter at most :data:`SQL92_EVALUATION_BUDGET` ``//`` the filter's cost candidates: a heavy expression
costs the event loop every connection shares a bounded time, as on a Java broker it costs one pull thread.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final

import trio

from processors.common import FAQ_SUFFIX, RequestRejected, parse_header
from processors.filter import ConsumerFilterCache, Sql92Filter, Sql92ParseError
from processors.filter.cache import Primed, compile_offloaded
from processors.hold import HeldPull, HoldService, TagFilter
from processors.offset_moved import put_offset_moved_event
from remoting.codec.bodies import MessageModel, SubscriptionData
from remoting.codec.bodies.heartbeat import EXPRESSION_SQL92, EXPRESSION_TAG, SUB_ALL
from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.headers.pull import PullMessageRequestHeader
from remoting.codec.message_properties import find_property, java_string_hash, java_trim
from remoting.codec.topics import RETRY_GROUP_TOPIC_PREFIX
from remoting.processor import RequestContext
from store.metadata_files import PERM_READ
from store.multi_dispatch import is_lmq
from store.results import GetResult, GetStatus

if TYPE_CHECKING:
    from processors.context import BrokerContext

__all__ = [
    "PULL_FLAG_COMMIT_OFFSET",
    "PULL_FLAG_SUBSCRIPTION",
    "PULL_FLAG_SUSPEND",
    "PullMessageProcessor",
    "SubscriptionParseError",
    "build_subscription",
    "tag_filter_of",
]

PULL_FLAG_COMMIT_OFFSET: Final = 0x1
PULL_FLAG_SUSPEND: Final = 0x2
PULL_FLAG_SUBSCRIPTION: Final = 0x4
#: Ours: what evaluating a pull's SQL92 filter may cost the event loop, in :attr:`Sql92Filter.cost` units (tree nodes
#: and property lookups; 0.1 to 0.3 us each: at most about 15 ms a pull), so that it sees at most ``budget // cost``
#: candidates. RocketMQ's DefaultMessageStore.getMessage
#: (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java) filters up to max(800, maxMsgNums) entries
#: whatever the expression costs, on one of its pull threads; here the scan runs on the loop every connection shares,
#: where a 2,000-term filter refusing 800 entries held every client for half a second, a 10,000-term one for 11 s. A
#: usual expression (under 64 units, about 15 terms) still sees the full 800; a cut scan answers NO_MATCHED_MESSAGE with
#: the offset to go on from (PULL_RETRY_IMMEDIATELY: the consumer pulls on at once).
SQL92_EVALUATION_BUDGET: Final = 800 * 64

#: Never read, as by Java's PullMessageProcessor: only the subscription's ``classFilterMode`` skips the tag filter.
PULL_FLAG_CLASS_FILTER: Final = 0x8

log = logging.getLogger(__name__)

_MASTER_ID: Final = 0
#: MessageConst.PROPERTY_RETRY_TOPIC: the topic a message of a retry topic was first sent to.
_RETRY_TOPIC: Final = b"RETRY_TOPIC"

#: A broker-side filter on a candidate's raw properties (from the CommitLog record, or as text on arrival).
RawFilter = Callable[[str | bytes | memoryview], bool]


class SubscriptionParseError(ValueError):
    """A tag expression that does not split into tags (Java's ``subString split error``)."""


class _SubVersions:
    """``subVersion`` of a new SubscriptionData: now in ms, as Java's field initialiser (System.currentTimeMillis()),
    but never the same twice in this process, so a subscription built later replaces an earlier one
    (ConsumerGroupInfo.updateSubscription takes only a larger subVersion) even within a millisecond."""

    def __init__(self) -> None:
        self._last = 0

    def next(self) -> int:
        self._last = max(time.time_ns() // 1_000_000, self._last + 1)
        return self._last


_SUB_VERSIONS: Final = _SubVersions()


def build_subscription(topic: str, sub_string: str | None, expression_type: str | None = None) -> SubscriptionData:
    """Java's ``FilterAPI.build`` for TAG expressions: ``*``/empty = all, else tags split on ``||`` and trimmed;
    ``sub_version`` stamped as a new Java SubscriptionData's (:class:`_SubVersions`).

    Raises :class:`SubscriptionParseError` for an expression with no tags at all (``"||"``) and for an empty
    non-TAG expression. A non-TAG expression is returned unparsed (the caller decides whether it can serve it).
    """
    kind = expression_type or EXPRESSION_TAG
    version = _SUB_VERSIONS.next()
    if kind != EXPRESSION_TAG:
        if not sub_string:
            raise SubscriptionParseError(f"Expression can't be null! {kind}")
        return SubscriptionData(topic=topic, sub_string=sub_string, expression_type=kind, sub_version=version)
    if not sub_string or sub_string == SUB_ALL:
        return SubscriptionData(topic=topic, sub_string=SUB_ALL, sub_version=version)
    parts = sub_string.split("||")
    if all(part == "" for part in parts):
        raise SubscriptionParseError("subString split error")
    tags = tuple(dict.fromkeys(t for t in map(java_trim, parts) if t))
    codes = tuple(java_string_hash(t) for t in tags)
    return SubscriptionData(topic=topic, sub_string=sub_string, tags_set=tags, code_set=codes, sub_version=version)


def tag_filter_of(subscription: SubscriptionData) -> TagFilter | None:
    """The consume-queue filter of a TAG subscription: ``None`` (everything matches) for ``*`` and class-filter mode;
    otherwise membership of the tags code in ``codeSet`` (recomputed from ``tagsSet`` when a client sent no codes)."""
    if subscription.class_filter_mode or subscription.sub_string in (SUB_ALL, ""):
        return None
    codes: Iterable[int] = subscription.code_set or (java_string_hash(t) for t in subscription.tags_set)
    # An expression with only blank tags (" || ") matches nothing, as Java's empty codeSet does.
    return frozenset(codes).__contains__


_STATUS_CODES: Final = {
    GetStatus.FOUND: ResponseCode.SUCCESS,
    GetStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}

#: The statuses whose next offset a master corrects and a slave (without ``offsetCheckInSlave``) does not.
_CORRECTED_STATUSES: Final = frozenset(
    {
        GetStatus.NO_MESSAGE_IN_QUEUE,
        GetStatus.NO_MATCHED_LOGIC_QUEUE,
        GetStatus.OFFSET_TOO_SMALL,
        GetStatus.OFFSET_OVERFLOW_ONE,
        GetStatus.OFFSET_OVERFLOW_BADLY,
        GetStatus.OFFSET_FOUND_NULL,
    }
)


class PullMessageProcessor:
    """Serves PULL_MESSAGE (11). ``hold`` parks suspended pulls; without one they are answered PULL_NOT_FOUND at once.

    ``hold`` defaults to ``broker.hold`` (read per request, as the controller may set it after construction).
    ``filters`` holds the compiled SQL92 subscriptions this processor serves.
    """

    def __init__(self, broker: BrokerContext, hold: HoldService | None = None) -> None:
        self.broker = broker
        self._hold = hold
        self.filters = ConsumerFilterCache()

    @property
    def hold(self) -> HoldService | None:
        hold = self._hold if self._hold is not None else self.broker.hold
        return hold if isinstance(hold, HoldService) else None

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        try:
            primed: dict[str, Sql92Filter | Sql92ParseError] = {}
            for expression in self._sql92_expressions(request):
                compiled = await compile_offloaded(expression)
                if compiled is not None:
                    primed[expression] = compiled
            return self._pull_primed(primed or None, ctx, request, allow_suspend=True)
        except Exception as exc:
            # Not a rejection but a bug or a store failure: still answer with the fields pull clients dereference.
            log.warning("pull (opaque %d) failed", request.opaque, exc_info=True)
            return request.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}", _fields(0, 0, 0, 0))

    def _sql92_expressions(self, request: RemotingCommand) -> list[str]:
        """The SQL92 expressions this pull will compile, read cheaply before the synchronous :meth:`pull` so that long
        ones are compiled off the event loop first (:func:`~processors.filter.cache.compile_offloaded`): the request's
        own (SUBSCRIPTION flag) or the group's heartbeat subscription of the topic, and with ``filterSupportRetry``
        on a retry topic the group's SQL92 subscriptions its messages are matched against (:meth:`_retry_filter`).
        Malformed fields are left to :meth:`pull` to answer."""
        fields = request.ext_fields
        try:
            sys_flag = int(fields.get("sysFlag", "0"))
        except ValueError:
            return []
        topic = fields.get("topic", "")
        group_info = self.broker.clients.consumer_group(fields.get("consumerGroup", ""))
        subscriptions = {} if group_info is None else group_info.subscriptions
        expressions = []
        if sys_flag & PULL_FLAG_SUBSCRIPTION:
            # Not SQL92, or property filtering off: answered SYSTEM_ERROR without compiling.
            if fields.get("expressionType") == EXPRESSION_SQL92 and self.broker.config.enable_property_filter:
                expressions.append(fields.get("subscription") or "")
        elif (found := subscriptions.get(topic)) is not None and found.expression_type == EXPRESSION_SQL92:
            expressions.append(found.sub_string)
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and self.broker.config.filter_support_retry:
            retry_group = self.broker.clients.consumer_group(topic[len(RETRY_GROUP_TOPIC_PREFIX) :])
            origins = () if retry_group is None else retry_group.subscriptions.values()
            expressions += [sub.sub_string for sub in origins if sub.expression_type == EXPRESSION_SQL92]
        return [expression for expression in dict.fromkeys(expressions) if expression]

    def _pull_primed(
        self,
        primed: Primed | None,
        ctx: RequestContext,
        request: RemotingCommand,
        *,
        allow_suspend: bool,
    ) -> RemotingCommand | None:
        """:meth:`pull` with ``primed``, expressions and what they compiled to off the loop, as the filter cache's
        answers for them (:attr:`ConsumerFilterCache.primed`; for this pull only: nothing runs in between)."""
        if primed is None:
            return self.pull(ctx, request, allow_suspend=allow_suspend)
        self.filters.primed = primed
        try:
            return self.pull(ctx, request, allow_suspend=allow_suspend)
        finally:
            self.filters.primed = None

    def _bounds(self, topic: str, queue_id: int) -> tuple[int, int]:
        """The queue's min and max offsets."""
        store = self.broker.store
        return store.min_offset_in_queue(topic, queue_id), store.max_offset_in_queue(topic, queue_id)

    def rerun(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        """The hold service's re-execution: the whole pull again, never suspending, never committing."""
        return self.pull(ctx, request, allow_suspend=False)

    def pull(self, ctx: RequestContext, request: RemotingCommand, *, allow_suspend: bool) -> RemotingCommand | None:
        """One execution of a pull: the response, or ``None`` when it was parked. Never awaits; never raises for
        bad input (every rejection is a response with the four offset fields)."""
        started = time.perf_counter_ns()
        store = self.broker.store
        header: PullMessageRequestHeader | None = None
        try:
            header = parse_header(PullMessageRequestHeader, request)
            tag_filter, property_filter, filter_cost = self._check(header, ctx)
        except RequestRejected as rejected:
            if header is None:
                fields = _fields(0, 0, 0, 0)
            else:
                fields = _fields(0, header.queue_offset, *self._bounds(header.topic, header.queue_id))
            return rejected.to_response(request, fields)
        config = self.broker.config
        is_slave = config.broker_role == "SLAVE"
        corrects = not is_slave or config.offset_check_in_slave
        offset = header.queue_offset
        if is_lmq(header.topic) and store.multi_dispatch.lmq_queue_num_exceeded():
            # DefaultMessageStore.getMessage returns null, PullMessageProcessor answers this (4.9.8).
            fields = _fields(0, offset, *self._bounds(header.topic, header.queue_id))
            return request.response(ResponseCode.SYSTEM_ERROR, "store getMessage return null", fields)
        reset = self.broker.offsets.take_reset(header.consumer_group, header.topic, header.queue_id)
        if reset is not None and config.use_server_side_reset_offset:  # taken either way, as queryThenEraseResetOffset
            return self._answer_reset(request, header, reset, started, corrects)
        result = store.get(
            header.topic,
            header.queue_id,
            offset,
            header.max_msg_nums,
            tag_filter=tag_filter,
            property_filter=property_filter,
            max_filtered=None if filter_cost is None else max(1, SQL92_EVALUATION_BUDGET // filter_cost),
        )
        code, next_offset = self._code_of(result, offset)
        if result.fall_behind >= 0:
            self.broker.stats.record_fall_behind(
                header.consumer_group, header.topic, header.queue_id, result.fall_behind
            )
        # A slave without offsetCheckInSlave keeps the requested offset (RocketMQ's nextOffsetCorrection) and turns
        # PULL_OFFSET_MOVED into a retry at the same place, suggesting the group's broker, with no moved event.
        moved_on_slave = not corrects and code == ResponseCode.PULL_OFFSET_MOVED
        if not corrects and result.status in _CORRECTED_STATUSES:
            next_offset = offset
        if moved_on_slave:
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
        # RocketMQ 4.9.8 sets PULL_RETRY_IMMEDIATELY on a slave without slaveReadEnable, then its status switch
        # overwrites the code: a slave always serves the pull, and only the suggestion (the master) remains.
        suggest = _MASTER_ID
        if config.slave_read_enable:
            group_config = self.broker.groups.get(header.consumer_group)
            if group_config is not None:
                suggest = (
                    group_config.which_broker_when_consume_slowly
                    if result.suggest_pulling_from_slave
                    else group_config.broker_id
                )
        if moved_on_slave:
            group_config = self.broker.groups.get(header.consumer_group)
            suggest = _MASTER_ID if group_config is None else group_config.broker_id
        fields = _fields(suggest, next_offset, result.min_offset, result.max_offset)
        response: RemotingCommand | None
        if code == ResponseCode.SUCCESS:
            runs = result.runs  # the records back to back: usually one slice of the CommitLog
            body = bytes(runs[0]) if len(runs) == 1 else b"".join(runs)
            response = request.response(code, result.status.value, fields, body)
        elif code == ResponseCode.PULL_NOT_FOUND and allow_suspend and header.sys_flag & PULL_FLAG_SUSPEND:
            filters = (tag_filter, property_filter, filter_cost)
            response = self._suspend(ctx, request, header, filters, fields, result.status.value)
        else:
            response = request.response(code, result.status.value, fields)
        if allow_suspend and header.sys_flag & PULL_FLAG_COMMIT_OFFSET and not is_slave:
            self.broker.offsets.commit(header.consumer_group, header.topic, header.queue_id, header.commit_offset)
        elapsed = time.perf_counter_ns() - started
        if code == ResponseCode.SUCCESS and response is not None:
            self.broker.stats.record_get(
                header.consumer_group, header.topic, header.queue_id, len(result.sizes), len(response.body),
                next_offset, elapsed,
            )  # fmt: skip
        else:
            self.broker.stats.record_miss(header.consumer_group, header.topic, header.queue_id, next_offset, elapsed)
        if code == ResponseCode.PULL_OFFSET_MOVED:
            put_offset_moved_event(
                self.broker, header.consumer_group, header.topic, header.queue_id, offset, next_offset
            )
        return response

    def _answer_reset(
        self, request: RemotingCommand, header: PullMessageRequestHeader, reset: int, started: int, corrects: bool
    ) -> RemotingCommand:
        """The pull that takes an admin's reset of its queue (``useServerSideResetOffset``): PULL_OFFSET_MOVED with
        the reset as the next offset (suggesting the master, or the group's ``brokerId`` with ``slaveReadEnable``),
        as 5.3.3's PullMessageProcessor answers its ``OFFSET_RESET`` status (``queryThenEraseResetOffset``), whatever
        the offset asked; the client starts over from there. Its COMMIT flag's offset, the client's position before
        the reset, is not committed (ours: 5.3.3 commits it, and the client's next commit puts the reset back).
        Without ``corrects`` (a slave without ``offsetCheckInSlave``: a DLedger leader stepped down keeps its resets)
        it is PULL_RETRY_IMMEDIATELY to the reset, suggesting the group's broker, with no moved event, as
        DefaultPullMessageResultHandler answers any PULL_OFFSET_MOVED there."""
        group, topic, queue_id = header.consumer_group, header.topic, header.queue_id
        group_config = self.broker.groups.get(group) if self.broker.config.slave_read_enable or not corrects else None
        suggest = _MASTER_ID if group_config is None else group_config.broker_id
        fields = _fields(suggest, reset, *self._bounds(topic, queue_id))
        self.broker.stats.record_miss(group, topic, queue_id, reset, time.perf_counter_ns() - started)
        if not corrects:
            return request.response(ResponseCode.PULL_RETRY_IMMEDIATELY, "OFFSET_RESET", fields)
        put_offset_moved_event(self.broker, group, topic, queue_id, header.queue_offset, reset)
        return request.response(ResponseCode.PULL_OFFSET_MOVED, "OFFSET_RESET", fields)

    # ---- checks ---------------------------------------------------------------------------------------------

    def _check(
        self, header: PullMessageRequestHeader, ctx: RequestContext
    ) -> tuple[TagFilter | None, RawFilter | None, int | None]:
        """The checks of docs/protocol.md#79-pull-checks-and-results in order; the tag filter and the property filter
        (SQL92, or ``filterSupportRetry``'s on a retry topic) to read with, and the cost of one evaluation of the
        subscription's SQL92 filter (``None``: not one). Raises RequestRejected."""
        broker = self.broker
        config = broker.config
        if not config.broker_permission & PERM_READ:
            raise RequestRejected(
                ResponseCode.NO_PERMISSION, f"the broker[{config.broker_ip1}] pulling message is forbidden"
            )
        group = header.consumer_group
        group_config = broker.groups.find(group)
        if group_config is None:
            raise RequestRejected(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{group}] does not exist, {FAQ_SUFFIX}",
            )
        if not group_config.consume_enable:
            raise RequestRejected(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        topic = header.topic
        topic_config = broker.topics.get(topic)
        if topic_config is None:
            raise RequestRejected(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! {FAQ_SUFFIX}"
            )
        if not topic_config.perm & PERM_READ:
            raise RequestRejected(ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden")
        queue_id = header.queue_id
        if queue_id < 0 or queue_id >= topic_config.read_queue_nums:
            host, port = ctx.remote_address[:2]  # Java prints channel.remoteAddress(): "/ip:port"
            raise RequestRejected(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                f"[{topic_config.read_queue_nums}] consumer:[/{host}:{port}]",
            )
        if header.sys_flag & PULL_FLAG_SUBSCRIPTION:
            try:
                subscription = build_subscription(topic, header.subscription, header.expression_type)
                sub_version = header.sub_version
            except SubscriptionParseError:
                raise RequestRejected(
                    ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed"
                ) from None
        else:
            group_info = broker.clients.consumer_group(group)
            if group_info is None:
                raise RequestRejected(
                    ResponseCode.SUBSCRIPTION_NOT_EXIST, f"the consumer's group info not exist{FAQ_SUFFIX}"
                )
            if not group_config.consume_broadcast_enable and group_info.message_model is MessageModel.BROADCASTING:
                raise RequestRejected(
                    ResponseCode.NO_PERMISSION, f"the consumer group[{group}] can not consume by broadcast way"
                )
            found = group_info.subscriptions.get(topic)
            if found is None:
                raise RequestRejected(
                    ResponseCode.SUBSCRIPTION_NOT_EXIST, f"the consumer's subscription not exist{FAQ_SUFFIX}"
                )
            if found.sub_version < header.sub_version:
                raise RequestRejected(ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
            subscription = found
            sub_version = found.sub_version
            if subscription.expression_type != EXPRESSION_TAG:
                self._check_filter_data(group, subscription, sub_version)
        if subscription.expression_type != EXPRESSION_TAG:
            sql_filter = self._sql_filter(group, subscription, sub_version)
            if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and config.filter_support_retry:
                return None, self._retry_filter(topic), self._retry_cost(topic)
            return None, sql_filter.matches_raw, sql_filter.cost
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and config.filter_support_retry:
            return tag_filter_of(subscription), self._retry_filter(topic), self._retry_cost(topic)
        return tag_filter_of(subscription), None, None

    def _retry_cost(self, retry_topic: str) -> int | None:
        """What one evaluation of :meth:`_retry_filter` may cost: the costliest of the group's SQL92 subscriptions
        that compile (``None``: none, nothing evaluated), so a retry pull keeps to the evaluation budget as well."""
        group = retry_topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        group_info = self.broker.clients.consumer_group(group)
        costs = []
        for topic, sub in () if group_info is None else group_info.subscriptions.items():
            if sub.expression_type == EXPRESSION_SQL92:
                with contextlib.suppress(Sql92ParseError):  # matches every message: nothing evaluated
                    costs.append(self.filters.get(group, topic, sub.sub_version, sub.sub_string).cost)
        return max(costs, default=None)

    def _retry_filter(self, retry_topic: str) -> RawFilter:
        """``filterSupportRetry``: a message of ``%RETRY%<group>`` matches the group's SQL92 subscription of the topic
        it came from (its RETRY_TOPIC property), as ExpressionForRetryMessageFilter.isMatchedByCommitLog in
        broker/src/main/java/org/apache/rocketmq/broker/filter/ExpressionForRetryMessageFilter.java. It matches when
        that subscription is not SQL92 or does not compile (Java registers no filter data for either), and (ours;
        Java throws) when the message has no RETRY_TOPIC."""
        group = retry_topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        found: dict[bytes, RawFilter | None] = {}  # origin topic -> its filter, looked up once per pull

        def origin_filter(origin: bytes) -> RawFilter | None:
            group_info = self.broker.clients.consumer_group(group)
            topic = origin.decode("utf-8", "replace")
            sub = None if group_info is None else group_info.subscriptions.get(topic)
            if sub is None or sub.expression_type != EXPRESSION_SQL92:
                return None
            try:
                return self.filters.get(group, topic, sub.sub_version, sub.sub_string).matches_raw
            except Sql92ParseError:
                return None

        def matches(raw: str | bytes | memoryview) -> bool:
            data = raw.encode() if isinstance(raw, str) else raw
            origin = find_property(data, _RETRY_TOPIC)
            if origin is None:
                return True
            if origin not in found:
                found[origin] = origin_filter(origin)
            real = found[origin]
            return real is None or real(data)

        return matches

    def _check_filter_data(self, group: str, subscription: SubscriptionData, sub_version: int) -> None:
        """A heartbeat's non-TAG subscription without compiled filter data (not SQL92, or a malformed expression)
        answers FILTER_DATA_NOT_EXIST, before ``enablePropertyFilter`` is checked, as PullMessageProcessor in
        broker/src/main/java/org/apache/rocketmq/broker/processor/PullMessageProcessor.java does when
        ConsumerFilterManager (broker/.../filter/ConsumerFilterManager.java) could not build it at the heartbeat."""
        if subscription.expression_type == EXPRESSION_SQL92:
            try:
                self.filters.get(group, subscription.topic, sub_version, subscription.sub_string)
                return
            except Sql92ParseError:
                pass
        raise RequestRejected(
            ResponseCode.FILTER_DATA_NOT_EXIST,
            "The broker's consumer filter data is not exist!Your expression may be wrong!",
        )

    def _sql_filter(self, group: str, subscription: SubscriptionData, sub_version: int) -> Sql92Filter:
        """The compiled filter of a non-TAG subscription; SYSTEM_ERROR when property filtering is off or the type is
        not SQL92, SUBSCRIPTION_PARSE_FAILED with the parser's message for a malformed expression."""
        kind = subscription.expression_type
        if kind != EXPRESSION_SQL92 or not self.broker.config.enable_property_filter:
            raise RequestRejected(
                ResponseCode.SYSTEM_ERROR, f"The broker does not support consumer to filter message by {kind}"
            )
        try:
            return self.filters.get(group, subscription.topic, sub_version, subscription.sub_string)
        except Sql92ParseError as error:
            raise RequestRejected(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(error)) from None

    # ---- store result -> response ---------------------------------------------------------------------------

    @staticmethod
    def _code_of(result: GetResult, offset: int) -> tuple[ResponseCode, int]:
        status = result.status
        if status in (GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE):
            code = ResponseCode.PULL_OFFSET_MOVED if offset != 0 else ResponseCode.PULL_NOT_FOUND
        else:
            code = _STATUS_CODES[status]
        return code, result.next_begin_offset

    def _suspend(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        header: PullMessageRequestHeader,
        filters: tuple[TagFilter | None, RawFilter | None, int | None],
        fields: dict[str, str],
        remark: str,
    ) -> RemotingCommand | None:
        hold = self.hold
        if hold is None:
            return request.response(ResponseCode.PULL_NOT_FOUND, remark, fields)
        if ctx.connection.closed:  # queued before its connection closed: nobody to answer, nothing to park
            return None
        config = self.broker.config
        millis = header.suspend_timeout_millis if config.long_polling_enable else config.short_polling_time_mills
        # A long expression compiled off the loop goes with the parked pull: its re-run must not parse it again on the
        # loop when the memo and the filter cache have let it go meanwhile (they are bounded in characters).
        primed = self.filters.primed
        rerun = self.rerun if primed is None else functools.partial(self._pull_primed, primed, allow_suspend=False)
        ctx.connection.mark_suspended(request.opaque)
        hold.hold(
            HeldPull(
                ctx=ctx,
                request=request,
                topic=header.topic,
                queue_id=header.queue_id,
                offset=header.queue_offset,
                deadline=trio.current_time() + max(0, millis) / 1000,
                rerun=rerun,
                tag_filter=filters[0],
                property_filter=filters[1],
                filter_cost=filters[2],
            )
        )
        return None


def _fields(suggest: int, next_offset: int, min_offset: int, max_offset: int) -> dict[str, str]:
    return {
        "suggestWhichBrokerId": str(suggest),
        "nextBeginOffset": str(next_offset),
        "minOffset": str(min_offset),
        "maxOffset": str(max_offset),
    }
