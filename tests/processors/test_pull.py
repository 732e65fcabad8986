"""PULL_MESSAGE, command in and command out (docs/protocol.md#79-pull-checks-and-results): checks, statuses, filtering,
commit."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.context import BrokerState
from client.consumer.subscription import build_subscription as client_build_subscription
from processors.pull import PullMessageProcessor, SubscriptionParseError, build_subscription
from processors.send import SendMessageProcessor
from remoting.codec.bodies import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData
from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.message import iter_records
from remoting.codec.message_properties import java_string_hash
from remoting.codec.msgid import decode_offset_msg_id
from remoting.connection import Connection
from remoting.processor import RequestContext
from store.metadata_files import PERM_WRITE, SubscriptionGroupConfig, TopicConfig
from tests.processors.conftest import (
    GROUP,
    PEER,
    TOPIC,
    MakeBroker,
    open_broker,
    pull_request,
    send_request,
    tags_props,
)

OFFSET_FIELDS = ("suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset")
NO_SUSPEND = 0x4  # subscription flag only


async def put(broker: BrokerState, ctx: RequestContext, *tags: str | None, queue_id: int = 0) -> list[str]:
    processor = SendMessageProcessor(broker)
    ids = []
    for i, tag in enumerate(tags):
        response = await processor.process(
            ctx, send_request(body=f"body-{i}".encode(), queue_id=queue_id, properties=tags_props(tag))
        )
        assert response is not None and response.code == ResponseCode.SUCCESS
        ids.append(response.ext_fields["msgId"])
    return ids


def pull(broker: BrokerState, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
    response = PullMessageProcessor(broker).pull(ctx, req, allow_suspend=False)
    assert response is not None
    for field in OFFSET_FIELDS:  # on every code, errors included
        int(response.ext_fields[field])
    return response


def fields(response: RemotingCommand) -> tuple[int, int, int, int]:
    f = response.ext_fields
    return (int(f["suggestWhichBrokerId"]), int(f["nextBeginOffset"]), int(f["minOffset"]), int(f["maxOffset"]))


async def test_pull_returns_the_sent_records_byte_for_byte(broker: BrokerState, peer_ctx: RequestContext) -> None:
    ids = await put(broker, peer_ctx, "TagA", None, "TagB")
    response = pull(broker, peer_ctx, pull_request(sys_flag=NO_SUSPEND))
    assert response.code == ResponseCode.SUCCESS and response.remark == "FOUND"
    assert fields(response) == (0, 3, 0, 3)
    expected = b""
    for msg_id in ids:
        view = broker.store.look_message_by_offset(decode_offset_msg_id(msg_id).phy_offset)
        assert view is not None
        expected += bytes(view)
    assert bytes(response.body) == expected
    assert [m.body for m in iter_records(response.body)] == [b"body-0", b"body-1", b"body-2"]


async def test_pull_honours_max_msg_nums_and_continues_from_next_begin_offset(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    await put(broker, peer_ctx, *["T"] * 5)
    first = pull(broker, peer_ctx, pull_request(sys_flag=NO_SUSPEND, max_msgs=2))
    assert fields(first)[1] == 2 and len(list(iter_records(first.body))) == 2
    rest = pull(broker, peer_ctx, pull_request(sys_flag=NO_SUSPEND, offset=2))
    assert [m.queue_offset for m in iter_records(rest.body)] == [2, 3, 4]


async def test_tag_subscription_returns_only_matching_messages(broker: BrokerState, peer_ctx: RequestContext) -> None:
    await put(broker, peer_ctx, "TagA", "TagB", None, "TagA", "TagC")
    response = pull(broker, peer_ctx, pull_request(sys_flag=NO_SUSPEND, subscription="TagA || TagC"))
    assert response.code == ResponseCode.SUCCESS
    assert [m.tags for m in iter_records(response.body)] == ["TagA", "TagA", "TagC"]
    assert fields(response)[1] == 5


async def test_class_filter_pull_flag_keeps_the_tag_filter(broker: BrokerState, peer_ctx: RequestContext) -> None:
    """Java 4.9.8's PullMessageProcessor never reads PullSysFlag's CLASS_FILTER bit (0x8): the subscription built
    from the request has classFilterMode=false, so ExpressionMessageFilter still filters on the tags codes."""
    await put(broker, peer_ctx, "TagA", "TagB", None, "TagA")
    response = pull(broker, peer_ctx, pull_request(sys_flag=NO_SUSPEND | 0x8, subscription="TagA"))
    assert response.code == ResponseCode.SUCCESS
    assert [m.tags for m in iter_records(response.body)] == ["TagA", "TagA"]


async def test_nothing_matching_the_tags_answers_retry_immediately_past_the_scanned_entries(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    await put(broker, peer_ctx, "TagB", "TagB")
    response = pull(broker, peer_ctx, pull_request(sys_flag=NO_SUSPEND, subscription="TagA"))
    assert (response.code, response.remark) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")
    assert fields(response) == (0, 2, 0, 2)


async def test_offset_at_the_end_is_not_found_and_beyond_it_moves_to_max(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    await put(broker, peer_ctx, "T", "T")
    at_end = pull(broker, peer_ctx, pull_request(sys_flag=NO_SUSPEND, offset=2))
    assert (at_end.code, at_end.remark, fields(at_end)) == (
        ResponseCode.PULL_NOT_FOUND,
        "OFFSET_OVERFLOW_ONE",
        (0, 2, 0, 2),
    )
    beyond = pull(broker, peer_ctx, pull_request(sys_flag=NO_SUSPEND, offset=9))
    assert beyond.code == ResponseCode.PULL_OFFSET_MOVED
    assert fields(beyond)[1:] == (2, 0, 2)  # the queue's end even though min is 0, as RocketMQ 4.9.4 on


async def test_empty_queue_is_not_found_at_zero_and_offset_moved_elsewhere(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    # A queue never written to answers NO_MESSAGE_IN_QUEUE, as Java's, whose findConsumeQueue makes the queue on
    # first look-up (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java).
    zero = pull(broker, peer_ctx, pull_request(sys_flag=NO_SUSPEND, queue_id=3))
    assert zero.code == ResponseCode.PULL_NOT_FOUND and fields(zero) == (0, 0, 0, 0)
    assert zero.remark == "NO_MESSAGE_IN_QUEUE"
    moved = pull(broker, peer_ctx, pull_request(sys_flag=NO_SUSPEND, queue_id=3, offset=7))
    assert moved.code == ResponseCode.PULL_OFFSET_MOVED and fields(moved) == (0, 0, 0, 0)
    assert moved.remark == "NO_MESSAGE_IN_QUEUE"


async def test_commit_flag_stores_the_commit_offset_on_the_first_execution_only(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    await put(broker, peer_ctx, "T")
    processor = PullMessageProcessor(broker)
    req = pull_request(sys_flag=NO_SUSPEND | 0x1, commit_offset=1)
    assert processor.pull(peer_ctx, req, allow_suspend=True) is not None
    assert broker.offsets.query(GROUP, TOPIC, 0) == 1
    broker.offsets.commit(GROUP, TOPIC, 0, 5)
    processor.rerun(peer_ctx, req)
    assert broker.offsets.query(GROUP, TOPIC, 0) == 5


async def test_heartbeat_subscription_is_used_without_the_subscription_flag(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    await put(broker, peer_ctx, "TagA", "TagB")
    sub = build_subscription(TOPIC, "TagB")
    info = broker.clients.channel_info(peer_ctx.connection, "client-1")
    broker.clients.register_consumer(
        GROUP,
        info,
        ConsumeType.CONSUME_PASSIVELY,
        MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        [sub],
        notify=False,
    )
    response = pull(broker, peer_ctx, pull_request(sys_flag=0, subscription=None))
    assert [m.tags for m in iter_records(response.body)] == ["TagB"]


async def test_pull_without_subscription_and_without_heartbeat_is_subscription_not_exist(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    response = pull(broker, peer_ctx, pull_request(sys_flag=0, subscription=None))
    assert response.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    assert response.remark is not None and response.remark.startswith("the consumer's group info not exist")


async def test_stale_heartbeat_subscription_is_not_latest(broker: BrokerState, peer_ctx: RequestContext) -> None:
    info = broker.clients.channel_info(peer_ctx.connection, "client-1")
    broker.clients.register_consumer(
        GROUP,
        info,
        ConsumeType.CONSUME_PASSIVELY,
        MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        [SubscriptionData(TOPIC, sub_version=10)],
        notify=False,
    )
    response = pull(broker, peer_ctx, pull_request(sys_flag=0, subscription=None, subVersion="11"))
    assert (response.code, response.remark) == (
        ResponseCode.SUBSCRIPTION_NOT_LATEST,
        "the consumer's subscription not latest",
    )
    other_topic = pull(broker, peer_ctx, pull_request("%RETRY%" + GROUP, sys_flag=0, subscription=None))
    assert other_topic.code in (ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SUBSCRIPTION_NOT_EXIST)


async def test_unknown_group_without_auto_create_is_subscription_group_not_exist(
    make_broker: MakeBroker, peer_ctx: RequestContext
) -> None:
    broker = make_broker(auto_create_subscription_group=False)
    response = pull(broker, peer_ctx, pull_request(group="Unknown", offset=3))
    assert response.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert response.remark is not None and response.remark.startswith("subscription group [Unknown] does not exist")
    assert fields(response) == (0, 3, 0, 0)


async def test_group_with_consumption_disabled_has_no_permission(broker: BrokerState, peer_ctx: RequestContext) -> None:
    broker.groups.update(SubscriptionGroupConfig(GROUP, consume_enable=False))
    response = pull(broker, peer_ctx, pull_request())
    assert (response.code, response.remark) == (
        ResponseCode.NO_PERMISSION,
        f"subscription group no permission, {GROUP}",
    )


async def test_unknown_topic_is_topic_not_exist(broker: BrokerState, peer_ctx: RequestContext) -> None:
    response = pull(broker, peer_ctx, pull_request("Nope"))
    assert response.code == ResponseCode.TOPIC_NOT_EXIST
    assert response.remark is not None and response.remark.startswith("topic[Nope] not exist, apply first please!")


async def test_unreadable_topic_has_no_permission(broker: BrokerState, peer_ctx: RequestContext) -> None:
    broker.topics.update_topic(TopicConfig("WriteOnly", 1, 1, PERM_WRITE))
    response = pull(broker, peer_ctx, pull_request("WriteOnly"))
    assert (response.code, response.remark) == (
        ResponseCode.NO_PERMISSION,
        "the topic[WriteOnly] pulling message is forbidden",
    )


@pytest.mark.parametrize("queue_id", [-1, 4])
async def test_illegal_queue_id_is_system_error(broker: BrokerState, peer_ctx: RequestContext, queue_id: int) -> None:
    response = pull(broker, peer_ctx, pull_request(queue_id=queue_id))
    assert response.code == ResponseCode.SYSTEM_ERROR
    host, port = PEER  # Java prints channel.remoteAddress(), not the group
    assert response.remark == (
        f"queueId[{queue_id}] is illegal, topic:[{TOPIC}] topicConfig.readQueueNums:[4] consumer:[/{host}:{port}]"
    )


@pytest.mark.parametrize("expression", ["||", "||||"])
async def test_malformed_subscription_is_parse_failed(
    broker: BrokerState, peer_ctx: RequestContext, expression: str
) -> None:
    response = pull(broker, peer_ctx, pull_request(subscription=expression))
    assert (response.code, response.remark) == (
        ResponseCode.SUBSCRIPTION_PARSE_FAILED,
        "parse the consumer's subscription failed",
    )


async def test_sql92_subscription_is_refused_without_property_filtering(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    response = pull(broker, peer_ctx, pull_request(subscription="a > 1", expressionType="SQL92"))
    assert (response.code, response.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "The broker does not support consumer to filter message by SQL92",
    )


async def test_missing_header_field_answers_system_error_with_the_offset_fields(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    req = pull_request()
    del req.ext_fields["queueOffset"]
    response = pull(broker, peer_ctx, req)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark is not None and "queueOffset" in response.remark


async def test_suspend_without_a_hold_service_answers_not_found_at_once(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    response = await PullMessageProcessor(broker).process(peer_ctx, pull_request())
    assert response is not None and response.code == ResponseCode.PULL_NOT_FOUND


def test_subscription_expressions_split_on_double_bars_and_hash_like_java() -> None:
    sub = build_subscription(TOPIC, " TagA || TagB ||  ")
    assert sub.tags_set == ("TagA", "TagB")
    assert sub.code_set == (java_string_hash("TagA"), java_string_hash("TagB"))
    assert build_subscription(TOPIC, "").sub_string == "*"
    assert build_subscription(TOPIC, None).sub_string == "*"
    assert build_subscription(TOPIC, " || ").tags_set == ()  # Java keeps it: blank tags are merely dropped
    with pytest.raises(SubscriptionParseError):
        build_subscription(TOPIC, "||")


_TAGS = st.sampled_from(["TagA", "TagB", "TagC", None])


@settings(max_examples=25, deadline=None)
@given(
    tags=st.lists(_TAGS, max_size=40),
    subscribed=st.one_of(st.just("*"), st.sets(st.sampled_from(["TagA", "TagB", "TagC"]), min_size=1)),
    batch=st.integers(min_value=1, max_value=7),
)
def test_pulling_to_the_end_returns_exactly_the_matching_messages_in_order(
    tmp_path_factory: pytest.TempPathFactory, tags: list[str | None], subscribed: str | set[str], batch: int
) -> None:
    expression = subscribed if isinstance(subscribed, str) else " || ".join(sorted(subscribed))

    async def scenario() -> None:
        broker = open_broker(tmp_path_factory.mktemp("prop"))
        left, _right = trio.testing.memory_stream_pair()
        ctx = Connection(left, ("10.1.2.3", 1), ("127.0.0.1", 10911)).context
        try:
            await put(broker, ctx, *tags)
            got: list[tuple[int, str | None]] = []
            offset = 0
            while True:
                response = pull(
                    broker,
                    ctx,
                    pull_request(sys_flag=NO_SUSPEND, subscription=expression, max_msgs=batch, offset=offset),
                )
                next_offset = int(response.ext_fields["nextBeginOffset"])
                if response.code == ResponseCode.SUCCESS:
                    got += [(m.queue_offset, m.tags) for m in iter_records(response.body)]
                else:
                    assert response.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY)
                if response.code == ResponseCode.PULL_NOT_FOUND:
                    break
                assert next_offset > offset
                offset = next_offset
            expected = [
                (i, tag) for i, tag in enumerate(tags) if subscribed == "*" or (tag is not None and tag in subscribed)
            ]
            assert got == expected
            assert offset == len(tags)
        finally:
            broker.store.close()

    trio.run(scenario)


async def test_with_slave_read_enabled_the_group_broker_id_is_suggested(
    make_broker: MakeBroker, peer_ctx: RequestContext
) -> None:
    broker = make_broker(slave_read_enable=True)
    broker.groups.update(SubscriptionGroupConfig(GROUP, broker_id=1))
    await put(broker, peer_ctx, "T")
    response = pull(broker, peer_ctx, pull_request(sys_flag=NO_SUSPEND))
    assert response.code == ResponseCode.SUCCESS and fields(response)[0] == 1


async def test_without_slave_read_the_master_is_suggested(broker: BrokerState, peer_ctx: RequestContext) -> None:
    broker.groups.update(SubscriptionGroupConfig(GROUP, broker_id=1))
    await put(broker, peer_ctx, "T")
    response = pull(broker, peer_ctx, pull_request(sys_flag=NO_SUSPEND))
    assert response.code == ResponseCode.SUCCESS and fields(response)[0] == 0


async def test_a_broker_without_read_permission_refuses_pulls(
    make_broker: MakeBroker, peer_ctx: RequestContext
) -> None:
    broker = make_broker(broker_permission=PERM_WRITE)
    response = pull(broker, peer_ctx, pull_request(sys_flag=NO_SUSPEND))
    assert (response.code, response.remark) == (
        ResponseCode.NO_PERMISSION,
        "the broker[127.0.0.1] pulling message is forbidden",
    )


async def test_a_slave_never_moves_offsets_and_never_commits(make_broker: MakeBroker, peer_ctx: RequestContext) -> None:
    broker = make_broker(broker_role="SLAVE", broker_id=1)
    moved = PullMessageProcessor(broker).pull(
        peer_ctx, pull_request(sys_flag=NO_SUSPEND | 0x1, offset=5, commit_offset=5), allow_suspend=True
    )
    assert moved is not None and (moved.code, fields(moved)[1]) == (ResponseCode.PULL_RETRY_IMMEDIATELY, 5)
    assert broker.offsets.query(GROUP, TOPIC, 0) == -1


@pytest.mark.parametrize(
    ("check", "answer"),
    [(False, (ResponseCode.PULL_RETRY_IMMEDIATELY, 1, 5)), (True, (ResponseCode.PULL_OFFSET_MOVED, 0, 0))],
)
async def test_offset_check_in_slave_lets_a_slave_correct_offsets_as_a_master(
    make_broker: MakeBroker, peer_ctx: RequestContext, check: bool, answer: tuple[ResponseCode, int, int]
) -> None:
    broker = make_broker(broker_role="SLAVE", broker_id=1, offset_check_in_slave=check)
    broker.groups.update(SubscriptionGroupConfig(GROUP, broker_id=1))
    moved = pull(broker, peer_ctx, pull_request(sys_flag=NO_SUSPEND, offset=5))
    suggested, next_offset = fields(moved)[:2]
    assert (moved.code, suggested, next_offset) == answer


@pytest.mark.parametrize("build", [client_build_subscription, build_subscription], ids=["client", "broker"])
def test_tags_are_trimmed_as_java_string_trim(build: object) -> None:
    """Client and broker trim each tag as FilterAPI does, with String.trim: every char <= U+0020 and nothing else.
    Python's str.strip, used before, drops Unicode whitespace (U+3000, U+00A0) and keeps control characters such as
    U+0001, so the tags (and their hash codes) differed from a Java client's for the same expression."""
    assert callable(build)
    sub = build("T", "TagA\u3000||\x01TagB")
    assert sub.tags_set == ("TagA\u3000", "TagB")


async def test_pull_batch_limits_follow_update_broker_config(broker: BrokerState, peer_ctx: RequestContext) -> None:
    """DefaultMessageStore.isTheBatchFull reads the transfer limits from MessageStoreConfig on every pull, so an
    UPDATE_BROKER_CONFIG changes the next pull's batch."""
    await put(broker, peer_ctx, *["T"] * 12)
    assert len(list(iter_records(pull(broker, peer_ctx, pull_request(sys_flag=NO_SUSPEND)).body))) == 12
    await broker.update_config({"accessMessageInMemoryMaxRatio": "0", "maxTransferCountOnMessageInDisk": "5"})
    assert len(list(iter_records(pull(broker, peer_ctx, pull_request(sys_flag=NO_SUSPEND)).body))) == 5
    await broker.update_config({"accessMessageInMemoryMaxRatio": "40", "maxTransferCountOnMessageInMemory": "4"})
    assert len(list(iter_records(pull(broker, peer_ctx, pull_request(sys_flag=NO_SUSPEND)).body))) == 4
