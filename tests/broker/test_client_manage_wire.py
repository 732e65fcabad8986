"""Client management over real sockets against the embedded cluster: heartbeats, the retry topic's route, consumer
lists, NOTIFY_CONSUMER_IDS_CHANGED to the other members of a group, unregister, client config check, queue locks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from broker.embedded import EmbeddedCluster
from remoting.client import RemotingClient
from remoting.codec.bodies import (
    ConsumerData,
    ConsumerListBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    ProducerData,
    SubscriptionData,
    TopicRouteData,
)
from remoting.codec.bodies.admin import CheckClientRequestBody
from remoting.codec.codes import CURRENT_VERSION, RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.message import MessageRecord
from remoting.processor import RequestContext
from tests.broker.helpers import create_topic_request, wait_for_route
from tests.conftest import SMALL_STORE

GROUP = "wire_group"


class NotifyRecorder:
    """The client side of broker-initiated requests: records every request it is sent."""

    def __init__(self) -> None:
        self.send, self.receive = trio.open_memory_channel[RemotingCommand](100)

    async def process(self, ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand | None:
        self.send.send_nowait(cmd)
        return None

    async def next(self, timeout: float = 10.0) -> RemotingCommand:
        with trio.fail_after(timeout):
            return await self.receive.receive()

    def pending(self) -> int:
        return self.receive.statistics().current_buffer_used


def heartbeat(client_id: str, *topics: str, producer: str | None = None) -> RemotingCommand:
    subs = tuple(SubscriptionData(t) for t in (topics or ("TopicTest",)))
    data = HeartbeatData(
        client_id,
        producer_data_set=(ProducerData(producer),) if producer else (),
        consumer_data_set=(ConsumerData(GROUP, subscription_data_set=subs),),
    )
    return request(RequestCode.HEART_BEAT, body=data.encode())


def consumer_list() -> RemotingCommand:
    return request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP})


@pytest.fixture
async def clients() -> AsyncIterator[tuple[RemotingClient, NotifyRecorder, RemotingClient, NotifyRecorder]]:
    rec_a, rec_b = NotifyRecorder(), NotifyRecorder()
    async with RemotingClient(request_handler=rec_a) as a, RemotingClient(request_handler=rec_b) as b:
        yield a, rec_a, b, rec_b


async def test_heartbeat_answers_our_version_and_makes_the_retry_topic_routable(
    embedded_cluster: EmbeddedCluster,
) -> None:
    async with RemotingClient() as client:
        answer = await client.invoke(embedded_cluster.broker_addr, heartbeat("10.0.0.5@1"), 5)
        assert (answer.code, answer.version) == (ResponseCode.SUCCESS, CURRENT_VERSION)
        broker = embedded_cluster.controller.context
        assert broker.groups.get(GROUP) is not None
        assert broker.topics.get(f"%RETRY%{GROUP}") is not None
        route = await wait_for_route(client, embedded_cluster, f"%RETRY%{GROUP}")
        data = TopicRouteData.decode(route)
        assert [b.broker_addrs for b in data.broker_datas] == [{0: embedded_cluster.broker_addr}]


async def test_consumer_list_names_every_live_member_and_errs_when_empty(embedded_cluster: EmbeddedCluster) -> None:
    addr = embedded_cluster.broker_addr
    async with RemotingClient() as a, RemotingClient() as b:
        empty = await a.invoke(addr, consumer_list(), 5)
        assert (empty.code, empty.remark) == (ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {GROUP}")
        await a.invoke(addr, heartbeat("c-a"), 5)
        await b.invoke(addr, heartbeat("c-b"), 5)
        answer = await a.invoke(addr, consumer_list(), 5)
        assert answer.code == ResponseCode.SUCCESS
        assert sorted(ConsumerListBody.decode(answer.body).consumer_id_list) == ["c-a", "c-b"]
        unregister = request(RequestCode.UNREGISTER_CLIENT, {"clientID": "c-b", "consumerGroup": GROUP})
        assert (await b.invoke(addr, unregister, 5)).code == ResponseCode.SUCCESS
        answer = await a.invoke(addr, consumer_list(), 5)
        assert ConsumerListBody.decode(answer.body).consumer_id_list == ["c-a"]


async def test_members_are_notified_when_another_joins_or_leaves(
    embedded_cluster: EmbeddedCluster,
    clients: tuple[RemotingClient, NotifyRecorder, RemotingClient, NotifyRecorder],
) -> None:
    a, rec_a, b, rec_b = clients
    addr = embedded_cluster.broker_addr
    await a.invoke(addr, heartbeat("c-a"), 5)
    first = await rec_a.next()  # a's own arrival changed the group
    assert (first.code, first.ext_fields, first.is_oneway) == (
        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
        {"consumerGroup": GROUP},
        True,
    )
    await b.invoke(addr, heartbeat("c-b"), 5)
    assert (await rec_a.next()).code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
    assert (await rec_b.next()).code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
    # A repeated heartbeat changes nothing: no notification (checked after the next real change arrives).
    await b.invoke(addr, heartbeat("c-b"), 5)
    # b's connection closes: a is told at once.
    b.close_connection(addr)
    assert (await rec_a.next()).ext_fields == {"consumerGroup": GROUP}
    assert rec_a.pending() == 0 and rec_b.pending() == 0
    answer = await a.invoke(addr, consumer_list(), 5)
    assert ConsumerListBody.decode(answer.body).consumer_id_list == ["c-a"]


async def test_a_subscription_change_notifies_the_group(
    embedded_cluster: EmbeddedCluster,
    clients: tuple[RemotingClient, NotifyRecorder, RemotingClient, NotifyRecorder],
) -> None:
    a, rec_a, _b, _rec_b = clients
    addr = embedded_cluster.broker_addr
    await a.invoke(addr, heartbeat("c-a", "T1"), 5)
    await rec_a.next()
    await a.invoke(addr, heartbeat("c-a", "T1", "T2"), 5)
    await rec_a.next()
    sub = embedded_cluster.controller.context.clients.find_subscription(GROUP, "T2")
    assert sub is not None


async def test_producers_are_registered_from_heartbeats(embedded_cluster: EmbeddedCluster) -> None:
    async with RemotingClient() as client:
        await client.invoke(embedded_cluster.broker_addr, heartbeat("p-1", producer="pg"), 5)
        infos = embedded_cluster.controller.context.clients.producer_connections("pg")
        assert [i.client_id for i in infos] == ["p-1"]


def check_client_config(kind: str, expression: str = "a > 1") -> RemotingCommand:
    body = CheckClientRequestBody("c", GROUP, SubscriptionData("T", expression, expression_type=kind)).encode()
    return request(RequestCode.CHECK_CLIENT_CONFIG, body=body)


async def test_check_client_config_without_property_filtering_refuses_every_non_tag_subscription(
    embedded_cluster: EmbeddedCluster,
) -> None:
    addr = embedded_cluster.broker_addr
    async with RemotingClient() as client:
        assert (await client.invoke(addr, check_client_config("TAG"), 5)).code == ResponseCode.SUCCESS
        for kind in ("SQL92", "XPATH"):
            answer = await client.invoke(addr, check_client_config(kind), 5)
            assert (answer.code, answer.remark) == (
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {kind}",
            )
        garbage = await client.invoke(addr, request(RequestCode.CHECK_CLIENT_CONFIG, body=b"{nope"), 5)
        assert garbage.code == ResponseCode.SYSTEM_ERROR


async def test_check_client_config_with_property_filtering_compiles_sql92(tmp_path: Path) -> None:
    async with (
        EmbeddedCluster(tmp_path / "cluster", enable_property_filter=True, **SMALL_STORE) as cluster,
        RemotingClient() as client,
    ):
        addr = cluster.broker_addr
        for kind in ("TAG", "SQL92"):
            assert (await client.invoke(addr, check_client_config(kind), 5)).code == ResponseCode.SUCCESS, kind
        malformed = await client.invoke(addr, check_client_config("SQL92", "a >"), 5)
        assert malformed.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert malformed.remark
        unknown = await client.invoke(addr, check_client_config("XPATH"), 5)
        assert unknown.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


async def test_a_heartbeat_with_a_bad_body_is_a_system_error(embedded_cluster: EmbeddedCluster) -> None:
    async with RemotingClient() as client:
        answer = await client.invoke(embedded_cluster.broker_addr, request(RequestCode.HEART_BEAT, body=b"[]"), 5)
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert answer.remark


async def test_queue_locks_over_the_wire(embedded_cluster: EmbeddedCluster) -> None:
    addr = embedded_cluster.broker_addr
    q0, q1 = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)

    def lock(client_id: str, *mqs: MessageQueue, code: int = RequestCode.LOCK_BATCH_MQ) -> RemotingCommand:
        return request(code, body=LockBatchRequestBody(GROUP, client_id, frozenset(mqs)).encode())

    async with RemotingClient() as client:
        first = await client.invoke(addr, lock("c1", q0, q1), 5)
        assert LockBatchResponseBody.decode(first.body).lock_ok_mq_set == {q0, q1}
        second = await client.invoke(addr, lock("c2", q0, q1), 5)
        assert (second.code, LockBatchResponseBody.decode(second.body).lock_ok_mq_set) == (ResponseCode.SUCCESS, set())
        unlock = await client.invoke(addr, lock("c1", q1, code=RequestCode.UNLOCK_BATCH_MQ), 5)
        assert unlock.code == ResponseCode.SUCCESS
        third = await client.invoke(addr, lock("c2", q0, q1), 5)
        assert LockBatchResponseBody.decode(third.body).lock_ok_mq_set == {q1}
        broken = await client.invoke(addr, request(RequestCode.LOCK_BATCH_MQ, body=b"{}"), 5)
        assert broken.code == ResponseCode.SYSTEM_ERROR


async def test_a_group_with_an_illegal_name_gets_no_retry_or_dlq_directory(embedded_cluster: EmbeddedCluster) -> None:
    """A heartbeat or a send-back naming group ``../../../escaped`` creates neither the group nor its retry or DLQ
    topic: their ConsumeQueue directory would lie outside ``consumequeue/``."""
    addr, broker = embedded_cluster.broker_addr, embedded_cluster.controller.context
    group = "../../../escaped"
    data = HeartbeatData(
        "10.0.0.9@1", consumer_data_set=(ConsumerData(group, subscription_data_set=(SubscriptionData("T"),)),)
    )
    async with RemotingClient() as client:
        assert (await client.invoke(addr, create_topic_request("SendBackT", 1), 5)).code == ResponseCode.SUCCESS
        phy_offset = broker.store.append(MessageRecord("SendBackT", b"m", 0, store_host=broker.store_host)).phy_offset
        assert (await client.invoke(addr, request(RequestCode.HEART_BEAT, body=data.encode()), 5)).code == 0
        back = {"offset": str(phy_offset), "group": group, "delayLevel": "-1"}
        answer = await client.invoke(addr, request(RequestCode.CONSUMER_SEND_MSG_BACK, back), 5)
    assert answer.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert broker.groups.get(group) is None
    assert broker.topics.get(f"%RETRY%{group}") is None and broker.topics.get(f"%DLQ%{group}") is None
    root = Path(broker.config.store_path_root_dir)
    assert not (root / "escaped").exists()
