"""Consumer offsets and queue offset queries: :class:`ConsumerOffsetProcessor` serves

- QUERY_CONSUMER_OFFSET (14): the committed offset; for a group that never committed on this queue, SUCCESS with 0
  when the queue is young (min offset <= 0 and its first message still "in memory"), else QUERY_NOT_FOUND (22) with
  Java's remark, and always QUERY_NOT_FOUND when RocketMQ 5's ``setZeroIfNotFound`` is false
  (docs/protocol.md#712-consumer-offset-queries);
- UPDATE_CONSUMER_OFFSET (15): commit, answered SUCCESS with flag 0 and not at all when oneway (the dispatcher's
  rule), no bounds check, TOPIC_NOT_EXIST for a topic the broker does not hold (RocketMQ 5), ignored (SUCCESS) while
  an admin's reset of the queue is pending (RocketMQ 5.3.3) (docs/protocol.md#712-consumer-offset-queries);
- SEARCH_OFFSET_BY_TIMESTAMP (29), GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), GET_EARLIEST_MSG_STORETIME (32): always
  SUCCESS, 0 for unknown queues (-1 store time when the queue holds nothing).

A missing or malformed header field answers SYSTEM_ERROR naming the field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from processors.common import RequestRejected, parse_header
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.headers.offsets import (
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from remoting.processor import RequestContext

if TYPE_CHECKING:
    from processors.context import BrokerContext

__all__ = ["NOT_SET_TO_ZERO_REMARK", "QUERY_NOT_FOUND_REMARK", "RESET_PENDING_REMARK", "ConsumerOffsetProcessor"]

QUERY_NOT_FOUND_REMARK: Final = "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
#: RocketMQ 5's answer to a query with ``setZeroIfNotFound=false`` for a group without an offset.
NOT_SET_TO_ZERO_REMARK: Final = "Not found, do not set to zero, maybe this group boot first"
#: UPDATE_CONSUMER_OFFSET's remark for a commit ignored while an admin's reset of the queue is pending.
RESET_PENDING_REMARK: Final = "Offset has been previously reset"


class ConsumerOffsetProcessor:
    """Serves codes 14, 15, 29, 30, 31 and 32 (see the module docstring). Stateless; reads ``broker`` per request."""

    CODES: Final = (
        RequestCode.QUERY_CONSUMER_OFFSET,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
        RequestCode.GET_MAX_OFFSET,
        RequestCode.GET_MIN_OFFSET,
        RequestCode.GET_EARLIEST_MSG_STORETIME,
    )

    def __init__(self, broker: BrokerContext, *, in_memory_distance: int | None = None) -> None:
        self.broker = broker
        #: CommitLog bytes behind the head beyond which a queue's first message counts as "on disk"; ``None``: the
        #: store's (``accessMessageInMemoryMaxRatio`` % of RAM, as DefaultMessageStore.checkInDiskByCommitOffset).
        self.in_memory_distance = in_memory_distance

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        try:
            return self._process(request)
        except RequestRejected as rejected:
            return rejected.to_response(request)

    def _process(self, request: RemotingCommand) -> RemotingCommand:
        code = request.code
        store = self.broker.store
        if code == RequestCode.QUERY_CONSUMER_OFFSET:
            return self._query_consumer_offset(request)
        if code == RequestCode.UPDATE_CONSUMER_OFFSET:
            return self._update_consumer_offset(request)
        if code == RequestCode.GET_MAX_OFFSET:
            get_max = parse_header(GetMaxOffsetRequestHeader, request)
            return _offset(request, store.max_offset_in_queue(get_max.topic, get_max.queue_id))
        if code == RequestCode.GET_MIN_OFFSET:
            get_min = parse_header(GetMinOffsetRequestHeader, request)
            return _offset(request, store.min_offset_in_queue(get_min.topic, get_min.queue_id))
        if code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
            search = parse_header(SearchOffsetRequestHeader, request)
            offset = store.offset_in_queue_by_time(
                search.topic, search.queue_id, search.timestamp, search.boundary_type
            )
            return _offset(request, offset)
        if code == RequestCode.GET_EARLIEST_MSG_STORETIME:
            earliest = parse_header(GetEarliestMsgStoretimeRequestHeader, request)
            timestamp = store.earliest_message_time(earliest.topic, earliest.queue_id)
            fields = {"timestamp": str(-1 if timestamp is None else timestamp)}
            return request.response(ResponseCode.SUCCESS, None, fields)
        return request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {code} not supported")

    def _update_consumer_offset(self, request: RemotingCommand) -> RemotingCommand:
        """Commit, refused for a topic the broker does not hold (RocketMQ 5's ConsumerManageProcessor
        ``updateConsumerOffset``): a consumer still running after DELETE_TOPIC_IN_BROKER puts no offsets back. While an
        admin's reset of the queue waits for the group's next pull or pop, the commit (of the position the client had
        before the reset) is ignored and answered SUCCESS with Java's remark (5.3.3's ``hasOffsetReset`` check, made
        only under ``useServerSideResetOffset``)."""
        update = parse_header(UpdateConsumerOffsetRequestHeader, request)
        if self.broker.topics.get(update.topic) is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"Topic {update.topic} not exist!")
        if self._reset_pending(update.consumer_group, update.topic, update.queue_id):
            return request.response(ResponseCode.SUCCESS, RESET_PENDING_REMARK)
        self.broker.offsets.commit(update.consumer_group, update.topic, update.queue_id, update.commit_offset)
        return request.response(ResponseCode.SUCCESS)

    def _reset_pending(self, group: str, topic: str, queue_id: int) -> bool:
        """Whether a commit of the queue waits for an admin's reset to be taken (``useServerSideResetOffset`` only)."""
        return self.broker.config.use_server_side_reset_offset and self.broker.offsets.has_reset(group, topic, queue_id)

    def _query_consumer_offset(self, request: RemotingCommand) -> RemotingCommand:
        header = parse_header(QueryConsumerOffsetRequestHeader, request)
        offset = self.broker.offsets.query(header.consumer_group, header.topic, header.queue_id)
        if offset >= 0:
            return _offset(request, offset)
        if header.set_zero_if_not_found is False:  # RocketMQ 5.3.3 asks before looking at the queue
            return request.response(ResponseCode.QUERY_NOT_FOUND, NOT_SET_TO_ZERO_REMARK)
        store = self.broker.store
        if store.min_offset_in_queue(header.topic, header.queue_id) <= 0 and not self._first_message_on_disk(
            header.topic, header.queue_id
        ):
            return _offset(request, 0)
        return request.response(ResponseCode.QUERY_NOT_FOUND, QUERY_NOT_FOUND_REMARK)

    def _first_message_on_disk(self, topic: str, queue_id: int) -> bool:
        """Java's ``checkInDiskByConsumeOffset(topic, queue, 0)``: false when the queue has no entry 0."""
        store = self.broker.store
        cq = store.consume_queues.get((topic, queue_id))
        entry = None if cq is None else cq.entry(0)
        if entry is None:
            return False
        limit = store.in_memory_distance if self.in_memory_distance is None else self.in_memory_distance
        return store.max_phy_offset - entry[0] > limit


def _offset(request: RemotingCommand, offset: int) -> RemotingCommand:
    return request.response(ResponseCode.SUCCESS, None, {"offset": str(offset)})
