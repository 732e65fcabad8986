"""Client parts that need no broker: allocation, queue selection, fault avoidance, batch splitting, process queues,
local offsets, subscriptions, the reset-offset body and decompression."""

from __future__ import annotations

import zlib
from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from client.config import ClientConfig
from client.consumer.allocate import AllocateMessageQueueConsistentHash, allocate_average, allocate_average_by_circle
from client.consumer.consume import retry_copy_properties
from client.consumer.listener import exception_simple_desc
from client.consumer.offset_store import LocalFileOffsetStore
from client.consumer.process_queue import ProcessQueue
from client.consumer.subscription import build_subscription, tag_filter
from client.errors import ClientStateError, TopicRouteNotFoundError
from client.fault import LatencyFaultTolerance, not_available_for
from client.handlers import parse_reset_offset_body
from client.instance import MQClientInstance
from client.message import COMPRESSION_ZLIB, Message, uncompressed
from client.route import publish_info, subscribe_queues
from client.selector import select_by_hash, select_one_message_queue
from remoting.codec.bodies import BrokerData, MessageQueue, QueueData, TopicRouteData
from remoting.codec.message import (
    SYSFLAG_COMPRESSED,
    MessageExt,
    MessageRecord,
    decode_record,
    encode_record,
)
from remoting.codec.message_properties import java_string_hash

queues_st = st.lists(
    st.builds(MessageQueue, st.just("T"), st.sampled_from(["broker-a", "broker-b"]), st.integers(0, 15)),
    unique=True,
    min_size=1,
    max_size=40,
)
cids_st = st.lists(st.text("abc@123", min_size=1, max_size=6), unique=True, min_size=1, max_size=8)


@pytest.mark.parametrize("strategy", [allocate_average, allocate_average_by_circle])
@given(mqs=queues_st, cids=cids_st)
def test_allocation_gives_every_queue_to_exactly_one_consumer(strategy, mqs, cids) -> None:  # type: ignore[no-untyped-def]
    shares = [strategy("g", cid, mqs, list(reversed(cids))) for cid in cids]
    flat = [mq for share in shares for mq in share]
    assert sorted(flat) == sorted(mqs)
    sizes = [len(s) for s in shares]
    assert max(sizes) - min(sizes) <= 1 or len(mqs) < len(cids)


@given(mqs=queues_st, cids=cids_st)
def test_consistent_hash_gives_every_queue_to_exactly_one_consumer(mqs, cids) -> None:  # type: ignore[no-untyped-def]
    strategy = AllocateMessageQueueConsistentHash()
    flat = [mq for cid in cids for mq in strategy("g", cid, mqs, list(reversed(cids)))]
    assert sorted(flat) == sorted(mqs)


def test_average_allocation_gives_contiguous_blocks_like_java() -> None:
    mqs = [MessageQueue("T", "b", i) for i in range(8)]
    cids = ["c1", "c2", "c3"]
    assert [[mq.queue_id for mq in allocate_average("g", c, mqs, cids)] for c in cids] == [
        [0, 1, 2],
        [3, 4, 5],
        [6, 7],
    ]
    assert [[mq.queue_id for mq in allocate_average_by_circle("g", c, mqs, cids)] for c in cids] == [
        [0, 3, 6],
        [1, 4, 7],
        [2, 5],
    ]
    assert allocate_average("g", "stranger", mqs, cids) == []


def _route(*brokers: tuple[str, int]) -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData(name, n, n, 6) for name, n in brokers],
        broker_datas=[BrokerData("c", name, {0: f"127.0.0.1:{10911 + i}"}) for i, (name, _) in enumerate(brokers)],
    )


def test_round_robin_avoids_the_broker_that_just_failed() -> None:
    info = publish_info("T", _route(("broker-a", 2), ("broker-b", 2)))
    picks = [select_one_message_queue(info, "broker-a").broker_name for _ in range(10)]
    assert set(picks) == {"broker-b"}
    spread = {select_one_message_queue(info, None) for _ in range(4)}
    assert len(spread) == 4


