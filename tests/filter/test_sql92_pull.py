"""PULL_MESSAGE with SQL92 subscriptions, command in and command out (and long polling through the real dispatcher):
only matching messages come back, from the request's subscription and from the heartbeat's; a malformed expression
answers SUBSCRIPTION_PARSE_FAILED with the parser's message (FILTER_DATA_NOT_EXIST from the heartbeat's); a held pull
wakes only for a matching arrival."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from broker.broker_config import load_broker_config
from broker.context import BrokerState
from processors.pull import PullMessageProcessor
from processors.send import SendMessageProcessor
from remoting.codec.bodies import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData
from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.message import iter_records
from remoting.processor import RequestContext
from store.metadata_files import TopicConfig
from tests.processors.conftest import GROUP, TOPIC, MakeBroker, ServedBroker, pull_request, send_request, tags_props

NO_SUSPEND = 0x4  # subscription flag only
HELD = 0x2 | 0x4


async def put(broker: BrokerState, ctx: RequestContext, *props: dict[str, str]) -> None:
    processor = SendMessageProcessor(broker)
    for i, extra in enumerate(props):
        req = send_request(body=f"body-{i}".encode(), properties=tags_props(extra.pop("TAGS", None), **extra))
        response = await processor.process(ctx, req)
        assert response is not None and response.code == ResponseCode.SUCCESS


def sql_pull(expression: str, *, sys_flag: int = NO_SUSPEND, offset: int = 0, version: int = 1) -> RemotingCommand:
    return pull_request(
        subscription=expression, expressionType="SQL92", sys_flag=sys_flag, offset=offset, subVersion=str(version)
    )


def bodies(response: RemotingCommand) -> list[bytes]:
    return [m.body for m in iter_records(response.body)]


def register_heartbeat(broker: BrokerState, ctx: RequestContext, *subs: SubscriptionData) -> None:
    broker.clients.register_consumer(
        GROUP,
        broker.clients.channel_info(ctx.connection, "client-1"),
        ConsumeType.CONSUME_PASSIVELY,
        MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        list(subs),
        notify=False,
    )


async def test_sql92_pull_returns_only_the_matching_messages(
    filtering_broker: BrokerState, peer_ctx: RequestContext
) -> None:
    await put(filtering_broker, peer_ctx, *({"a": str(i)} for i in range(6)), {"b": "no a"})
    processor = PullMessageProcessor(filtering_broker)
    response = processor.pull(peer_ctx, sql_pull("a > 3 OR b IS NOT NULL"), allow_suspend=False)
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert bodies(response) == [b"body-4", b"body-5", b"body-6"]
    assert response.ext_fields["nextBeginOffset"] == "7"


async def test_sql92_pull_reads_system_properties_and_skips_unconvertible_values(
    filtering_broker: BrokerState, peer_ctx: RequestContext
) -> None:
    await put(
        filtering_broker,
        peer_ctx,
        {"TAGS": "TagA", "price": "9.5"},
        {"TAGS": "TagB", "price": "12.5"},
        {"TAGS": "TagA", "price": "cheap"},
        {"TAGS": "TagA", "price": "20"},
    )
    response = PullMessageProcessor(filtering_broker).pull(
        peer_ctx, sql_pull("TAGS = 'TagA' AND price > 10.0"), allow_suspend=False
    )
    assert response is not None and bodies(response) == [b"body-3"]


async def test_sql92_pull_with_no_match_moves_past_the_scanned_entries(
    filtering_broker: BrokerState, peer_ctx: RequestContext
) -> None:
    await put(filtering_broker, peer_ctx, {"a": "1"}, {"a": "2"})
    response = PullMessageProcessor(filtering_broker).pull(peer_ctx, sql_pull("a > 100"), allow_suspend=False)
    assert response is not None
    assert (response.code, response.remark) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")
    assert response.ext_fields["nextBeginOffset"] == "2"


async def test_sql92_pull_uses_the_heartbeat_subscription_without_the_subscription_flag(
    filtering_broker: BrokerState, peer_ctx: RequestContext
) -> None:
    await put(filtering_broker, peer_ctx, {"region": "eu"}, {"region": "us"}, {"region": "apac"})
    register_heartbeat(
        filtering_broker,
        peer_ctx,
        SubscriptionData(TOPIC, "region IN ('us', 'apac')", sub_version=5, expression_type="SQL92"),
    )
    req = pull_request(sys_flag=0, subscription=None, subVersion="5")
    response = PullMessageProcessor(filtering_broker).pull(peer_ctx, req, allow_suspend=False)
    assert response is not None and bodies(response) == [b"body-1", b"body-2"]


async def test_malformed_sql92_in_the_request_answers_parse_failed_with_the_parser_message(
    filtering_broker: BrokerState, peer_ctx: RequestContext
) -> None:
    response = PullMessageProcessor(filtering_broker).pull(peer_ctx, sql_pull("a > 'x'"), allow_suspend=False)
    assert response is not None and response.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert response.remark == (
        "Invalid SQL92 expression: value 'x' cannot be compared with '>' at line 1, column 3 (position 2)"
    )
    for field in ("suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"):
        assert field in response.ext_fields


async def test_malformed_sql92_from_the_heartbeat_answers_filter_data_not_exist(
    make_broker: MakeBroker, peer_ctx: RequestContext
) -> None:
    """PullMessageProcessor looks the heartbeat's filter data up before it checks ``enablePropertyFilter``: with
    none compiled the answer is FILTER_DATA_NOT_EXIST, property filtering on or off."""
    for enabled in (True, False):
        broker = make_broker(enable_property_filter=enabled)
        register_heartbeat(broker, peer_ctx, SubscriptionData(TOPIC, "a IN (1)", expression_type="SQL92"))
        req = pull_request(sys_flag=0, subscription=None)
        response = PullMessageProcessor(broker).pull(peer_ctx, req, allow_suspend=False)
        assert response is not None and response.code == ResponseCode.FILTER_DATA_NOT_EXIST
        assert response.remark == "The broker's consumer filter data is not exist!Your expression may be wrong!"


async def test_sql92_is_refused_while_property_filtering_is_off(
    make_broker: MakeBroker, peer_ctx: RequestContext
) -> None:
    broker = make_broker()  # enablePropertyFilter defaults to false, as in RocketMQ
    for expression in ("a > 1", "a >"):
        response = PullMessageProcessor(broker).pull(peer_ctx, sql_pull(expression), allow_suspend=False)
        assert response is not None
        assert (response.code, response.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "The broker does not support consumer to filter message by SQL92",
        )


async def test_an_unknown_expression_type_is_refused(filtering_broker: BrokerState, peer_ctx: RequestContext) -> None:
    req = pull_request(subscription="//a", expressionType="XPATH", sys_flag=NO_SUSPEND)
    response = PullMessageProcessor(filtering_broker).pull(peer_ctx, req, allow_suspend=False)
    assert response is not None and response.code == ResponseCode.SYSTEM_ERROR


async def test_a_subscription_version_is_compiled_once(filtering_broker: BrokerState, peer_ctx: RequestContext) -> None:
    await put(filtering_broker, peer_ctx, {"a": "5"})
    processor = PullMessageProcessor(filtering_broker)
    for _ in range(3):
        response = processor.pull(peer_ctx, sql_pull("a = 5", version=7), allow_suspend=False)
        assert response is not None and bodies(response) == [b"body-0"]
    assert (len(processor.filters), processor.filters.hits) == (1, 2)
    processor.pull(peer_ctx, sql_pull("a = 6", version=8), allow_suspend=False)
    assert len(processor.filters) == 2


async def produce(served: ServedBroker, nursery: trio.Nursery, **props: str) -> None:
    producer = await served.connect_memory(nursery)
    await producer.send(send_request(properties=tags_props(None, **props)))
    answer = await producer.receive()
    assert answer is not None and answer.code == ResponseCode.SUCCESS


async def test_held_sql92_pull_wakes_only_for_a_matching_message(
    served_filtering: ServedBroker, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    served = served_filtering
    client = await served.connect_memory(nursery)
    req = sql_pull("color = 'red'", sys_flag=HELD)
    await client.send(req)
    await trio.testing.wait_all_tasks_blocked()
    assert served.hold.held_count == 1
    held_at = trio.current_time()
    await produce(served, nursery, color="blue")
    await produce(served, nursery, size="L")
    await trio.testing.wait_all_tasks_blocked()
    assert served.hold.held_count == 1 and served.hold.woken_by_arrival == 0
    await produce(served, nursery, color="red")
    response = await client.receive()
    assert response is not None and (response.opaque, response.code) == (req.opaque, ResponseCode.SUCCESS)
    assert [m.properties.get("color") for m in iter_records(response.body)] == ["red"]
    assert response.ext_fields["nextBeginOffset"] == "3"
    assert served.hold.woken_by_arrival == 1
    assert trio.current_time() == held_at  # woken by the arrival itself, no timer involved


@pytest.mark.timeout(30)
async def test_a_long_non_numeric_property_is_refused_in_linear_time(
    filtering_broker: BrokerState, peer_ctx: RequestContext
) -> None:
    """Reading text as a Java double used a pattern that backtracked polynomially on a long run of digits that does
    not end as a number: one 30,000-character property compared with a double literal held the event loop, and every
    client of the broker, for over a minute per pull. Double.valueOf refuses it (no match); a number that long is read
    (Infinity, as Java's)."""
    await put(filtering_broker, peer_ctx, {"price": "1" * 30_000 + "x"}, {"price": "1" * 30_000})
    response = PullMessageProcessor(filtering_broker).pull(peer_ctx, sql_pull("price > 1.0"), allow_suspend=False)
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert bodies(response) == [b"body-1"]


async def test_filter_support_retry_filters_the_retry_topic_with_the_groups_sql92(
    make_broker: MakeBroker, peer_ctx: RequestContext, tmp_path: Path
) -> None:
    """broker.conf's ``filterSupportRetry=true`` (ExpressionForRetryMessageFilter in RocketMQ 4.9.8's
    PullMessageProcessor) matches each message of ``%RETRY%<group>`` against the group's SQL92 subscription of the
    topic it came from (its RETRY_TOPIC property); a topic the group has no SQL92 subscription to, and the default
    (off), deliver them all. The setting used to be an unknown key, ignored."""
    conf = tmp_path / "broker.conf"
    conf.write_text("enablePropertyFilter=true\nfilterSupportRetry=true\n")
    config, unknown = load_broker_config(conf)
    assert unknown == []
    wanted = {"enable_property_filter", "filter_support_retry"}
    settings = {k: v for k, v in attrs.asdict(config, recurse=False).items() if k in wanted}
    retry = f"%RETRY%{GROUP}"
    pulled: dict[bool, list[bytes]] = {}
    for on, broker in ((True, make_broker(**settings)), (False, make_broker(enable_property_filter=True))):
        broker.topics.update_topic(TopicConfig(retry, 1, 1))
        broker.topics.update_topic(TopicConfig("Other", 1, 1))
        processor = SendMessageProcessor(broker)
        origins = [(TOPIC, "red"), (TOPIC, "blue"), ("Other", "blue"), (TOPIC, "red")]
        for i, (origin, color) in enumerate(origins):
            req = send_request(retry, f"body-{i}".encode(), properties=tags_props(RETRY_TOPIC=origin, color=color))
            response = await processor.process(peer_ctx, req)
            assert response is not None and response.code == ResponseCode.SUCCESS
        register_heartbeat(
            broker,
            peer_ctx,
            SubscriptionData(TOPIC, "color = 'red'", sub_version=5, expression_type="SQL92"),
            SubscriptionData(retry, "*", sub_version=5),
        )
        req = pull_request(retry, sys_flag=0, subscription=None, subVersion="5")
        response = PullMessageProcessor(broker).pull(peer_ctx, req, allow_suspend=False)
        assert response is not None and response.code == ResponseCode.SUCCESS
        pulled[on] = bodies(response)
    assert pulled[True] == [b"body-0", b"body-2", b"body-3"]
    assert pulled[False] == [b"body-0", b"body-1", b"body-2", b"body-3"]


async def test_filter_support_retry_bounds_a_retry_pulls_evaluation_as_a_topic_pulls(
    make_broker: MakeBroker, peer_ctx: RequestContext
) -> None:
    """With ``filterSupportRetry`` a pull of ``%RETRY%<group>`` evaluates the group's SQL92 subscription on each
    candidate too: a 2,000-term one refusing 800 retry messages is shown as few of them per pull as a pull of the topic
    is (its evaluation budget), not all 800 on the event loop every client shares, and the match is still reached."""
    from remoting.codec.message import MessageRecord

    broker = make_broker(enable_property_filter=True, filter_support_retry=True)
    retry = f"%RETRY%{GROUP}"
    broker.topics.update_topic(TopicConfig(retry, 1, 1))
    for i in range(800):
        props = tags_props(RETRY_TOPIC=TOPIC, a=f"v{i}")
        broker.store.append(
            MessageRecord(retry, f"skip-{i}".encode(), 0, properties=props, store_host=broker.store_host)
        )
    props = tags_props(RETRY_TOPIC=TOPIC, a="x1999")
    broker.store.append(MessageRecord(retry, b"wanted", 0, properties=props, store_host=broker.store_host))
    expression = " OR ".join(f"a = 'x{i}'" for i in range(2000))
    register_heartbeat(
        broker,
        peer_ctx,
        SubscriptionData(TOPIC, expression, sub_version=5, expression_type="SQL92"),
        SubscriptionData(retry, "*", sub_version=5),
    )
    processor = PullMessageProcessor(broker)
    offsets = [0]
    while True:
        req = pull_request(retry, sys_flag=0, subscription=None, subVersion="5", offset=offsets[-1])
        response = processor.pull(peer_ctx, req, allow_suspend=False)
        assert response is not None
        offsets.append(int(response.ext_fields["nextBeginOffset"]))
        if response.code == ResponseCode.SUCCESS:
            break
        assert (response.code, response.remark) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")
        assert offsets[-1] > offsets[-2]
    assert bodies(response) == [b"wanted"]
    assert offsets[-1] == 801
    assert len(offsets) > 3  # the 800 refused retry messages took several pulls, not one
