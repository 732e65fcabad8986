"""rocketmq-exporter reads our broker: its parsing rules (tests/broker/exporter_rules.py, ported from its source)
accept every key of GET_BROKER_RUNTIME_INFO, over the wire and after a minute of traffic in virtual time, and its
VIEW_BROKER_STATS_DATA queries all answer. The values are checked against what the test did and against the file
system, so a key that parses but lies fails too."""

from __future__ import annotations

import math
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from broker.stats import GROUP_GET_LATENCY, SNDBCK_PUT_NUMS, TOPIC_PUT_SIZE
from client import Message, Producer
from processors.admin import AdminBrokerProcessor
from processors.pull import PullMessageProcessor
from processors.send import SendMessageProcessor
from processors.send_back import ConsumerSendMsgBackProcessor
from processors.stats import StatsProcessor
from remoting.client import RemotingClient
from remoting.codec.bodies import KVTable
from remoting.codec.bodies.stats import BrokerStatsData
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.message import decode_record
from remoting.connection import Connection
from remoting.dispatch import broker_pools
from remoting.processor import RequestContext
from tests.broker.exporter_rules import (
    DISTRIBUTION_KEYS,
    LONG_KEYS,
    STATS_QUERIES,
    ExporterRejected,
    java_split,
    load_capacity,
    parse_double,
    parse_long,
    parse_runtime_stats,
)
from tests.processors.conftest import GROUP, PEER, TOPIC, open_broker, pull_request, send_request

COMMIT_AND_SUBSCRIPTION = 0x1 | 0x4
NO_SUSPEND = 0x4


def assert_capacity_matches_the_file_system(table: dict[str, str], root: Path) -> None:
    """The exporter's reading of commitLogDirCapacity is statvfs within the text's rounding (0.05 of its unit); free
    space may also have moved by up to 1 % of the disk meanwhile (other processes write)."""
    total, free = load_capacity(table["commitLogDirCapacity"])
    st = os.statvfs(root)
    real_total, real_free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize

    def rounding(value: int) -> float:
        return 0.05 * 1024.0 ** int(math.log(value) / math.log(1024)) if value >= 1024 else 0.0

    assert abs(total - real_total) <= rounding(real_total)
    assert abs(free - real_free) <= rounding(real_free) + 0.01 * real_total


def stats_keys(topic: str, group: str, cluster: str) -> dict[str, str]:
    return {"topic": topic, "topic@group": f"{topic}@{group}", "cluster": cluster}


# ---- the rules themselves --------------------------------------------------------------------------------------


def test_the_ported_java_primitives_are_as_strict_as_java() -> None:
    assert parse_long("-12") == -12 and parse_long("+7") == 7
    for bad in (" 1", "1.0", "", "1_000", "0x10", None):
        with pytest.raises(ExporterRejected):
            parse_long(bad)
    assert parse_double(" 1.5 ") == 1.5 and parse_double("1.0E7") == 1e7 and parse_double("2d") == 2.0
    assert parse_double("Infinity") == float("inf") and parse_double("0x1.8p1") == 3.0
    for bad in ("inf", "nan", "1_0", "", "1,5", None):
        with pytest.raises(ExporterRejected):
            parse_double(bad)
    assert java_split("12.5  ", " ") == ["12.5"] and java_split(" 1", " ") == ["", "1"]


def test_a_table_missing_a_key_or_a_bucket_is_rejected() -> None:
    table = {key: "0" for key in LONG_KEYS}
    table.update(
        {
            "brokerVersion": "409",
            "consumeQueueDiskRatio": "0.5",
            "commitLogDiskRatio": "0.5",
            "putMessageAverageSize": "0.0",
            "putMessageDistributeTime": "null",
            "commitLogDirCapacity": "Total : 1.0 GiB, Free : 512.0 MiB.",
            "remainHowManyDataToFlush": "0 B",
            **{key: "0.0 0.0 0.0" for key in ("putTps", "getMissTps", "getTotalTps", "getFoundTps")},
            "getTransferedTps": "1.0  ",
        }
    )
    stats = parse_runtime_stats(table)
    assert (stats.capacity_total, stats.capacity_free) == (1024.0**3, 512 * 1024.0**2)
    assert stats.tps["getTransferedTps"].ten == 1.0 and stats.distribution == {}
    for key in ("dispatchMaxBuffer", "commitLogDirCapacity", "putTps", "putMessageDistributeTime"):
        with pytest.raises(ExporterRejected):
            parse_runtime_stats({k: v for k, v in table.items() if k != key})
    partial = "".join(f"[{k}]:1 " for k in DISTRIBUTION_KEYS[:-1])
    with pytest.raises(ExporterRejected):
        parse_runtime_stats({**table, "putMessageDistributeTime": partial})