def test_the_first_send_of_each_new_producer_does_not_always_go_to_the_same_queue() -> None:
    """Java's TopicPublishInfo.sendWhichQueue is a ThreadLocalIndex that starts at a random value, so producers that
    send a few messages each (a script, a short-lived worker) spread them over the queues."""
    info = _route(("broker-a", 8))
    firsts = {select_one_message_queue(publish_info("Spread", info), None).queue_id for _ in range(64)}
    assert len(firsts) > 1, firsts


def test_clients_spread_over_the_name_servers_instead_of_all_asking_the_first() -> None:
    """NettyRemotingClient shuffles the name server list and starts namesrvIndex at a random value, so a fleet of
    clients spreads its route lookups. 64 clients all on the first of two: a 2**-63 chance."""
    config = ClientConfig(namesrv_addr="10.0.0.1:9876;10.0.0.2:9876")
    firsts = {MQClientInstance(attrs.evolve(config, instance_name=f"n{i}")).current_namesrv for i in range(64)}
    assert firsts == {"10.0.0.1:9876", "10.0.0.2:9876"}


async def test_a_client_without_name_servers_can_still_be_built() -> None:
    """An empty name server list (``Producer(group, "")``) builds the instance; a lookup then raises
    TopicRouteNotFoundError (Java: "No name server address" when used), not the random start's empty range."""
    instance = MQClientInstance(ClientConfig(namesrv_addr=""))
    assert instance.config.namesrv_addr == ()
    with pytest.raises(TopicRouteNotFoundError):
        await instance.query_route("Anything")


def test_latency_fault_avoidance_skips_slow_brokers_until_their_time_is_up() -> None:
    now = [100.0]
    fault = LatencyFaultTolerance(lambda: now[0])
    info = publish_info("T", _route(("broker-a", 2), ("broker-b", 2)))
    fault.report("broker-a", 0, failed=True)  # out for 10 minutes, as a 30 s latency would be
    assert not fault.is_available("broker-a")
    assert {select_one_message_queue(info, None, fault).broker_name for _ in range(10)} == {"broker-b"}
    now[0] += 601
    assert fault.is_available("broker-a")
    assert not_available_for(40) == 0 and not_available_for(600) == 30000 and not_available_for(20000) == 600000


def test_a_failed_attempt_keeps_its_real_latency_for_ranking_the_unavailable_brokers() -> None:
    """Java's MQFaultStrategy.updateFaultItem picks the unavailable duration for 30 s but records the real latency,
    which pickOneAtLeast ranks by: the broker that failed fast is the better one to try."""
    fault = LatencyFaultTolerance(lambda: 100.0)
    fault.report("broker-b", 5000, failed=True)
    fault.report("broker-a", 100, failed=True)
    assert not fault.is_available("broker-a") and not fault.is_available("broker-b")
    assert fault.pick_one_at_least() == "broker-a"


def test_hash_selector_matches_java_string_hash() -> None:
    mqs = [MessageQueue("T", "b", i) for i in range(4)]
    for key in ["order-1", "order-2", "ünïcode", ""]:
        assert select_by_hash(mqs, Message("T", b"x"), key).queue_id == abs(java_string_hash(key)) % 4


def test_routes_list_writable_queues_of_brokers_with_a_master_and_readable_ones_sorted() -> None:
    route = TopicRouteData(
        queue_datas=[QueueData("b", 2, 3, 6), QueueData("a", 1, 1, 4), QueueData("orphan", 2, 2, 6)],
        broker_datas=[
            BrokerData("c", "a", {0: "x:1"}),
            BrokerData("c", "b", {0: "y:1"}),
            BrokerData("c", "orphan", {1: "z:1"}),
        ],
    )
    assert [(mq.broker_name, mq.queue_id) for mq in publish_info("T", route).message_queues] == [
        ("b", 0),
        ("b", 1),
        ("b", 2),
    ]
    assert [(mq.broker_name, mq.queue_id) for mq in subscribe_queues("T", route)] == [
        ("a", 0),
        ("b", 0),
        ("b", 1),
        ("orphan", 0),
        ("orphan", 1),
    ]
    ordered = publish_info("T", attrs.evolve(route, order_topic_conf="a:2;b:1"))
    assert ordered.order_topic and [(mq.broker_name, mq.queue_id) for mq in ordered.message_queues] == [
        ("a", 0),
        ("a", 1),
        ("b", 0),
    ]


