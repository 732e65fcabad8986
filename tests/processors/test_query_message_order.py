"""QUERY_MESSAGE's body order (found by a review; failed before). DefaultMessageStore.queryMessage (RocketMQ 4.9.8,
store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java) does ``Collections.sort(phyOffsets)`` before
reading the records, so the body holds them oldest (lowest CommitLog offset) first; Java's MQAdminImpl.queryMessage and
mqadmin queryMsgByKey keep that order."""

from __future__ import annotations

from broker.context import BrokerState
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.message import iter_records
from remoting.processor import RequestContext
from tests.processors.conftest import TOPIC
from tests.processors.test_offsets_and_queries import put, query


async def test_query_message_body_is_in_commitlog_order(broker: BrokerState, peer_ctx: RequestContext) -> None:
    await put(broker, peer_ctx, 4, keys="order-1")
    window = {"beginTimestamp": "0", "endTimestamp": str(2**62)}
    response = await query(
        broker, peer_ctx, RequestCode.QUERY_MESSAGE, topic=TOPIC, key="order-1", maxNum="10", **window
    )
    assert response.code == ResponseCode.SUCCESS
    records = list(iter_records(response.body))
    offsets = [m.commit_log_offset for m in records]
    assert offsets == sorted(offsets), f"bodies {[m.body for m in records]} at offsets {offsets}"