# ---- a live broker over the wire ---------------------------------------------------------------------------------


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    async with RemotingClient() as remoting:
        yield remoting


async def test_the_exporter_accepts_a_live_brokers_answer_over_the_wire(
    embedded_cluster: EmbeddedCluster, client: RemotingClient
) -> None:
    async with Producer("exporter_pg", embedded_cluster.namesrv_addr) as producer:
        for i in range(20):
            await producer.send(Message("ExporterTopic", b"m%d" % i))
    broker = embedded_cluster.broker_addr
    answer = await client.invoke(broker, request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
    assert answer.code == ResponseCode.SUCCESS
    table = KVTable.decode(answer.body).table
    stats = parse_runtime_stats(table)
    store = embedded_cluster.controller.context.store
    assert stats.longs["putMessageTimesTotal"] == stats.longs["msgPutTotalTodayNow"] == 20
    assert stats.longs["putMessageSizeTotal"] == store.max_phy_offset
    assert stats.longs["earliestMessageTimeStamp"] == decode_record(store.look_message_by_offset(0)).store_timestamp
    assert stats.distribution == {}  # no minute has closed yet: Java's "null", which the exporter skips
    assert_capacity_matches_the_file_system(table, store.root)
    keys = stats_keys("ExporterTopic", "nobody", embedded_cluster.controller.config.broker_cluster_name)
    stats_manager = embedded_cluster.controller.context.stats
    with trio.fail_after(10):  # the topic's put items appear at the sampler's next one-second tick
        while stats_manager.item("TOPIC_PUT_SIZE", "ExporterTopic") is None:
            await trio.sleep(0.05)
    for name in ("TOPIC_PUT_NUMS", "TOPIC_PUT_SIZE", "BROKER_PUT_NUMS", "BROKER_GET_NUMS"):
        key = keys[STATS_QUERIES[name][0]]
        fields = {"statsName": name, "statsKey": key}
        view = await client.invoke(broker, request(RequestCode.VIEW_BROKER_STATS_DATA, fields), 5)
        if name == "BROKER_GET_NUMS":  # nothing was pulled: incBrokerGetNums never created it, as in RocketMQ
            assert (view.code, view.remark) == (ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
            continue
        assert view.code == ResponseCode.SUCCESS, (name, view.remark)
        BrokerStatsData.decode(view.body)


# ---- a minute of traffic in virtual time -------------------------------------------------------------------------


async def test_after_a_minute_of_traffic_every_key_parses_and_tells_what_happened(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    broker = open_broker(tmp_path / "broker")
    try:
        left, _right = trio.testing.memory_stream_pair()
        ctx: RequestContext = Connection(left, PEER, ("127.0.0.1", 10911)).context
        send, pull = SendMessageProcessor(broker), PullMessageProcessor(broker)
        offset = 0
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.stats.run)
            await trio.sleep(0.5)  # off the sampler's ticks
            for second in range(65):
                for _ in range(5):
                    answer = await send.process(ctx, send_request(body=b"x" * 100))
                    assert answer is not None and answer.code == ResponseCode.SUCCESS
                if second == 0:  # the first message comes back once, into the group's retry topic
                    back = request(
                        RequestCode.CONSUMER_SEND_MSG_BACK,
                        {"offset": "0", "group": GROUP, "delayLevel": "0", "originMsgId": "x", "originTopic": TOPIC},
                    )
                    answer = await ConsumerSendMsgBackProcessor(broker).process(ctx, back)
                    assert answer is not None and answer.code == ResponseCode.SUCCESS, answer
                found = await pull.process(
                    ctx, pull_request(offset=offset, sys_flag=COMMIT_AND_SUBSCRIPTION, commit_offset=offset)
                )
                assert found is not None and found.code == ResponseCode.SUCCESS
                offset += 5
                await pull.process(ctx, pull_request(offset=offset, sys_flag=NO_SUSPEND))
                await trio.sleep(1)
            nursery.cancel_scope.cancel()

        info = await AdminBrokerProcessor(broker, broker_pools(cpus=2)).process(
            ctx, request(RequestCode.GET_BROKER_RUNTIME_INFO)
        )
        assert info is not None
        table = KVTable.decode(info.body).table
        stats = parse_runtime_stats(table)
        stored = 65 * 5 + 1  # the sends and the send-back's retry
        assert stats.longs["putMessageTimesTotal"] == stats.longs["msgPutTotalTodayNow"] == stored
        assert stats.longs["msgGetTotalTodayNow"] == 65 * 5
        assert stats.longs["putMessageSizeTotal"] == broker.store.max_phy_offset
        assert stats.doubles["putMessageAverageSize"] == broker.store.max_phy_offset / stored
        # The first minute's sends (seconds 0.5 .. 59.5) are in the closed window, in some bucket.
        assert sorted(stats.distribution) == sorted(DISTRIBUTION_KEYS)
        assert sum(stats.distribution.values()) == 60 * 5
        assert 0.0 <= stats.doubles["putLatency99"] <= stats.doubles["putLatency999"]
        assert stats.tps["putTps"].ten == 5.0 and stats.tps["getFoundTps"].sixty == 1.0
        assert stats.longs["sendThreadPoolQueueCapacity"] == 10_000
        assert (
            stats.longs["earliestMessageTimeStamp"]
            == decode_record(broker.store.look_message_by_offset(0)).store_timestamp
        )
        assert_capacity_matches_the_file_system(table, broker.store.root)

        assert sum(item.value for item in broker.stats.sets[TOPIC_PUT_SIZE]) == broker.store.max_phy_offset
        latency = broker.stats.item(GROUP_GET_LATENCY, f"0@{TOPIC}@{GROUP}")
        assert latency is not None and latency.times == 65
        keys = stats_keys(TOPIC, GROUP, broker.config.broker_cluster_name)
        for name, (kind, field) in STATS_QUERIES.items():
            view = await StatsProcessor(broker).process(
                ctx, request(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": keys[kind]})
            )
            assert view is not None and view.code == ResponseCode.SUCCESS, (name, view.remark)
            minute = BrokerStatsData.decode(view.body).stats_minute
            reported = minute.sum if field == "sum" else minute.tps
            expected = {"SNDBCK_PUT_NUMS": 1, "TOPIC_PUT_NUMS": 5.0, "GROUP_GET_NUMS": 5.0, "BROKER_GET_NUMS": 5.0}
            if name in expected:
                assert reported == expected[name], name
        sndbck = broker.stats.item(SNDBCK_PUT_NUMS, f"{TOPIC}@{GROUP}")
        assert sndbck is not None and sndbck.value == 1
    finally:
        broker.store.close()


def test_put_latency_percentiles_round_as_java_s_format() -> None:
    """StoreStatsService.getRuntimeInfo prints putLatency99 and putLatency999 with ``String.format("%.2f")``
    (store/src/main/java/org/apache/rocketmq/store/StoreStatsService.java), which rounds the double's shortest decimal
    half up: 40 puts under a millisecond interpolate to 39/40 = 0.975, Java 17's ``0.98``. Python's ``%.2f`` rounds
    the binary value, just below the tie, to ``0.97``."""
    from broker.stats.latency import PutLatencyStats

    stats = PutLatencyStats()
    for _ in range(40):
        stats.record(0)
    stats.roll_window()
    entries = stats.runtime_entries()
    assert (entries["putLatency99"], entries["putLatency999"]) == ("0.98", "0.98")