def _msg(offset: int, body: bytes = b"xx") -> MessageExt:
    raw = encode_record(MessageRecord(topic="T", body=body), queue_offset=offset)
    return decode_record(raw)


def test_the_copy_a_failed_send_back_sends_to_the_retry_topic_is_no_half_message() -> None:
    """Java's DefaultMQPushConsumerImpl.sendMessageBack clears TRAN_MSG from the copy it sends to ``%RETRY%`` itself:
    a committed transactional message keeps ``TRAN_MSG=true``, and the copy must not become a half message."""
    props = "TRAN_MSG\x01true\x02PGROUP\x01pg\x02REAL_TOPIC\x01T\x02MIN_OFFSET\x010"
    committed = decode_record(encode_record(MessageRecord(topic="T", body=b"c", properties=props, reconsume_times=1)))
    copy = retry_copy_properties(committed, "ORIGIN")
    assert copy == {"PGROUP": "pg", "REAL_TOPIC": "T", "RETRY_TOPIC": "T", "ORIGIN_MESSAGE_ID": "ORIGIN", "DELAY": "4"}


def test_process_queue_commits_the_smallest_offset_in_flight() -> None:
    pq = ProcessQueue()
    msgs = [_msg(i) for i in range(5)]
    pq.put_messages(msgs)
    pq.put_messages([msgs[0]])  # a duplicate is ignored
    assert (pq.msg_count, pq.msg_size, pq.max_span) == (5, 10, 4)
    assert pq.remove_messages([msgs[1], msgs[2]]) == 0
    assert pq.remove_messages([msgs[0]]) == 3
    assert pq.remove_messages([msgs[3], msgs[4]]) == 5
    assert pq.msg_count == 0 and pq.msg_size == 0


def test_process_queue_info_gives_javas_fields_with_loop_times_in_wall_clock_ms() -> None:
    """ProcessQueueInfo as Java's fillProcessQueueInfo: cached (not taken) and taken (orderly) offsets, and the loop
    clock times converted to wall-clock ms; a new queue's times start when it is created, as Java's constructor."""
    pq = ProcessQueue.created_at(10.0)
    pq.put_messages([_msg(i) for i in range(4)])
    pq.take_messages(1)
    pq.last_pull_time = 12.0
    info = pq.info(7, now=12.5, now_ms=1_000_000)
    assert (info["commitOffset"], info["cachedMsgMinOffset"], info["cachedMsgMaxOffset"], info["cachedMsgCount"]) == (
        7, 1, 3, 3,
    )  # fmt: skip
    assert (info["transactionMsgMinOffset"], info["transactionMsgCount"]) == (0, 1)
    assert (info["lastLockTimestamp"], info["lastConsumeTimestamp"], info["lastPullTimestamp"]) == (
        997_500, 997_500, 999_500,
    )  # fmt: skip


def test_process_queue_orderly_take_rollback_and_commit() -> None:
    pq = ProcessQueue()
    pq.put_messages([_msg(i) for i in range(4)])
    taken = pq.take_messages(2)
    assert [m.queue_offset for m in taken] == [0, 1]
    pq.make_messages_to_consume_again(taken)
    assert [m.queue_offset for m in pq.take_messages(3)] == [0, 1, 2]
    assert pq.commit() == 3
    assert pq.msg_count == 1 and pq.commit() == -1


