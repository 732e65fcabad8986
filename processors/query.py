"""Message queries: :class:`QueryMessageProcessor` serves

- QUERY_MESSAGE (12): records indexed under ``key`` (a ``KEYS`` token or, with the extField ``_UNIQUE_KEY_QUERY``
  exactly ``true``, a ``UNIQ_KEY``; then ``maxNum`` is forced to ``defaultQueryMaxNum``, 32) stored in
  ``[beginTimestamp, endTimestamp]``; ``maxNum`` is capped at ``maxMsgsNumBatch`` (64), and a negative one answers
  SYSTEM_ERROR. Both settings are read per query, as Java reads MessageStoreConfig
  (``QueryMessageProcessor.queryMessage``, ``store/src/main/java/org/apache/rocketmq/store/index/IndexService.java``
  ``queryOffset``). SUCCESS with the concatenated records as body and the index's ``indexLastUpdateTimestamp`` and
  ``indexLastUpdatePhyoffset``, or QUERY_NOT_FOUND (22) with both 0 unless the index found records retention has
  deleted since. Hash collisions are returned too: clients re-check the key.
- VIEW_MESSAGE_BY_ID (33): the one record at a CommitLog offset (decoded by the client from an offset msgId), or
  SYSTEM_ERROR ``can not find message by the offset, <n>``.

Bodies are the stored record bytes, never re-encoded. A missing or malformed header field answers SYSTEM_ERROR.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from processors.common import RequestRejected, parse_header
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.errors import MessageDecodeError
from remoting.codec.headers.query import QueryMessageRequestHeader, ViewMessageRequestHeader
from remoting.codec.message import read_record_meta
from remoting.processor import RequestContext

if TYPE_CHECKING:
    from processors.context import BrokerContext

__all__ = ["QueryMessageProcessor"]


class QueryMessageProcessor:
    """Serves codes 12 and 33 (see the module docstring). Stateless; reads ``broker`` per request."""

    CODES: Final = (RequestCode.QUERY_MESSAGE, RequestCode.VIEW_MESSAGE_BY_ID)

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        try:
            if request.code == RequestCode.QUERY_MESSAGE:
                return await self._query_message(request)
            if request.code == RequestCode.VIEW_MESSAGE_BY_ID:
                return self._view_message(request)
        except RequestRejected as rejected:
            return rejected.to_response(request)
        return request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported")

    async def _query_message(self, request: RemotingCommand) -> RemotingCommand:
        header = parse_header(QueryMessageRequestHeader, request)
        config = self.broker.config
        # Only the exact string "true" makes a unique-key query, not the header's lenient boolean:
        # ``isUniqueKey.equals("true")`` in broker/src/main/java/org/apache/rocketmq/broker/processor/
        # QueryMessageProcessor.java queryMessage.
        unique = request.ext_fields.get("_UNIQUE_KEY_QUERY") == "true"
        max_num = config.default_query_max_num if unique else header.max_num
        if max_num < 0:
            # IndexService.queryOffset sizes its list with ``new ArrayList<Long>(maxNum)`` first, which throws; the
            # remoting layer answers SYSTEM_ERROR (store/src/main/java/org/apache/rocketmq/store/index/
            # IndexService.java).
            remark = f"java.lang.IllegalArgumentException: Illegal Capacity: {max_num}"
            return request.response(ResponseCode.SYSTEM_ERROR, remark)
        max_num = max(0, min(max_num, config.max_msgs_num_batch))
        store = self.broker.store
        offsets = (
            await store.query_offsets_async(header.topic, header.key, max_num, header.begin_timestamp,
                                            header.end_timestamp)
            if max_num
            else []
        )  # fmt: skip
        records = store.records_at(offsets)
        # The index's figures reach QueryMessageResult only when it found offsets, whether or not their records are
        # still there; else they stay 0 (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java).
        index = store.index if offsets else None
        fields = {
            "indexLastUpdateTimestamp": str(0 if index is None else index.last_update_timestamp),
            "indexLastUpdatePhyoffset": str(0 if index is None else index.last_update_phy_offset),
        }
        if not records:
            return request.response(
                ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct", fields
            )
        body = bytes(records[0]) if len(records) == 1 else b"".join(records)
        return request.response(ResponseCode.SUCCESS, None, fields, body)

    def _view_message(self, request: RemotingCommand) -> RemotingCommand:
        header = parse_header(ViewMessageRequestHeader, request)
        record = self.broker.store.look_message_by_offset(header.offset) if header.offset >= 0 else None
        if record is not None:
            # An offset inside a record (or past a torn tail) must not serve bytes that merely look like one.
            try:
                if read_record_meta(record).phy_offset != header.offset:
                    record = None
            except MessageDecodeError:
                record = None
        if record is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {header.offset}")
        return request.response(ResponseCode.SUCCESS, None, {}, bytes(record))
