"""DELETE_TOPIC_IN_BROKER empties the store for the topic: ConsumeQueue files and directories, next offsets,
consumer offsets and statistics go, so a topic created again under the same name starts at offset 0, also after a
restart; the pop retry topics of its groups go with it (clearRetryTopicWhenDeleteTopic), but not another group's 4.x
retry topic of the same name that it consumes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import attrs
import pytest

from broker.embedded import EmbeddedCluster
from remoting.client import RemotingClient
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.message import decode_record
from tests.broker.helpers import create_topic_request, put_record


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    async with RemotingClient() as c:
        yield c


async def test_a_deleted_topic_created_again_starts_empty_also_after_a_restart(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    addr = embedded_cluster.broker_addr
    assert (await client.invoke(addr, create_topic_request("Gone", queues=2), 5)).code == ResponseCode.SUCCESS
    for i in range(5):
        put_record(embedded_cluster, "Gone", i % 2, f"old{i}".encode())
    broker = embedded_cluster.controller.context
    broker.offsets.commit("g1", "Gone", 0, 2)
    broker.offsets.commit("g1", "Kept", 0, 1)
    cq_dir = broker.store.config.consume_queue_dir / "Gone"
    assert sorted(p.name for p in cq_dir.iterdir()) == ["0", "1"]

    deleted = await client.invoke(addr, request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Gone"}), 5)
    assert deleted.code == ResponseCode.SUCCESS
    assert not cq_dir.exists()
    assert broker.store.max_offset_in_queue("Gone", 0) == 0 and ("Gone", 0) not in broker.store.queue_offsets
    assert broker.offsets.query("g1", "Gone", 0) == -1 and broker.offsets.query("g1", "Kept", 0) == 1
    assert broker.store.get("Gone", 0, 0, 32).messages == []

    assert (await client.invoke(addr, create_topic_request("Gone", queues=2), 5)).code == ResponseCode.SUCCESS
    assert put_record(embedded_cluster, "Gone", 0, b"new") == 0
    await embedded_cluster.restart_broker()
    store = embedded_cluster.controller.context.store
    assert (store.min_offset_in_queue("Gone", 0), store.max_offset_in_queue("Gone", 0)) == (0, 1)
    assert store.max_offset_in_queue("Gone", 1) == 0
    assert [decode_record(m).body for m in store.get("Gone", 0, 0, 32).messages] == [b"new"]


@pytest.mark.parametrize("clear", [True, False])
async def test_deleting_a_topic_deletes_the_pop_retry_topics_of_its_groups_unless_told_not_to(
    embedded_cluster: EmbeddedCluster, client: RemotingClient, clear: bool
) -> None:
    """RocketMQ 5's AdminBrokerProcessor.deleteTopic: with clearRetryTopicWhenDeleteTopic (true by default) the pop
    retry topic %RETRY%<group>_<topic> of every group with an offset on the topic goes as the topic does (config,
    offsets, queues); the group's 4.x retry topic %RETRY%<group> and the pop retry topic of a group without an offset
    on the topic stay."""
    addr, ctx = embedded_cluster.broker_addr, embedded_cluster.controller.context
    ctx.config = attrs.evolve(ctx.config, clear_retry_topic_when_delete_topic=clear)
    topics = ["Doomed", "%RETRY%g1_Doomed", "%RETRY%g2_Doomed", "%RETRY%g1"]
    for topic in topics:
        assert (await client.invoke(addr, create_topic_request(topic, queues=1), 5)).code == ResponseCode.SUCCESS
    put_record(embedded_cluster, "%RETRY%g1_Doomed", 0, b"retry")
    ctx.offsets.commit("g1", "Doomed", 0, 0)
    ctx.offsets.commit("g1", "%RETRY%g1_Doomed", 0, 0)
    deleted = await client.invoke(addr, request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Doomed"}), 5)
    assert deleted.code == ResponseCode.SUCCESS
    kept = [topic for topic in topics if topic in ctx.topics]
    retry_left = (ctx.store.max_offset_in_queue("%RETRY%g1_Doomed", 0), ctx.offsets.query("g1", "%RETRY%g1_Doomed", 0))
    if clear:
        assert (kept, retry_left) == (["%RETRY%g2_Doomed", "%RETRY%g1"], (0, -1))
    else:
        assert (kept, retry_left) == (["%RETRY%g1_Doomed", "%RETRY%g2_Doomed", "%RETRY%g1"], (1, 0))


async def test_deleting_a_topic_keeps_the_4x_retry_topic_of_a_group_whose_name_collides(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """The pop retry topic of group ``A`` on topic ``B``, ``%RETRY%A_B``, is also the 4.x retry topic of group
    ``A_B`` (a legal, common group name). Deleting ``B`` keeps it while group ``A_B`` consumes it (has an offset on
    it): its pending retries, queue and offsets are that group's, which never touched ``B`` (ours: RocketMQ 5's
    deleteTopic deletes it too)."""
    addr, ctx = embedded_cluster.broker_addr, embedded_cluster.controller.context
    ctx.groups.update(SubscriptionGroupConfig("A_B"))
    for topic in ("B", "%RETRY%A_B"):
        assert (await client.invoke(addr, create_topic_request(topic, queues=1), 5)).code == ResponseCode.SUCCESS
    put_record(embedded_cluster, "%RETRY%A_B", 0, b"a 4.x retry of group A_B")
    ctx.offsets.commit("A", "B", 0, 0)  # group A consumed topic B once (pull or pop)
    ctx.offsets.commit("A_B", "%RETRY%A_B", 0, 0)
    deleted = await client.invoke(addr, request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "B"}), 5)
    assert deleted.code == ResponseCode.SUCCESS
    kept = ctx.store.max_offset_in_queue("%RETRY%A_B", 0), ctx.offsets.query("A_B", "%RETRY%A_B", 0)
    assert ("B" in ctx.topics, "%RETRY%A_B" in ctx.topics, kept) == (False, True, (1, 0))


async def test_deleting_an_unknown_topic_succeeds_and_touches_nothing_else(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    put_record(embedded_cluster, "Other", 0, b"x")
    answer = await client.invoke(
        embedded_cluster.broker_addr, request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Never"}), 5
    )
    assert answer.code == ResponseCode.SUCCESS
    assert embedded_cluster.controller.context.store.max_offset_in_queue("Other", 0) == 1


async def test_clean_unused_topic_drops_only_unconfigured_non_system_topics(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    addr = embedded_cluster.broker_addr
    assert (await client.invoke(addr, create_topic_request("Configured", queues=1), 5)).code == ResponseCode.SUCCESS
    for topic in ("Configured", "Orphan", "OFFSET_MOVED_EVENT"):
        put_record(embedded_cluster, topic, 0, b"x")
    store = embedded_cluster.controller.context.store
    answer = await client.invoke(addr, request(RequestCode.CLEAN_UNUSED_TOPIC), 5)
    assert answer.code == ResponseCode.SUCCESS
    assert store.max_offset_in_queue("Orphan", 0) == 0 and not (store.config.consume_queue_dir / "Orphan").exists()
    assert store.max_offset_in_queue("Configured", 0) == store.max_offset_in_queue("OFFSET_MOVED_EVENT", 0) == 1


async def test_an_online_consumer_cannot_commit_offsets_back_on_a_deleted_topic(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """RocketMQ 5's ConsumerManageProcessor.updateConsumerOffset answers TOPIC_NOT_EXIST "Topic <t> not exist!" for a
    topic the broker does not hold: a consumer still running after DELETE_TOPIC_IN_BROKER does not put its old
    offsets back, so the topic created again is consumed from its start, not past the old offsets."""
    addr, ctx = embedded_cluster.broker_addr, embedded_cluster.controller.context
    assert (await client.invoke(addr, create_topic_request("Gone", queues=1), 5)).code == ResponseCode.SUCCESS
    commit = {"consumerGroup": "g1", "topic": "Gone", "queueId": "0", "commitOffset": "5"}
    assert (await client.invoke(addr, request(RequestCode.UPDATE_CONSUMER_OFFSET, commit), 5)).code == 0
    deleted = await client.invoke(addr, request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Gone"}), 5)
    assert deleted.code == ResponseCode.SUCCESS

    late = await client.invoke(addr, request(RequestCode.UPDATE_CONSUMER_OFFSET, commit), 5)
    assert (late.code, late.remark) == (ResponseCode.TOPIC_NOT_EXIST, "Topic Gone not exist!")
    assert ctx.offsets.query("g1", "Gone", 0) == -1
    assert (await client.invoke(addr, create_topic_request("Gone", queues=1), 5)).code == ResponseCode.SUCCESS
    query = {"consumerGroup": "g1", "topic": "Gone", "queueId": "0"}
    answer = await client.invoke(addr, request(RequestCode.QUERY_CONSUMER_OFFSET, query), 5)
    assert (answer.code, answer.ext_fields.get("offset")) == (ResponseCode.SUCCESS, "0")