def test_process_queue_holds_a_local_retrys_copy_so_a_timeout_sends_back_its_count() -> None:
    """Java raises reconsumeTimes of the very message its ProcessQueue holds; ours are frozen, so the copy counted for a
    local retry replaces the held one, and cleanExpiredMsg's head is that copy."""
    pq = ProcessQueue()
    held = _msg(0)
    pq.put_messages([held, _msg(1)])
    pq.mark_consume_started([held], now=0.0)
    pq.replace_messages([attrs.evolve(held, reconsume_times=1), attrs.evolve(_msg(7), reconsume_times=1)])
    head = pq.expired_head(now=61.0, timeout=60.0)
    assert head is not None and (head.queue_offset, head.reconsume_times) == (0, 1)
    assert (pq.msg_count, pq.msg_size) == (2, 4)  # offset 7 was not held: ignored
    assert pq.remove_messages([head]) == 1


def test_a_retry_topic_copy_sent_after_a_failed_send_back_carries_no_stale_reconsume_time() -> None:
    """DefaultMQPushConsumerImpl.sendMessageBack's fallback sets RECONSUME_TIME to reconsumeTimes + 1, which the
    producer moves into the header of the %RETRY% send: the copy stores no RECONSUME_TIME property, whatever the
    message carried (a 5.x message's delivery attempt), and the header's count is the one that counts."""
    props = {"RECONSUME_TIME": "5", "MAX_RECONSUME_TIMES": "16", "UNIQ_KEY": "U1", "TAGS": "t"}
    msg = attrs.evolve(decode_record(encode_record(MessageRecord(topic="T", body=b"x"))), properties=props,
                       reconsume_times=2)  # fmt: skip
    assert retry_copy_properties(msg, "ORIGIN") == {
        "UNIQ_KEY": "U1",
        "TAGS": "t",
        "RETRY_TOPIC": "T",
        "ORIGIN_MESSAGE_ID": "ORIGIN",
        "DELAY": "5",
    }


def test_exception_simple_desc_leaves_out_an_empty_message_as_java() -> None:
    """Java's Throwable.toString is just the class name when the message is empty."""
    try:
        raise ValueError()
    except ValueError as exc:
        empty = exception_simple_desc(exc)
    try:
        raise ValueError("bad")
    except ValueError as exc:
        worded = exception_simple_desc(exc)
    here = "test_exception_simple_desc_leaves_out_an_empty_message_as_java(test_units.py:"
    assert empty.startswith(f"ValueError, {here}"), empty
    assert worded.startswith(f"ValueError: bad, {here}"), worded


async def test_local_offset_store_round_trips_through_its_file(tmp_path: Path) -> None:
    mq = MessageQueue("T", "broker-a", 3)
    store = LocalFileOffsetStore(tmp_path, "10.0.0.1@123", "g")
    store.update(mq, 42)
    store.update(mq, 40, increase_only=True)
    await store.persist_all([mq])
    again = LocalFileOffsetStore(tmp_path, "10.0.0.1@123", "g")
    await again.load()
    assert await again.read(mq) == 42
    store.path.write_text("{not json")
    broken = LocalFileOffsetStore(tmp_path, "10.0.0.1@123", "g")
    await broken.load()
    assert await broken.read(mq) is None


def test_tag_expressions_become_subscription_data() -> None:
    sub = build_subscription("T", " TagA || TagB ||TagA ")
    assert sub.tags_set == ("TagA", "TagB") and sub.code_set == (java_string_hash("TagA"), java_string_hash("TagB"))
    assert tag_filter(sub) == frozenset({"TagA", "TagB"})
    assert tag_filter(build_subscription("T", "*")) is None and build_subscription("T", "").sub_string == "*"
    assert tag_filter(build_subscription("T", "a > 1", "SQL92")) is None


@pytest.mark.parametrize("expression", ["||", "||||"])
def test_a_tag_expression_without_any_tag_is_refused(expression: str) -> None:
    """Java's FilterAPI.buildSubscriptionData: ``"||".split("\\|\\|")`` is empty, "subString split error", so
    ``subscribe`` fails at once, where the broker would answer SUBSCRIPTION_PARSE_FAILED to every pull."""
    with pytest.raises(ValueError, match="subString split error"):
        build_subscription("T", expression)


