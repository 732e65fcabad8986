"""The broker's metric families from a real broker context (processors driven directly): lag, inflight and ready
messages against offsets set by real pulls and commits, the per-topic message types, the DLQ counter, and text that
prometheus-client renders and parses back."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing
from prometheus_client import generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector, CollectorRegistry

from broker.metrics.families import broker_families
from broker.metrics.snapshot import take_snapshot
from processors.client_channels import ClientChannelInfo
from processors.pull import PullMessageProcessor
from processors.send import SendMessageProcessor
from processors.send_back import ConsumerSendMsgBackProcessor
from remoting.codec.bodies import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData
from remoting.codec.codes import LanguageCode, RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.connection import Connection
from remoting.dispatch import broker_pools
from store.metadata_files import TopicConfig
from tests.processors.conftest import GROUP, PEER, TOPIC, open_broker, pull_request, send_request

NO_SUSPEND = 0x4
COMMIT = 0x1


def render(families: list[Metric]) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Through prometheus-client's text format and its parser, as Prometheus would read them."""

    class Fixed(Collector):
        def collect(self) -> list[Metric]:
            return families

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Fixed())
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


async def test_lag_inflight_and_ready_follow_pulls_and_commits(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    broker = open_broker(tmp_path / "broker")
    try:
        left, _right = trio.testing.memory_stream_pair()
        connection = Connection(left, PEER, ("127.0.0.1", 10911))
        ctx = connection.context
        broker.topics.update_topic(TopicConfig("OrderTopic", 1, 1, order=True))
        broker.clients.register_consumer(
            GROUP,
            ClientChannelInfo(connection, "client-1", LanguageCode.JAVA, 409),
            ConsumeType.CONSUME_PASSIVELY,
            MessageModel.CLUSTERING,
            ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            [SubscriptionData(TOPIC), SubscriptionData(f"%RETRY%{GROUP}")],
            notify=False,
        )
        send, pull = SendMessageProcessor(broker), PullMessageProcessor(broker)
        broker.stats.start_counting()
        for _ in range(10):
            answer = await send.process(ctx, send_request())
            assert answer is not None and answer.code == ResponseCode.SUCCESS
        answer = await send.process(ctx, send_request("OrderTopic"))
        assert answer is not None and answer.code == ResponseCode.SUCCESS
        # The consumer pulls 6 of queue 0's 10 messages and commits 2.
        found = await pull.process(ctx, pull_request(offset=0, max_msgs=6, sys_flag=NO_SUSPEND))
        assert found is not None and found.code == ResponseCode.SUCCESS
        await pull.process(ctx, pull_request(offset=10, sys_flag=NO_SUSPEND | COMMIT, commit_offset=2))
        back = request(
            RequestCode.CONSUMER_SEND_MSG_BACK,
            {"offset": "0", "group": GROUP, "delayLevel": "-1", "originMsgId": "x", "originTopic": TOPIC},
        )
        answer = await ConsumerSendMsgBackProcessor(broker).process(ctx, back)
        assert answer is not None and answer.code == ResponseCode.SUCCESS

        snapshot = take_snapshot(broker, broker_pools(cpus=2))
        (lag,) = snapshot.lags  # the retry topic is skipped, as in RocketMQ
        assert (lag.group, lag.topic, lag.lag, lag.inflight, lag.ready) == (GROUP, TOPIC, 8, 4, 4)
        assert lag.earliest_unconsumed_ms == broker.store.message_store_timestamp(TOPIC, 0, 2)
        assert lag.earliest_unpulled_ms == broker.store.message_store_timestamp(TOPIC, 0, 6)

        common = {"cluster": "c", "node_type": "broker", "node_id": "b"}
        samples = render(list(broker_families(snapshot, common)))
        assert samples["rocketmq_consumer_lag_messages"] == [
            ({**common, "consumer_group": GROUP, "topic": TOPIC, "is_retry": "false", "is_system": "false"}, 8.0)
        ]
        messages_in = {s[0]["topic"]: (s[0]["message_type"], s[1]) for s in samples["rocketmq_messages_in_total"]}
        assert messages_in == {TOPIC: ("normal", 10.0), "OrderTopic": ("fifo", 1.0)}  # no %DLQ% topic
        dlq = samples["rocketmq_send_to_dlq_messages_total"]
        assert [(s[0]["consumer_group"], s[0]["topic"], s[1]) for s in dlq] == [(GROUP, TOPIC, 1.0)]
        (connections,) = samples["rocketmq_consumer_connections"]
        assert (connections[0]["version"], connections[0]["language"], connections[1]) == ("v4_9_8", "java", 1.0)
        out = samples["rocketmq_messages_out_total"]
        assert [(s[0]["topic"], s[0]["consumer_group"], s[1]) for s in out] == [(TOPIC, GROUP, 6.0)]
    finally:
        broker.store.close()
