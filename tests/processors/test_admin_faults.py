"""Admin requests where we differed from RocketMQ 4.9.8 (found by a review, each test failing on the code before),
over a real socket (127.0.0.1, port 0) against an embedded broker: topic names checked before a deletion and to their
last character, Java's remarks and codes, ``removeOffset``, the forwarded ``brokerName``, ``rocketmqHome`` refused,
and a blank topic in consume stats."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from processors import broker2client
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumerData, HeartbeatData
from remoting.codec.bodies.admin import ConsumeStats
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.message import MessageRecord, decode_record
from remoting.processor import RequestContext
from tests.broker.helpers import create_topic_request, put_record
from tests.processors.conftest import send_request


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    async with RemotingClient() as c:
        yield c


async def test_delete_topic_with_a_path_traversing_name_is_refused_and_keeps_the_commitlog(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """AdminBrokerProcessor.deleteTopic runs TopicValidator.validateTopic first: '../commitlog' has illegal
    characters, so Java answers SYSTEM_ERROR and touches nothing. Here the name is joined to the consumequeue
    directory and every CommitLog segment is unlinked."""
    addr = embedded_cluster.broker_addr
    assert (await client.invoke(addr, create_topic_request("Kept", queues=1), 5)).code == ResponseCode.SUCCESS
    put_record(embedded_cluster, "Kept", 0, b"precious")
    store = embedded_cluster.controller.context.store
    commitlog = store.config.consume_queue_dir.parent / "commitlog"
    before = sorted(p.name for p in commitlog.iterdir())
    assert before

    answer = await client.invoke(addr, request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "../commitlog"}), 5)

    assert commitlog.is_dir(), "the CommitLog directory and its segments were deleted"
    assert sorted(p.name for p in commitlog.iterdir()) == before
    assert answer.code == ResponseCode.SYSTEM_ERROR


async def test_the_store_never_deletes_outside_its_consume_queue_directory(embedded_cluster: EmbeddedCluster) -> None:
    store = embedded_cluster.controller.context.store
    put_record(embedded_cluster, "Kept2", 0, b"precious")
    commitlog = store.config.consume_queue_dir.parent / "commitlog"
    before = sorted(p.name for p in commitlog.iterdir())
    for name in ("../commitlog", "..", "."):
        await store.delete_topic(name)
    assert sorted(p.name for p in commitlog.iterdir()) == before
    assert store.config.consume_queue_dir.is_dir()


async def test_create_topic_with_a_trailing_newline_is_refused(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """TopicValidator.isTopicOrGroupIllegal checks every char against ^[%|a-zA-Z0-9_-]+$; '\\n' is illegal, so
    Java answers SYSTEM_ERROR. Python's re '$' also matches before a trailing newline, so the name passes."""
    answer = await client.invoke(embedded_cluster.broker_addr, create_topic_request("Evil\n", queues=1), 5)
    assert embedded_cluster.controller.context.topics.get("Evil\n") is None, "topic 'Evil\\n' was created"
    assert answer.code == ResponseCode.SYSTEM_ERROR


async def test_illegal_topic_remark_is_javas(embedded_cluster: EmbeddedCluster, client: RemotingClient) -> None:
    """TopicValidator.validateTopic (4.9.8) remarks without the topic name."""
    answer = await client.invoke(embedded_cluster.broker_addr, create_topic_request("bad/topic", queues=1), 5)
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert answer.remark == "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"