def test_a_padded_star_is_sent_as_written_and_names_the_tag_star() -> None:
    """FilterAPI.buildSubscriptionData only
    treats an expression *equal* to "*" (or empty) as SUB_ALL: " * " keeps subString " * " and is split like any
    other, giving tagsSet {"*"} and codeSet {"*".hashCode() = 42}; a Java consumer of " * " gets only messages tagged
    "*". Stripped before that test, it was sent as "*" and received everything."""
    sub = build_subscription("T", " * ")
    assert (sub.sub_string, sub.tags_set, sub.code_set) == (" * ", ("*",), (42,))
    assert tag_filter(sub) == frozenset({"*"})


def test_a_blank_tag_expression_is_sent_as_written_with_no_tag() -> None:
    """Java: "   " is neither empty nor "*", so it is sent as "   " with no tags (the split yields one blank part,
    trimmed away, no "subString split error"), and the broker's codeSet check then matches nothing, as for " || ",
    which is sent as written too. It was turned into "*" (everything)."""
    sub = build_subscription("T", "   ")
    assert (sub.sub_string, sub.tags_set, sub.code_set) == ("   ", (), ())


def test_a_tag_expression_is_sent_as_written() -> None:
    """Java sends ``subString`` untrimmed; trimming " || " would send "||", which the broker refuses."""
    assert build_subscription("T", " TagA || ").sub_string == " TagA || "
    blank = build_subscription("T", " || ")
    assert (blank.sub_string, blank.tags_set) == (" || ", ())


def test_fastjson_reset_offset_body_is_read() -> None:
    body = (
        b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:12,'
        b'{"brokerName":"broker-a","queueId":1,"topic":"T"}:7}}'
    )
    assert parse_reset_offset_body(body) == {
        MessageQueue("T", "broker-a", 0): 12,
        MessageQueue("T", "broker-a", 1): 7,
    }


def test_zlib_bodies_are_inflated_and_unknown_codecs_left_alone() -> None:
    body = b"abc" * 1000
    packed = decode_record(
        encode_record(
            MessageRecord(topic="T", body=zlib.compress(body), sys_flag=SYSFLAG_COMPRESSED | COMPRESSION_ZLIB)
        )
    )
    assert uncompressed(packed).body == body and not uncompressed(packed).sys_flag & SYSFLAG_COMPRESSED
    unknown = attrs.evolve(packed, sys_flag=SYSFLAG_COMPRESSED | (4 << 8))  # no CompressionType has value 4
    assert uncompressed(unknown) is unknown


def test_message_properties_carry_tags_keys_delay_and_wait() -> None:
    msg = Message("T", b"x", tags="A", keys=["k1", "k2"], delay_level=3, wait_store_msg_ok=False, properties={"u": "v"})
    assert msg.all_properties() == {"u": "v", "TAGS": "A", "KEYS": "k1 k2", "DELAY": "3", "WAIT": "false"}


async def test_two_running_instances_may_not_share_a_client_id() -> None:
    config = ClientConfig(namesrv_addr="127.0.0.1:1", instance_name="twin")
    async with MQClientInstance(config) as first:
        with pytest.raises(ClientStateError, match="twin"):
            async with MQClientInstance(config):
                pass
        assert first.client_id.endswith("@twin")
    async with MQClientInstance(config):
        pass


def test_a_broadcasting_offset_file_is_kept_under_default_unless_the_instance_was_named() -> None:
    """Java's broadcasting consumers keep the instance name DEFAULT: their offset file outlives the process."""
    assert ClientConfig(client_ip="10.0.0.1").offset_file_client_id == "10.0.0.1@DEFAULT"
    named = ClientConfig(client_ip="10.0.0.1", instance_name="edge-7", unit_name="u")
    assert named.offset_file_client_id == named.client_id == "10.0.0.1@edge-7@u"


def test_a_blank_unit_name_adds_nothing_to_the_client_id() -> None:
    """ClientConfig.buildMQClientId appends ``@unitName`` only when it is not blank (``UtilAll.isBlank``): a unit
    name of spaces leaves the client id ``ip@instanceName``, as brokers and admin tools list it."""
    assert ClientConfig(client_ip="10.0.0.1", instance_name="edge-7", unit_name=" \t").client_id == "10.0.0.1@edge-7"