async def test_delete_subscription_group_honours_javas_remove_offset_field(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """4.9.8's DeleteSubscriptionGroupRequestHeader carries ``removeOffset`` (mqadmin deleteSubGroup -r true sends
    it); ``cleanOffset`` is RocketMQ 5's name. AdminBrokerProcessor.deleteSubscriptionGroup then calls
    ConsumerOffsetManager.removeOffset(group)."""
    broker = embedded_cluster.controller.context
    broker.offsets.commit("doomed_group", "T", 0, 7)
    fields = {"groupName": "doomed_group", "removeOffset": "true"}
    answer = await client.invoke(embedded_cluster.broker_addr, request(RequestCode.DELETE_SUBSCRIPTIONGROUP, fields), 5)
    assert answer.code == ResponseCode.SUCCESS
    assert broker.offsets.query("doomed_group", "T", 0) == -1, "the group's offsets were kept"


async def test_reset_offset_of_an_unknown_topic_is_system_error(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """Broker2Client.resetOffset: no topic config -> SYSTEM_ERROR
    '[reset-offset] reset offset failed, no topic in this broker. topic=<t>'."""
    fields = {"topic": "NoSuchTopic", "group": "g", "timestamp": "-1", "isForce": "true"}
    answer = await client.invoke(
        embedded_cluster.broker_addr, request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields), 5
    )
    assert (answer.code, answer.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "[reset-offset] reset offset failed, no topic in this broker. topic=NoSuchTopic",
    )


class _SilentConsumer:
    """A consumer connection that records broker-initiated requests and answers CONSUME_MESSAGE_DIRECTLY only."""

    def __init__(self) -> None:
        self.seen: list[RemotingCommand] = []

    async def process(self, ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand | None:
        self.seen.append(cmd)
        if cmd.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            return cmd.response(ResponseCode.SUCCESS, body=b"consumed")
        return None  # GET_CONSUMER_RUNNING_INFO: never answered


async def _register(consumer: RemotingClient, cluster: EmbeddedCluster, group: str, client_id: str) -> None:
    data = HeartbeatData(client_id, consumer_data_set=(ConsumerData(group),))
    answer = await consumer.invoke(cluster.broker_addr, request(RequestCode.HEART_BEAT, body=data.encode()), 5)
    assert answer.code == ResponseCode.SUCCESS


async def test_running_info_from_a_consumer_that_times_out_is_consume_msg_timeout(
    embedded_cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AdminBrokerProcessor.callConsumer catches RemotingTimeoutException for every forwarded code (307 and 309)
    and answers CONSUME_MSG_TIMEOUT (207) 'consumer <g> <id> Timeout: ...'."""
    monkeypatch.setattr(broker2client, "FORWARD_TIMEOUT", 0.3)
    silent = _SilentConsumer()
    async with RemotingClient(request_handler=silent) as consumer, RemotingClient() as tool:
        await _register(consumer, embedded_cluster, "slow_group", "slow-1")
        fields = {"consumerGroup": "slow_group", "clientId": "slow-1"}
        answer = await tool.invoke(
            embedded_cluster.broker_addr, request(RequestCode.GET_CONSUMER_RUNNING_INFO, fields), 10
        )
        assert any(c.code == RequestCode.GET_CONSUMER_RUNNING_INFO for c in silent.seen)
        assert answer.code == ResponseCode.CONSUME_MSG_TIMEOUT, (answer.code, answer.remark)


async def test_consume_message_directly_tells_the_consumer_the_broker_name(embedded_cluster: EmbeddedCluster) -> None:
    """AdminBrokerProcessor.consumeMessageDirectly puts ``brokerName`` into the forwarded extFields; the 4.9.8
    client builds the MessageQueue its listener sees from it (ClientRemotingProcessor.consumeMessageDirectly)."""
    broker = embedded_cluster.controller.context
    silent = _SilentConsumer()
    async with RemotingClient(request_handler=silent) as consumer, RemotingClient() as tool:
        await _register(consumer, embedded_cluster, "direct_group", "direct-1")
        appended = broker.store.append(MessageRecord("T", b"BODY", 0, store_host=broker.store_host))
        fields = {"consumerGroup": "direct_group", "clientId": "direct-1", "msgId": appended.msg_id}
        answer = await tool.invoke(
            embedded_cluster.broker_addr, request(RequestCode.CONSUME_MESSAGE_DIRECTLY, fields), 10
        )
        assert answer.code == ResponseCode.SUCCESS
        forwarded = next(c for c in silent.seen if c.code == RequestCode.CONSUME_MESSAGE_DIRECTLY)
        assert forwarded.ext_fields.get("brokerName") == broker.config.broker_name, dict(forwarded.ext_fields)


async def test_update_broker_config_refuses_rocketmq_home(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """AdminBrokerProcessor.initConfigBlackList always black-lists ``rocketmqHome`` (besides brokerConfigPath and
    configBlackList): UPDATE_BROKER_CONFIG naming it answers NO_PERMISSION 'Can not update config in black list.'
    Here it is applied, and rocketmqHome is where the ACL files are read from."""
    broker = embedded_cluster.controller.context
    before = broker.config.rocketmq_home
    update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"rocketmqHome=/tmp/elsewhere\n")
    answer = await client.invoke(embedded_cluster.broker_addr, update, 5)
    assert broker.config.rocketmq_home == before, f"rocketmqHome changed to {broker.config.rocketmq_home!r}"
    assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")


async def test_consume_stats_with_a_blank_topic_covers_every_topic_of_the_group(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """getConsumeStats: UtilAll.isBlank(topic) -> whichTopicByConsumer(group), so a blank topic lists all of the
    group's topics."""
    addr = embedded_cluster.broker_addr
    assert (await client.invoke(addr, create_topic_request("StatsT", queues=1), 5)).code == ResponseCode.SUCCESS
    embedded_cluster.controller.context.offsets.commit("stats_group", "StatsT", 0, 0)
    fields = {"consumerGroup": "stats_group", "topic": " "}
    answer = await client.invoke(addr, request(RequestCode.GET_CONSUME_STATS, fields), 5)
    assert answer.code == ResponseCode.SUCCESS
    assert [mq.topic for mq in ConsumeStats.decode(answer.body).offset_table] == ["StatsT"]


async def test_a_config_file_that_cannot_be_written_fails_no_admin_change(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """RocketMQ's ConfigManager.persist logs an IOException and returns, so with topics.json or
    subscriptionGroup.json unwritable (a full disk) topic and group changes still answer SUCCESS and a deletion
    finishes: the running broker uses its tables, the file follows on a later save. Here the failed write answered
    SYSTEM_ERROR after the change was made, and a deletion stopped half way, its ConsumeQueues and offsets kept."""
    addr = embedded_cluster.broker_addr
    ctx = embedded_cluster.controller.context
    assert (await client.invoke(addr, create_topic_request("Doomed", queues=1), 5)).code == ResponseCode.SUCCESS
    put_record(embedded_cluster, "Doomed", 0, b"old")
    ctx.offsets.commit("g", "Doomed", 0, 1)
    await ctx.topics.persister.wait_saved()  # no background save holds a temp file now
    await ctx.groups.persister.wait_saved()
    config_dir = ctx.store.root / "config"
    blockers = [config_dir / "topics.json.tmp", config_dir / "subscriptionGroup.json.tmp"]
    for blocker in blockers:  # every write of the two files now fails
        blocker.mkdir()
    try:
        deleted = await client.invoke(addr, request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Doomed"}), 5)
        assert (deleted.code, deleted.remark) == (ResponseCode.SUCCESS, None)
        assert ctx.store.max_offset_in_queue("Doomed", 0) == 0
        assert not (ctx.store.config.consume_queue_dir / "Doomed").exists()
        assert "Doomed" not in ctx.offsets.topics_of_group("g")

        created = await client.invoke(addr, create_topic_request("Fresh", queues=2), 5)
        assert (created.code, created.remark) == (ResponseCode.SUCCESS, None)
        assert "Fresh" in ctx.topics

        body = b'{"groupName":"fresh_group"}'
        group = await client.invoke(addr, request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body), 5)
        assert (group.code, group.remark) == (ResponseCode.SUCCESS, None)
        assert ctx.groups.get("fresh_group") is not None
    finally:
        for blocker in blockers:
            blocker.rmdir()


async def test_a_topic_created_while_its_deletion_runs_keeps_what_is_sent_to_it(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """AdminBrokerProcessor's updateAndCreateTopic and deleteTopic are ``synchronized``: a creation that arrives while
    a deletion of the same topic is still dropping its ConsumeQueues waits for it, so what is sent once the creation
    is answered stays. Here the deletion waited for the store's disk lock (a flush holds it) after dropping the config,
    the creation was answered meanwhile, and the deletion then destroyed the queue holding the new message."""
    addr = embedded_cluster.broker_addr
    ctx = embedded_cluster.controller.context
    assert (await client.invoke(addr, create_topic_request("Again", queues=1), 5)).code == ResponseCode.SUCCESS
    put_record(embedded_cluster, "Again", 0, b"old")
    answers: dict[str, RemotingCommand] = {}
    sent: list[int] = []

    async def delete() -> None:
        deletion = request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Again"})
        answers["delete"] = await client.invoke(addr, deletion, 5)

    async def create_then_send() -> None:
        answers["create"] = await client.invoke(addr, create_topic_request("Again", queues=1), 5)
        sent.append(put_record(embedded_cluster, "Again", 0, b"new"))

    # The disk lock held as a flush in progress holds it; released before the nursery waits for both requests.
    async with trio.open_nursery() as nursery, ctx.store.disk_lock:
        nursery.start_soon(delete)
        await trio.testing.wait_all_tasks_blocked()
        assert "Again" not in ctx.topics  # the deletion is under way, waiting for the lock
        nursery.start_soon(create_then_send)
        await trio.testing.wait_all_tasks_blocked()
    assert answers["delete"].code == answers["create"].code == ResponseCode.SUCCESS
    assert "Again" in ctx.topics
    assert sent == [0]  # the new incarnation starts empty...
    assert ctx.store.max_offset_in_queue("Again", 0) == 1  # ...and keeps the message sent to it


async def test_a_send_that_creates_the_topic_again_during_its_deletion_keeps_its_message(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """DeleteTopic hands cleanUnusedTopic the topic table's live key set, which it reads queue by queue as it
    destroys them (store/.../DefaultMessageStore.java cleanUnusedTopic): a topic a send created again from TBW102
    (autoCreateTopicEnable) before its queues were reached keeps them, and the message the send was answered
    SEND_OK for. Here the deletion decided before waiting for the store's disk lock (a flush holds it), then
    destroyed the queue holding the acknowledged message and put a tombstone above it."""
    addr = embedded_cluster.broker_addr
    ctx = embedded_cluster.controller.context
    assert (await client.invoke(addr, create_topic_request("Again", queues=1), 5)).code == ResponseCode.SUCCESS
    put_record(embedded_cluster, "Again", 0, b"old")
    answers: dict[str, RemotingCommand] = {}

    async def delete() -> None:
        deletion = request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Again"})
        answers["delete"] = await client.invoke(addr, deletion, 5)

    async with trio.open_nursery() as nursery, ctx.store.disk_lock:
        nursery.start_soon(delete)
        await trio.testing.wait_all_tasks_blocked()
        assert "Again" not in ctx.topics  # the deletion is under way, waiting for the lock
        answers["send"] = await client.invoke(addr, send_request("Again", b"new"), 5)
        assert answers["send"].code == ResponseCode.SUCCESS
        assert "Again" in ctx.topics  # created again from TBW102
    assert answers["delete"].code == ResponseCode.SUCCESS
    assert ctx.store.max_offset_in_queue("Again", 0) == 2
    assert decode_record(ctx.store.get("Again", 0, 1, 1).messages[0]).body == b"new"


async def test_a_topic_created_during_clean_unused_topic_keeps_what_is_sent_to_it(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    """cleanUnusedTopic checks each topic against the topic table's live key set as it reaches its queues
    (store/.../DefaultMessageStore.java), so a topic created meanwhile is in use and keeps its queues. Here
    CLEAN_UNUSED_TOPIC listed the unconfigured topics before waiting for the store's disk lock, and destroyed the
    queue of one created (and sent to) in between."""
    addr = embedded_cluster.broker_addr
    ctx = embedded_cluster.controller.context
    put_record(embedded_cluster, "Orphan", 0, b"old")  # queues without a config (a lost topics.json)
    answers: dict[str, RemotingCommand] = {}

    async def clean() -> None:
        answers["clean"] = await client.invoke(addr, request(RequestCode.CLEAN_UNUSED_TOPIC), 5)

    async with trio.open_nursery() as nursery, ctx.store.disk_lock:
        nursery.start_soon(clean)
        await trio.testing.wait_all_tasks_blocked()
        created = await client.invoke(addr, create_topic_request("Orphan", queues=1), 5)
        assert created.code == ResponseCode.SUCCESS
        assert put_record(embedded_cluster, "Orphan", 0, b"new") == 1
    assert answers["clean"].code == ResponseCode.SUCCESS
    assert ctx.store.max_offset_in_queue("Orphan", 0) == 2
