"""The broker's metric families from a real broker context (processors driven directly): lag, inflight and ready
messages against offsets set by real pulls and commits, the per-topic message types, the DLQ counter, the common
labels, and text that prometheus-client renders and parses back."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing
from prometheus_client import generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector, CollectorRegistry

from broker.context import BrokerState
from broker.embedded import EmbeddedCluster
from broker.metrics.families import broker_families
from broker.metrics.snapshot import take_snapshot
from broker.pop import PopService
from broker.timer.timer_store import latency_seconds
from client import LitePullConsumer, Message, MessageExt, Producer
from client.admin import Admin
from processors.admin import AdminBrokerProcessor
from processors.client_channels import ClientChannelInfo
from processors.offsets import ConsumerOffsetProcessor
from processors.pull import PullMessageProcessor
from processors.send import SendMessageProcessor
from processors.send_back import ConsumerSendMsgBackProcessor
from remoting.codec.bodies import ConsumeFromWhere, ConsumeType, MessageModel, MessageQueue, SubscriptionData
from remoting.codec.codes import LanguageCode, RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.connection import Connection
from remoting.dispatch import broker_pools
from remoting.processor import RequestContext
from remoting.prometheus import metrics_labels
from store.metadata_files import TopicConfig
from tests.conftest import SMALL_STORE
from tests.processors.conftest import GROUP, PEER, TOPIC, open_broker, pull_request, send_request, tags_props
from tests.semantics.helpers import create_topic, use_virtual_store_clock

NO_SUSPEND = 0x4
COMMIT = 0x1
COMMON = {"cluster": "c", "node_type": "broker", "node_id": "b"}


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


async def samples_once_delivered(cluster: EmbeddedCluster, message: Message) -> dict[str, list[tuple[dict, float]]]:
    """Send ``message`` (delayed) to its new one-queue topic, wait until the delivery is in queue 0 (the store on the
    virtual clock), and render the broker's families."""
    use_virtual_store_clock(cluster)
    controller = cluster.controller
    await create_topic(cluster, message.topic, queues=1)
    async with Producer(f"pg-{message.topic}", cluster.namesrv_addr) as producer:
        await producer.send(message)
    store = controller.context.store
    with trio.fail_after(60):
        while store.max_offset_in_queue(message.topic, 0) < 1:
            await trio.sleep(0.5)
    return render(list(broker_families(take_snapshot(controller.context, controller.pools), COMMON)))


def online_consumer(broker: BrokerState, subscriptions: list[SubscriptionData]) -> RequestContext:
    """Register ``GROUP``'s one push consumer (a Java 4.9.8 client) with ``subscriptions``; its request context."""
    left, _right = trio.testing.memory_stream_pair()
    connection = Connection(left, PEER, ("127.0.0.1", 10911))
    broker.clients.register_consumer(
        GROUP,
        ClientChannelInfo(connection, "client-1", LanguageCode.JAVA, 409),
        ConsumeType.CONSUME_PASSIVELY,
        MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        subscriptions,
        notify=False,
    )
    return connection.context


async def test_lag_inflight_and_ready_follow_pulls_and_commits(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    broker = open_broker(tmp_path / "broker")
    try:
        broker.topics.update_topic(TopicConfig("OrderTopic", 1, 1, order=True))
        ctx = online_consumer(broker, [SubscriptionData(TOPIC), SubscriptionData(f"%RETRY%{GROUP}")])
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
        commit = request(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "commitOffset": "2"},
        )
        answer = await ConsumerOffsetProcessor(broker).process(ctx, commit)
        assert answer is not None and answer.code == ResponseCode.SUCCESS
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

        samples = render(list(broker_families(snapshot, COMMON)))
        assert samples["rocketmq_consumer_lag_messages"] == [
            ({**COMMON, "consumer_group": GROUP, "topic": TOPIC, "is_retry": "false", "is_system": "false"}, 8.0)
        ]
        messages_in = {s[0]["topic"]: (s[0]["message_type"], s[1]) for s in samples["rocketmq_messages_in_total"]}
        # No %DLQ% topic; the order topic's message has no sharding key: normal (5.3.3's getMessageType).
        assert messages_in == {TOPIC: ("normal", 10.0), "OrderTopic": ("normal", 1.0)}
        dlq = samples["rocketmq_send_to_dlq_messages_total"]
        assert [(s[0]["consumer_group"], s[0]["topic"], s[1]) for s in dlq] == [(GROUP, TOPIC, 1.0)]
        (connections,) = samples["rocketmq_consumer_connections"]
        assert (connections[0]["version"], connections[0]["language"], connections[1]) == ("v4_9_8", "java", 1.0)
        out = samples["rocketmq_messages_out_total"]
        assert [(s[0]["topic"], s[0]["consumer_group"], s[1]) for s in out] == [(TOPIC, GROUP, 6.0)]
    finally:
        broker.store.close()


async def test_ready_messages_and_queueing_latency_follow_pulls_that_matched_nothing(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3 (broker/.../processor/PullMessageProcessor.java ``tryCommitOffset``) records the pull offset
    (``commitPullOffset``, the pull's ``nextBeginOffset``) for every pull, found or not, and ConsumerLagCalculator
    reads ready = max offset - pull offset, queueing latency = now - store time at the pull offset. A consumer of tag
    A that pulled one A message, then skipped 5 B messages (NO_MATCHED_MSG, next offset 6) and committed 6, has
    nothing ready and no queueing latency (not 5 ready messages, more than its lag, and a latency growing for ever)."""
    broker = open_broker(tmp_path / "broker")
    try:
        ctx = online_consumer(broker, [SubscriptionData(TOPIC, "A")])
        send, pull = SendMessageProcessor(broker), PullMessageProcessor(broker)
        broker.stats.start_counting()
        answer = await send.process(ctx, send_request(properties=tags_props("A")))
        assert answer is not None and answer.code == ResponseCode.SUCCESS
        found = await pull.process(ctx, pull_request(offset=0, sys_flag=NO_SUSPEND, subscription="A"))
        assert found is not None and found.code == ResponseCode.SUCCESS
        for _ in range(5):
            answer = await send.process(ctx, send_request(properties=tags_props("B")))
            assert answer is not None and answer.code == ResponseCode.SUCCESS
        skipped = await pull.process(
            ctx, pull_request(offset=1, sys_flag=NO_SUSPEND | COMMIT, subscription="A", commit_offset=1)
        )
        assert skipped is not None and skipped.code == ResponseCode.PULL_RETRY_IMMEDIATELY
        assert skipped.ext_fields["nextBeginOffset"] == "6"
        # The consumer moves on to 6 and commits it (its next pull carries the commit).
        await pull.process(ctx, pull_request(offset=6, sys_flag=NO_SUSPEND | COMMIT, subscription="A", commit_offset=6))
        assert broker.offsets.query(GROUP, TOPIC, 0) == 6

        samples = render(list(broker_families(take_snapshot(broker, broker_pools(cpus=2)), COMMON)))
        labels = {**COMMON, "consumer_group": GROUP, "topic": TOPIC, "is_retry": "false", "is_system": "false"}
        assert samples["rocketmq_consumer_lag_messages"] == [(labels, 0.0)]
        assert samples["rocketmq_consumer_ready_messages"] == [(labels, 0.0)], "5 skipped messages read as ready"
        assert samples["rocketmq_consumer_queueing_latency_milliseconds"] == [(labels, 0.0)]
    finally:
        broker.store.close()


def test_metrics_label_cannot_replace_the_cluster_and_node_labels() -> None:
    """RocketMQ 5.3.3 (broker/.../metrics/BrokerMetricsManager.java ``init``) puts the ``metricsLabel`` pairs into
    LABEL_MAP first and then ``node_type``, ``cluster`` and ``node_id``, so those three always carry the broker's own
    values: ``metricsLabel=cluster:prod`` cannot put a broker in a cluster it is not in, nor ``node_id:x`` merge
    brokers' series."""
    labels = metrics_labels("broker", "broker-a", "DefaultCluster", "cluster:prod,node_id:x,node_type:y,env:test")
    assert labels == {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a", "env": "test"}


def test_topic_and_group_numbers_are_exported(tmp_path: Path) -> None:
    """RocketMQ 5.3.3 (broker/.../metrics/BrokerMetricsConstant.java, BrokerMetricsManager ``initStatsMetrics``)
    exports ``rocketmq_topic_number`` (the topic config table's size) and ``rocketmq_consumer_group_number`` (the
    subscription group table's size), gauges with only the common labels."""
    broker = open_broker(tmp_path / "broker")
    try:
        broker.topics.update_topic(TopicConfig("OneMore", 1, 1))
        samples = render(list(broker_families(take_snapshot(broker, broker_pools(cpus=2)), COMMON)))
        assert samples["rocketmq_topic_number"] == [(COMMON, float(len(broker.topics.topics)))]
        assert samples["rocketmq_consumer_group_number"] == [(COMMON, float(len(broker.groups.groups)))]
        assert len(broker.groups.groups) > 0  # the system groups count
    finally:
        broker.store.close()


async def test_the_topics_the_broker_made_at_start_are_labelled_system(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3's BrokerMetricsManager labels ``is_system`` with TopicValidator.isSystemTopic, whose set in the
    broker's JVM holds every topic TopicConfigManager made at start: the reply topic's traffic is system traffic."""
    broker = open_broker(tmp_path / "broker")
    try:
        reply = f"{broker.config.broker_cluster_name}_REPLY_TOPIC"
        ctx = online_consumer(broker, [SubscriptionData(TOPIC)])
        send = SendMessageProcessor(broker)
        broker.stats.start_counting()
        for topic in (reply, TOPIC):
            answer = await send.process(ctx, send_request(topic))
            assert answer is not None and answer.code == ResponseCode.SUCCESS
        samples = render(list(broker_families(take_snapshot(broker, broker_pools(cpus=2)), COMMON)))
        flags = {s[0]["topic"]: s[0]["is_system"] for s in samples["rocketmq_messages_in_total"]}
        assert flags == {reply: "true", TOPIC: "false"}
    finally:
        broker.store.close()


async def test_a_retry_send_past_its_max_reconsume_times_counts_as_sent_to_the_dlq(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A message sent to ``%RETRY%<group>`` that used up its reconsume times goes to the DLQ from the send path (a
    4.9 client's fallback when CONSUMER_SEND_MSG_BACK fails, an orderly consumer giving up). RocketMQ 5.3.3 counts it
    in ``rocketmq_send_to_dlq_messages_total`` there too
    (broker/src/main/java/org/apache/rocketmq/broker/processor/SendMessageProcessor.java ``handleRetryAndDLQ``),
    labelled with the request's producer group and topic."""
    broker = open_broker(tmp_path / "broker")
    try:
        ctx = online_consumer(broker, [SubscriptionData(TOPIC)])
        send = SendMessageProcessor(broker)
        broker.stats.start_counting()
        retry = f"%RETRY%{GROUP}"
        used_up = send_request(retry, reconsumeTimes="17", maxReconsumeTimes="16", producerGroup="CLIENT_INNER")
        answer = await send.process(ctx, used_up)
        assert answer is not None and answer.code == ResponseCode.SUCCESS
        assert broker.store.max_offset_in_queue(f"%DLQ%{GROUP}", 0) == 1
        answer = await send.process(ctx, send_request(retry, reconsumeTimes="3", maxReconsumeTimes="16"))
        assert answer is not None and answer.code == ResponseCode.SUCCESS  # a retry still within its times
        samples = render(list(broker_families(take_snapshot(broker, broker_pools(cpus=2)), COMMON)))
        dlq = samples.get("rocketmq_send_to_dlq_messages_total", [])
        assert [(s[0]["consumer_group"], s[0]["topic"], s[0]["is_system"], s[1]) for s in dlq] == [
            ("CLIENT_INNER", retry, "false", 1.0)
        ]
    finally:
        broker.store.close()


async def test_pop_redeliveries_from_the_retry_topic_count_as_outgoing_retries_of_the_topic(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """RocketMQ 5.3.3's PopMessageProcessor (broker/.../processor/PopMessageProcessor.java ``popMsgFromQueue``) adds
    what a pop read from the group's pop retry topic to ``rocketmq_messages_out_total`` and
    ``rocketmq_throughput_out_total`` under the topic the client popped, labelled ``is_retry="true"``; a 5.x
    consumer's redeliveries were missing from both (the retry topic's rows are left out, as for pulls)."""
    use_virtual_store_clock(embedded_cluster)
    controller = embedded_cluster.controller
    pop, revive = controller.pop_service()  # the broker's own: a second loop would revive each CK again
    await nursery.start(revive.run)
    await create_topic(embedded_cluster, "PopOut", queues=1)
    async with Producer("pg-pop-out", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("PopOut", b"again"))
    [_first] = pop.pop("pop_out_cg", "PopOut", 32, 30_000, None)
    await trio.sleep(35)  # not acked: revived into the group's pop retry topic
    [again] = pop.pop("pop_out_cg", "PopOut", 32, 30_000, None)
    assert (again.handle.topic_type, again.attempt) == (1, 2)

    samples = render(list(broker_families(take_snapshot(controller.context, controller.pools), COMMON)))
    retried = {**COMMON, "topic": "PopOut", "consumer_group": "pop_out_cg", "is_system": "false", "is_retry": "true"}
    assert (retried, 1.0) in samples["rocketmq_messages_out_total"]
    assert (retried, float(again.message.store_size)) in samples["rocketmq_throughput_out_total"]
    first_read = {**retried, "is_retry": "false"}  # a series of its own, as popMsgFromQueue labels it
    assert (first_read, 1.0) in samples["rocketmq_messages_out_total"]


async def test_pops_of_the_topic_are_labelled_is_retry_false_apart_from_pulls(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """RocketMQ 5.3.3's PopMessageProcessor (broker/.../processor/PopMessageProcessor.java ``popMsgFromQueue``)
    labels every pop it counts in ``rocketmq_messages_out_total`` and ``rocketmq_throughput_out_total`` with
    ``is_retry``, ``"false"`` for what it read from the topic itself, while a pull's
    (broker/.../processor/DefaultPullMessageResultHandler.java) carries no ``is_retry``: a group that pops and pulls
    the topic has two series. Ours counted its pops of the topic in the pull series, with no ``is_retry``."""
    controller = embedded_cluster.controller
    pop = PopService(controller.context, controller.timer.rewrite)
    await create_topic(embedded_cluster, "PopPull", queues=1)
    async with Producer("pg-pop-pull", embedded_cluster.namesrv_addr) as producer:
        for body in (b"one", b"two"):
            await producer.send(Message("PopPull", body))
    pulled: list[MessageExt] = []  # the pulls commit nothing: the pops read the same messages
    first = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    async with LitePullConsumer(
        "pop_pull_cg", embedded_cluster.namesrv_addr, auto_commit=False, consume_from_where=first
    ) as consumer:
        await consumer.assign([MessageQueue("PopPull", controller.config.broker_name, 0)])
        with trio.fail_after(30):
            while len(pulled) < 2:
                pulled += await consumer.poll(timeout=1.0)
    assert len(pulled) == 2
    popped = pop.pop("pop_pull_cg", "PopPull", 32, 30_000, None)
    assert len(popped) == 2
    size = float(sum(m.message.store_size for m in popped))

    samples = render(list(broker_families(take_snapshot(controller.context, controller.pools), COMMON)))
    pull_row = {**COMMON, "topic": "PopPull", "consumer_group": "pop_pull_cg", "is_system": "false"}
    pop_row = {**pull_row, "is_retry": "false"}
    mine = [s for s in samples["rocketmq_messages_out_total"] if s[0].get("consumer_group") == "pop_pull_cg"]
    assert sorted(mine, key=lambda s: len(s[0])) == [(pull_row, 2.0), (pop_row, 2.0)]
    assert (pop_row, size) in samples["rocketmq_throughput_out_total"]
    assert (pull_row, size) in samples["rocketmq_throughput_out_total"]


def test_the_processor_watermark_reports_every_processor_rocketmq_5_3_3_does(tmp_path: Path) -> None:
    """RocketMQ 5.3.3's BrokerMetricsManager (broker/src/main/java/org/apache/rocketmq/broker/metrics/
    BrokerMetricsManager.java ``initStatsMetrics``) records ``rocketmq_processor_watermark`` for twelve processors
    at every collection, an idle or absent pool as 0: a dashboard panel on ``processor="ack"``, ``"async_put"`` or
    ``"lite_pull"`` showed no data here."""
    broker = open_broker(tmp_path / "broker")
    try:
        samples = render(list(broker_families(take_snapshot(broker, broker_pools(cpus=2)), COMMON)))
        found = {labels["processor"]: value for labels, value in samples["rocketmq_processor_watermark"]}
        java = {"send", "async_put", "pull", "ack", "query_message", "client_manager", "heartbeat", "lite_pull"}
        java |= {"transaction", "consumer_manager", "admin", "reply"}
        assert set(found) == java
        assert found["ack"] == found["async_put"] == found["lite_pull"] == 0.0
    finally:
        broker.store.close()


async def test_dlq_and_incoming_counters_survive_deleting_the_topic_and_the_group(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3 counts ``rocketmq_send_to_dlq_messages_total`` and ``rocketmq_messages_in_total`` in
    OpenTelemetry counters (broker/src/main/java/org/apache/rocketmq/broker/metrics/BrokerMetricsManager.java), which
    nothing resets: deleting the topic or the group (DELETE_TOPIC_IN_BROKER, DELETE_SUBSCRIPTIONGROUP), whatever
    ``autoDeleteUnusedStats`` says, leaves their series as they were. Ours dropped both, so a panel summing them fell
    back."""
    broker = open_broker(tmp_path / "broker")
    try:
        ctx = online_consumer(broker, [SubscriptionData(TOPIC)])
        send = SendMessageProcessor(broker)
        broker.stats.start_counting()
        answer = await send.process(ctx, send_request())
        assert answer is not None and answer.code == ResponseCode.SUCCESS
        back = request(
            RequestCode.CONSUMER_SEND_MSG_BACK,
            {"offset": "0", "group": GROUP, "delayLevel": "-1", "originMsgId": "x", "originTopic": TOPIC},
        )
        answer = await ConsumerSendMsgBackProcessor(broker).process(ctx, back)
        assert answer is not None and answer.code == ResponseCode.SUCCESS
        before = render(list(broker_families(take_snapshot(broker, broker_pools(cpus=2)), COMMON)))
        admin = AdminBrokerProcessor(broker)
        for code, fields in (
            (RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": GROUP}),
            (RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": TOPIC}),
        ):
            answer = await admin.process(ctx, request(code, fields))
            assert answer is not None and answer.code == ResponseCode.SUCCESS, answer
        after = render(list(broker_families(take_snapshot(broker, broker_pools(cpus=2)), COMMON)))
        for name in ("rocketmq_send_to_dlq_messages_total", "rocketmq_messages_in_total"):
            assert before[name], name
            assert after.get(name) == before[name], name
    finally:
        broker.store.close()


async def test_a_delay_level_delivery_counts_as_incoming_delay_under_the_real_topic(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3's ScheduleMessageService (broker/src/main/java/org/apache/rocketmq/broker/schedule/
    ScheduleMessageService.java ``PutResultProcess.onSuccess``, with ``enableScheduleMessageStats``) counts a
    delivered delay-level message in ``rocketmq_messages_in_total`` / ``rocketmq_throughput_in_total`` under its real
    topic labelled ``message_type="delay"``, with the delivered copy's bytes; its send counted it under
    ``SCHEDULE_TOPIC_XXXX`` (the topic the store hook gave it), ``delay`` too. Ours labelled the delivery
    ``normal``."""
    controller = embedded_cluster.controller
    samples = await samples_once_delivered(embedded_cluster, Message("DelayIn", b"later", delay_level=1))
    store = controller.context.store
    delivered = store.get("DelayIn", 0, 0, 1).messages[0]
    rows = {
        (s[0]["topic"], s[0]["message_type"]): s[1]
        for s in samples["rocketmq_messages_in_total"]
        if s[0]["topic"] in ("DelayIn", "SCHEDULE_TOPIC_XXXX")
    }
    assert rows == {("SCHEDULE_TOPIC_XXXX", "delay"): 1.0, ("DelayIn", "delay"): 1.0}
    sizes = {s[0]["message_type"]: s[1] for s in samples["rocketmq_throughput_in_total"] if s[0]["topic"] == "DelayIn"}
    assert sizes == {"delay": float(len(delivered))}


async def test_a_timer_delivery_is_not_counted_as_incoming_again(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A timer message (TIMER_DELAY_SEC) counts in ``rocketmq_messages_in_total`` once, at its send, under the timer
    topic the store hook gave it, ``message_type="delay"``: RocketMQ 5.3.3's TimerMessageStore ``doPut``
    (store/src/main/java/org/apache/rocketmq/store/timer/TimerMessageStore.java) delivers it with a plain store put
    that adds to the topic's put statistics only, never to BrokerMetricsManager's ``messagesInTotal``. Ours counted
    the delivery again, under the real topic as ``normal``."""
    controller = embedded_cluster.controller
    timer = Message("TimerIn", b"later", properties={"TIMER_DELAY_SEC": "3"})
    samples = await samples_once_delivered(embedded_cluster, timer)
    rows = {
        (s[0]["topic"], s[0]["message_type"]): s[1]
        for s in samples["rocketmq_messages_in_total"]
        if s[0]["topic"] in ("TimerIn", "rmq_sys_wheel_timer")
    }
    assert rows == {("rmq_sys_wheel_timer", "delay"): 1.0}
    item = controller.context.stats.item("TOPIC_PUT_NUMS", "TimerIn")  # the topic's put statistics do count it
    assert item is not None and item.value == 1


async def test_a_delayed_or_timer_message_of_a_message_group_is_labelled_fifo(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3's ``BrokerMetricsManager.getMessageType`` checks the transaction flag, then ``__SHARDINGKEY``,
    then the delay properties: a delay-level or timer message of a message group is ``fifo`` at its send, under the
    topic the store hook gave it (``SCHEDULE_TOPIC_XXXX``, ``rmq_sys_wheel_timer``). Ours labelled both ``delay``
    (found by a review)."""
    grouped = {"__SHARDINGKEY": "group-1"}
    delayed = Message("GroupDelay", b"later", delay_level=1, properties=grouped)
    await samples_once_delivered(embedded_cluster, delayed)
    timer = Message("GroupTimer", b"later", properties={**grouped, "TIMER_DELAY_SEC": "3"})
    samples = await samples_once_delivered(embedded_cluster, timer)
    rows = {
        (s[0]["topic"], s[0]["message_type"]): s[1]
        for s in samples["rocketmq_messages_in_total"]
        if s[0]["topic"] in ("SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer")
    }
    assert rows == {("SCHEDULE_TOPIC_XXXX", "fifo"): 1.0, ("rmq_sys_wheel_timer", "fifo"): 1.0}


async def test_a_delay_level_delivery_counts_as_outgoing_of_the_schedule_consumer(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3's ScheduleMessageService (broker/src/main/java/org/apache/rocketmq/broker/schedule/
    ScheduleMessageService.java ``PutResultProcess.onSuccess``, with ``enableScheduleMessageStats``) also adds each
    delivery to ``rocketmq_messages_out_total`` / ``rocketmq_throughput_out_total`` under ``SCHEDULE_TOPIC_XXXX``,
    ``consumer_group="SCHEDULE_CONSUMER"``, ``is_system="true"``, with the delivered copy's bytes: ours had no such
    series."""
    controller = embedded_cluster.controller
    samples = await samples_once_delivered(embedded_cluster, Message("DelayOut", b"later", delay_level=1))
    store = controller.context.store
    delivered = store.get("DelayOut", 0, 0, 1).messages[0]
    row = {**COMMON, "topic": "SCHEDULE_TOPIC_XXXX", "consumer_group": "SCHEDULE_CONSUMER", "is_system": "true"}
    assert (row, 1.0) in samples["rocketmq_messages_out_total"]
    assert (row, float(len(delivered))) in samples["rocketmq_throughput_out_total"]


async def test_a_delay_level_delivery_to_a_retry_topic_counts_as_incoming_delay(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3's ScheduleMessageService ``PutResultProcess.onSuccess`` (broker/src/main/java/org/apache/
    rocketmq/broker/schedule/ScheduleMessageService.java) adds a delivery to ``rocketmq_messages_in_total`` /
    ``rocketmq_throughput_in_total`` whatever its real topic, a consumer's ``%RETRY%`` topic too (only the send path,
    SendMessageProcessor's ``isRetryOrDlqTopic`` check, leaves retry and DLQ topics out): a retry's redelivery
    counts as ``message_type="delay"``. Ours left every retry topic out of the incoming series."""
    retry = "%RETRY%delay_retry_cg"
    samples = await samples_once_delivered(embedded_cluster, Message(retry, b"again", delay_level=1))
    delivered = embedded_cluster.controller.context.store.get(retry, 0, 0, 1).messages[0]
    incoming = samples["rocketmq_messages_in_total"]
    rows = [(s[0]["message_type"], s[0]["is_system"], s[1]) for s in incoming if s[0]["topic"] == retry]
    assert rows == [("delay", "false", 1.0)]
    sizes = [s[1] for s in samples["rocketmq_throughput_in_total"] if s[0]["topic"] == retry]
    assert sizes == [float(len(delivered))]


async def test_a_consumer_retry_counts_as_incoming_once_at_its_redelivery(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A consumer's send-back (CONSUMER_SEND_MSG_BACK) stores its retry copy under ``SCHEDULE_TOPIC_XXXX``; RocketMQ
    5.3.3's AbstractSendMessageProcessor ``consumerSendMsgBack``
    (broker/src/main/java/org/apache/rocketmq/broker/processor/AbstractSendMessageProcessor.java) adds nothing to
    ``rocketmq_messages_in_total``: the retry counts once, when ScheduleMessageService delivers it to
    ``%RETRY%<group>`` as ``delay``. Ours also counted the copy as an incoming ``delay`` message of
    ``SCHEDULE_TOPIC_XXXX``, so each retry counted twice."""
    use_virtual_store_clock(embedded_cluster)
    controller = embedded_cluster.controller
    broker = controller.context
    await create_topic(embedded_cluster, TOPIC, queues=1)
    ctx = online_consumer(broker, [SubscriptionData(TOPIC)])
    answer = await SendMessageProcessor(broker).process(ctx, send_request())
    assert answer is not None and answer.code == ResponseCode.SUCCESS
    back = request(
        RequestCode.CONSUMER_SEND_MSG_BACK,
        {"offset": "0", "group": GROUP, "delayLevel": "0", "originMsgId": "x", "originTopic": TOPIC},
    )
    answer = await ConsumerSendMsgBackProcessor(broker, controller.schedule.rewrite).process(ctx, back)
    assert answer is not None and answer.code == ResponseCode.SUCCESS
    retry = f"%RETRY%{GROUP}"
    with trio.fail_after(60):  # level 3: 10 s
        while broker.store.max_offset_in_queue(retry, 0) < 1:
            await trio.sleep(0.5)
    samples = render(list(broker_families(take_snapshot(broker, controller.pools), COMMON)))
    rows = {(s[0]["topic"], s[0]["message_type"]): s[1] for s in samples["rocketmq_messages_in_total"]}
    assert rows == {(TOPIC, "normal"): 1.0, (retry, "delay"): 1.0}


async def test_counters_kept_past_deletions_stop_growing_at_the_cardinality_limit(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """``rocketmq_messages_in_total`` and ``rocketmq_send_to_dlq_messages_total`` keep their series when the topic or
    group goes, as RocketMQ 5.3.3's OpenTelemetry counters do; those counters hold at most
    ``metricsOtelCardinalityLimit`` - 1 label sets each and count the rest in one series labelled only
    ``otel_metric_overflow="true"`` (the views of broker/src/main/java/org/apache/rocketmq/broker/metrics/
    BrokerMetricsManager.java ``registerMetricsView``; OpenTelemetry 1.29's DefaultSynchronousMetricStorage), so
    creating and deleting topics for ever cannot grow them without bound. Ours kept every topic and group ever seen."""
    broker = open_broker(tmp_path / "broker", metrics_otel_cardinality_limit=3)
    try:
        ctx = online_consumer(broker, [SubscriptionData(TOPIC)])
        send, admin = SendMessageProcessor(broker), AdminBrokerProcessor(broker)
        broker.stats.start_counting()
        for i in range(5):
            topic = f"Churn{i}"
            broker.topics.update_topic(TopicConfig(topic, 1, 1))
            answer = await send.process(ctx, send_request(topic))
            assert answer is not None and answer.code == ResponseCode.SUCCESS
            answer = await admin.process(ctx, request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic}))
            assert answer is not None and answer.code == ResponseCode.SUCCESS, answer
        for i in range(4):
            used_up = send_request(f"%RETRY%churn_cg{i}", reconsumeTimes="17", maxReconsumeTimes="16")
            answer = await send.process(ctx, used_up)
            assert answer is not None and answer.code == ResponseCode.SUCCESS
        samples = render(list(broker_families(take_snapshot(broker, broker_pools(cpus=2)), COMMON)))
        overflow = {"otel_metric_overflow": "true"}
        incoming = [(s[0].get("topic"), s[1]) for s in samples["rocketmq_messages_in_total"]]
        assert incoming == [("Churn0", 1.0), ("Churn1", 1.0), (None, 3.0)]
        assert samples["rocketmq_messages_in_total"][-1][0] == overflow
        assert [s[0] for s in samples["rocketmq_throughput_in_total"]][-1] == overflow
        dlq = [(s[0].get("topic"), s[1]) for s in samples["rocketmq_send_to_dlq_messages_total"]]
        assert dlq == [("%RETRY%churn_cg0", 1.0), ("%RETRY%churn_cg1", 1.0), (None, 2.0)]
        assert samples["rocketmq_send_to_dlq_messages_total"][-1][0] == overflow
        assert len(broker.stats.incoming) + len(broker.stats.dlq_messages) == 4  # nothing more is kept
    finally:
        broker.store.close()


async def test_outgoing_counters_survive_deletions_and_stop_growing_at_the_cardinality_limit(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3 counts ``rocketmq_messages_out_total`` / ``rocketmq_throughput_out_total`` in OpenTelemetry
    counters under its default counter view, capped at ``metricsOtelCardinalityLimit`` like every counter
    (broker/src/main/java/org/apache/rocketmq/broker/metrics/BrokerMetricsManager.java ``registerMetricsView``), and
    ``autoDeleteUnusedStats`` cleans only BrokerStatsManager's items (``onTopicDeleted`` / ``onGroupDeleted``): a
    deleted topic's or group's outgoing series stay as they were, and past limit - 1 label sets the rest counts in
    the overflow series. Ours dropped them with the stats items, and kept any number of pairs."""
    broker = open_broker(tmp_path / "broker", metrics_otel_cardinality_limit=3)
    try:
        ctx = online_consumer(broker, [SubscriptionData(TOPIC)])
        send, pull, admin = SendMessageProcessor(broker), PullMessageProcessor(broker), AdminBrokerProcessor(broker)
        broker.stats.start_counting()
        topics = [f"Out{i}" for i in range(4)]
        for topic in topics:
            broker.topics.update_topic(TopicConfig(topic, 1, 1))
            answer = await send.process(ctx, send_request(topic))
            assert answer is not None and answer.code == ResponseCode.SUCCESS
            found = await pull.process(ctx, pull_request(topic, offset=0, sys_flag=NO_SUSPEND))
            assert found is not None and found.code == ResponseCode.SUCCESS
        before = render(list(broker_families(take_snapshot(broker, broker_pools(cpus=2)), COMMON)))
        out = [(s[0].get("topic"), s[1]) for s in before["rocketmq_messages_out_total"]]
        assert out == [("Out0", 1.0), ("Out1", 1.0), (None, 2.0)]
        assert before["rocketmq_throughput_out_total"][-1][0] == {"otel_metric_overflow": "true"}
        deletions = [(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic}) for topic in topics]
        for code, fields in [*deletions, (RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": GROUP})]:
            answer = await admin.process(ctx, request(code, fields))
            assert answer is not None and answer.code == ResponseCode.SUCCESS, answer
        after = render(list(broker_families(take_snapshot(broker, broker_pools(cpus=2)), COMMON)))
        for name in ("rocketmq_messages_out_total", "rocketmq_throughput_out_total"):
            assert after.get(name) == before[name], name
    finally:
        broker.store.close()


async def test_gauges_stop_growing_at_the_cardinality_limit(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3 registers a default view for every observable gauge with ``metricsOtelCardinalityLimit``
    (broker/src/main/java/org/apache/rocketmq/broker/metrics/BrokerMetricsManager.java ``registerMetricsView``):
    OpenTelemetry 1.29's AsynchronousMetricStorage keeps limit - 1 label sets per collection and records every
    further measurement in one series labelled only ``otel_metric_overflow="true"``, the last one's value. Ours
    served every (group, topic) pair and every processor whatever the limit."""
    broker = open_broker(tmp_path / "broker", metrics_otel_cardinality_limit=3)
    try:
        topics = [f"Lag{i}" for i in range(4)]
        ctx = online_consumer(broker, [SubscriptionData(topic) for topic in topics])
        assert broker.groups.find(GROUP) is not None
        send = SendMessageProcessor(broker)
        for count, topic in enumerate(topics, start=1):
            broker.topics.update_topic(TopicConfig(topic, 1, 1))
            broker.offsets.commit(GROUP, topic, 0, 0)
            for _ in range(count):
                answer = await send.process(ctx, send_request(topic))
                assert answer is not None and answer.code == ResponseCode.SUCCESS
        samples = render(list(broker_families(take_snapshot(broker, broker_pools(cpus=2)), COMMON)))
        overflow = {"otel_metric_overflow": "true"}
        lag = [(s[0].get("topic"), s[1]) for s in samples["rocketmq_consumer_lag_messages"]]
        assert lag == [("Lag0", 1.0), ("Lag1", 2.0), (None, 4.0)]
        assert samples["rocketmq_consumer_ready_messages"][-1] == (overflow, 4.0)
        watermark = [labels.get("processor") for labels, _ in samples["rocketmq_processor_watermark"]]
        assert watermark == ["send", "async_put", None]  # Java's recording order, then the overflow
        assert samples["rocketmq_topic_number"] == [(COMMON, float(len(broker.topics.topics)))]
    finally:
        broker.store.close()


def _timer_gauges(cluster: EmbeddedCluster) -> dict[str, float]:
    """The broker's ``rocketmq_timer_*`` gauges as its ``/metrics`` source builds them (on the Trio thread)."""
    metrics = cluster.controller.metrics
    assert metrics is not None
    samples = render(list(metrics.sources[0]()()))
    found = {}
    for name, rows in samples.items():
        if name.startswith("rocketmq_timer_") and name != "rocketmq_timer_message_snapshot":  # one row per bound
            ((labels, value),) = rows
            assert (labels["storage_type"], labels["storage_medium"]) == ("local", "disk")
            found[name] = value
    return found


async def test_the_timer_gauges_are_exported_with_rocketmqs_names_and_values(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3's DefaultStoreMetricsManager (store/src/main/java/org/apache/rocketmq/store/metrics/
    DefaultStoreMetricsManager.java) exports, with ``timerWheelEnable``, the TimerMessageStore's
    ``getEnqueueBehindMessages`` (timer-queue entries not filed yet), ``getEnqueueBehindMillis`` (now - the store time
    of the last message filed, within 2 s of that filing, else 0), ``getDequeueBehindMessages`` (the wheel's entries
    from the read time on) and ``getDequeueBehind`` (now - the read time, in seconds though the unit says
    milliseconds). Ours exported none of them."""
    settings = {"metrics_exporter_type": "PROM", "metrics_prom_exporter_port": 0}
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE, **settings) as cluster:
        use_virtual_store_clock(cluster)
        await create_topic(cluster, "TimerGauges")
        addr = cluster.broker_addr
        async with Admin(cluster.namesrv_addr) as admin, Producer("pg-timer-gauges", cluster.namesrv_addr) as p:
            await admin.update_broker_config(addr, {"timerStopEnqueue": "true"})
            for i in range(3):
                await p.send(Message("TimerGauges", f"t{i}".encode(), properties={"TIMER_DELAY_SEC": "60"}))
            await trio.sleep(5)
            held = _timer_gauges(cluster)
            await admin.update_broker_config(addr, {"timerStopEnqueue": "false", "timerStopDequeue": "true"})
            await trio.sleep(1.5)
            filed = _timer_gauges(cluster)
            await trio.sleep(120)
            late = _timer_gauges(cluster)
    assert (held["rocketmq_timer_enqueue_lag"], held["rocketmq_timer_dequeue_lag"]) == (3, 0)
    assert (filed["rocketmq_timer_enqueue_lag"], filed["rocketmq_timer_dequeue_lag"]) == (0, 3)
    assert 5000 <= filed["rocketmq_timer_enqueue_latency_milliseconds"] < 8000  # the messages were stored 5-7 s before
    assert late["rocketmq_timer_enqueue_latency_milliseconds"] == 0  # no filing in the last 2 s
    assert late["rocketmq_timer_dequeue_lag"] == 3  # held by timerStopDequeue, past their time
    assert 120 <= late["rocketmq_timer_dequeue_latency_milliseconds"] < 125  # seconds, as Java's getDequeueBehind


async def _scrapes_after_timers(
    tmp_path: Path, topic: str, delays: tuple[int, ...], waits: tuple[float, ...]
) -> list[dict[str, list[tuple[dict[str, str], float]]]]:
    """The broker's families (through its ``/metrics`` source) after each of ``waits``, once a timer message of each
    of ``delays`` (seconds) was sent to ``topic``."""
    settings = {"metrics_exporter_type": "PROM", "metrics_prom_exporter_port": 0}
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE, **settings) as cluster:
        use_virtual_store_clock(cluster)
        metrics = cluster.controller.metrics
        assert metrics is not None
        await create_topic(cluster, topic)
        async with Producer(f"pg-{topic}", cluster.namesrv_addr) as p:
            for delay in delays:
                await p.send(Message(topic, b"t", properties={"TIMER_DELAY_SEC": str(delay)}))
        scrapes = []
        for wait in waits:
            await trio.sleep(wait)
            scrapes.append(render(list(metrics.sources[0]()())))
        return scrapes


async def test_the_timing_messages_gauge_counts_each_topics_pending_timers(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3's ``rocketmq_timing_messages`` (DefaultStoreMetricsManager, from TimerMetrics ``timingCount``):
    per real topic, with the store's labels, the timer messages filed and not delivered yet. Ours had none."""
    scrapes = await _scrapes_after_timers(tmp_path, "TimingGauge", (30, 90), (2, 60, 60))
    seen = [
        {(labels["topic"], labels["storage_type"]): value for labels, value in s.get("rocketmq_timing_messages", [])}
        for s in scrapes
    ]
    assert seen == [{("TimingGauge", "local"): 2}, {("TimingGauge", "local"): 1}, {("TimingGauge", "local"): 0}]


async def test_the_timer_enqueue_and_dequeue_counters_count_per_real_topic(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3's ``rocketmq_timer_enqueue_total`` / ``rocketmq_timer_dequeue_total`` (DefaultStoreMetricsManager
    ``incTimerEnqueueCount`` / ``incTimerDequeueCount``, from TimerMessageStore): each timer message filed into the
    wheel, and each one dequeued (delivered, or rolled on), under its real topic with the store's labels. Ours had
    neither."""
    seen = []
    for samples in await _scrapes_after_timers(tmp_path, "TimerCount", (30, 90, 600), (2, 100)):
        counts = {}
        for name in ("rocketmq_timer_enqueue_total", "rocketmq_timer_dequeue_total"):
            for labels, value in samples.get(name, []):
                assert (labels["storage_type"], labels["storage_medium"]) == ("local", "disk")
                counts[(name, labels["topic"])] = value
        seen.append(counts)
    enqueued, dequeued = ("rocketmq_timer_enqueue_total", "TimerCount"), ("rocketmq_timer_dequeue_total", "TimerCount")
    assert seen == [{enqueued: 3}, {enqueued: 3, dequeued: 2}]


async def test_the_timer_message_snapshot_counts_the_wheels_entries_per_period_ahead(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3's ``rocketmq_timer_message_snapshot`` (DefaultStoreMetricsManager, TimerMetrics ``timerDist``):
    per ``timer_bound_s`` (5 s to 24 h), with the store's labels, the entries of the wheel's slots from the previous
    bound on, counted from now's slot; a timer beyond the roll window counts where it is filed (its roll time, 4.8 h
    ahead at 100 ms slots). Ours had none."""
    delays = (3, 30, 100, 600, 2000, 5000, 10_000, 30_000)
    (samples,) = await _scrapes_after_timers(tmp_path, "TimerSnapshot", delays, (1,))
    seen = {}
    for labels, value in samples.get("rocketmq_timer_message_snapshot", []):
        assert (labels["storage_type"], labels["storage_medium"]) == ("local", "disk")
        seen[labels["timer_bound_s"]] = value
    assert seen == {"5": 1, "60": 1, "300": 1, "900": 1, "3600": 1, "14400": 2, "28800": 1, "86400": 0}


async def test_the_delay_message_latency_histogram_records_each_timer_filed_under_its_real_topic(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3's ``rocketmq_delay_message_latency`` (DefaultStoreMetricsManager ``timerMessageSetLatency``,
    unit seconds, buckets 1 min, 10 min, 1 h, 12 h, 1 d, 3 d): TimerMessageStore's ``enqueue`` records, for each
    timer-queue record it reads, its ``TIMER_OUT_MS`` less its born time in whole seconds, under its real topic with
    the store's labels. Ours had none."""
    (samples,) = await _scrapes_after_timers(tmp_path, "TimerLatency", (30, 90, 5000), (1,))
    buckets = {}
    for labels, value in samples.get("rocketmq_delay_message_latency_seconds_bucket", []):
        assert (labels["storage_type"], labels["storage_medium"], labels["topic"]) == ("local", "disk", "TimerLatency")
        buckets[labels["le"]] = value
    assert buckets == {
        "60.0": 1,
        "600.0": 2,
        "3600.0": 2,
        "43200.0": 3,
        "86400.0": 3,
        "259200.0": 3,
        "+Inf": 3,
    }
    ((_, total),) = samples["rocketmq_delay_message_latency_seconds_sum"]
    # Each delay floored to the precision, plus the store clock's lead over the producer's (virtual time jumps).
    assert 5117 <= total < 5117 + 3 * 30


async def test_a_send_to_a_retry_topic_with_a_sharding_key_is_not_counted_as_incoming(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3's SendMessageProcessor counts no message of a retry or DLQ topic in
    ``rocketmq_messages_in_total`` (``isRetryOrDlqTopic``), sharding key or not."""
    broker = open_broker(tmp_path / "broker")
    try:
        ctx = online_consumer(broker, [SubscriptionData(TOPIC)])
        send = SendMessageProcessor(broker)
        broker.stats.start_counting()
        retry = f"%RETRY%{GROUP}"
        grouped = tags_props("A", __SHARDINGKEY="order-1")
        answer = await send.process(ctx, send_request(retry, properties=grouped, reconsumeTimes="0"))
        assert answer is not None and answer.code == ResponseCode.SUCCESS, answer
        assert broker.store.max_offset_in_queue(retry, 0) == 1
        samples = render(list(broker_families(take_snapshot(broker, broker_pools(cpus=2)), COMMON)))
        assert [s[0]["topic"] for s in samples.get("rocketmq_messages_in_total", [])] == []
    finally:
        broker.store.close()


async def test_a_delay_level_delivery_records_its_message_size_under_the_real_topic(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3's ScheduleMessageService ``PutResultProcess.onSuccess`` (with ``enableScheduleMessageStats``)
    records the delivered copy's size in ``rocketmq_message_size`` under the real topic as ``delay``, besides the
    send's own value under ``SCHEDULE_TOPIC_XXXX`` (ours recorded only the send)."""
    controller = embedded_cluster.controller
    samples = await samples_once_delivered(embedded_cluster, Message("DelaySized", b"later", delay_level=1))
    delivered = controller.context.store.get("DelaySized", 0, 0, 1).messages[0]
    sums = {
        (s[0]["topic"], s[0]["message_type"]): s[1]
        for s in samples["rocketmq_message_size_sum"]
        if s[0]["topic"] in ("DelaySized", "SCHEDULE_TOPIC_XXXX")
    }
    assert set(sums) == {("SCHEDULE_TOPIC_XXXX", "delay"), ("DelaySized", "delay")}
    assert sums[("DelaySized", "delay")] == float(len(delivered))


async def test_a_revived_pop_leaves_the_inflight_count_and_lags_in_the_retry_series(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """RocketMQ 5.3.3's PopReviveService ``reviveRetry`` takes a message it copies to the pop retry topic out of
    PopInflightMessageCounter, and ConsumerLagCalculator reports that topic's lag under the popped topic with
    ``is_retry="true"`` (``calculate`` with the ProcessGroupInfo's ``retryTopic``) for a group known by its pops only.
    Ours reported neither."""
    use_virtual_store_clock(embedded_cluster)
    controller = embedded_cluster.controller
    pop, revive = controller.pop_service()
    await nursery.start(revive.run)
    await create_topic(embedded_cluster, "PopRevLag", queues=1)
    async with Producer("pg-pop-rev-lag", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("PopRevLag", b"late"))
    [_first] = pop.pop("pop_rev_lag_cg", "PopRevLag", 32, 30_000, None)

    gauges = ("lag_messages", "inflight_messages", "ready_messages")
    lag_gauges = [f"rocketmq_consumer_{name}" for name in gauges]

    def lags() -> dict[tuple[str, str], float]:
        samples = render(list(broker_families(take_snapshot(controller.context, controller.pools), COMMON)))
        return {
            (name.removeprefix("rocketmq_consumer_"), labels["is_retry"]): found
            for name in lag_gauges
            for labels, found in samples.get(name, [])
            if labels.get("consumer_group") == "pop_rev_lag_cg" and labels["topic"] == "PopRevLag"
        }

    assert lags() == {
        ("lag_messages", "false"): 1, ("inflight_messages", "false"): 1, ("ready_messages", "false"): 0,
        ("lag_messages", "true"): 0, ("inflight_messages", "true"): 0, ("ready_messages", "true"): 0,
    }  # fmt: skip
    await trio.sleep(35)  # not acked: revived into the group's pop retry topic
    assert lags() == {
        ("lag_messages", "false"): 0, ("inflight_messages", "false"): 0, ("ready_messages", "false"): 0,
        ("lag_messages", "true"): 1, ("inflight_messages", "true"): 0, ("ready_messages", "true"): 1,
    }  # fmt: skip


async def test_revive_topic_puts_gets_and_retry_copies_are_counted_as_pop_metrics_manager_does(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """RocketMQ 5.3.3's PopMetricsManager counts each CK and ACK put into the revive topic
    (``rocketmq_pop_revive_in_message_total``: group, topic, ``revive_message_type``, ``put_status``), each one the
    revive reads back (``rocketmq_pop_revive_out_message_total``: group, topic, revive ``queue_id``, type) and each
    retry copy it puts (``rocketmq_pop_revive_retry_messages_total``: group, topic, ``put_status``), from
    PopBufferMergeService ``putCkToStore``, AckMessageProcessor, PopReviveService ``consumeReviveMessage`` and
    ``reviveRetry``. Ours exported none of them."""
    use_virtual_store_clock(embedded_cluster)
    controller = embedded_cluster.controller
    pop, revive = controller.pop_service()
    await nursery.start(revive.run)
    await create_topic(embedded_cluster, "PopRevCount", queues=1)
    async with Producer("pg-pop-rev-count", embedded_cluster.namesrv_addr) as producer:
        for body in (b"acked", b"late"):
            await producer.send(Message("PopRevCount", body))
    acked, _late = pop.pop("pop_rev_count_cg", "PopRevCount", 32, 30_000, None)
    pop.ack("pop_rev_count_cg", "PopRevCount", acked.handle)
    await trio.sleep(35)  # the CK is due: the revive reads it and the ACK, and copies the other message

    samples = render(list(broker_families(take_snapshot(controller.context, controller.pools), COMMON)))
    row = {**COMMON, "consumer_group": "pop_rev_count_cg", "topic": "PopRevCount"}
    puts = samples.get("rocketmq_pop_revive_in_message_total", [])
    assert sorted((labels["revive_message_type"], labels["put_status"], n) for labels, n in puts) == [
        ("ACK", "PUT_OK", 1), ("CK", "PUT_OK", 1),
    ]  # fmt: skip
    assert all(labels.items() >= row.items() for labels, _ in puts)
    gets = samples.get("rocketmq_pop_revive_out_message_total", [])
    assert sorted((labels["revive_message_type"], n) for labels, n in gets) == [("ACK", 1), ("CK", 1)]
    assert all(labels.items() >= {**row, "queue_id": "0"}.items() for labels, _ in gets)
    retries = samples.get("rocketmq_pop_revive_retry_messages_total", [])
    assert retries == [({**row, "put_status": "PUT_OK"}, 1)]


async def test_the_revive_lag_and_latency_gauges_follow_the_revive_offset(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """RocketMQ 5.3.3's PopMetricsManager gauges, per revive queue (``queue_id``), once a revive round ran:
    ``rocketmq_pop_revive_lag_milliseconds`` is the revive queue's max offset - the revive offset (PopReviveService
    ``getReviveBehindMessages``: a count, under Java's ``milliseconds`` unit), ``rocketmq_pop_revive_latency_
    milliseconds`` the time since the oldest CK of the round's revive time while more than one record is behind
    (``getReviveBehindMillis``). Ours exported neither."""
    use_virtual_store_clock(embedded_cluster)
    controller = embedded_cluster.controller
    pop, revive = controller.pop_service()
    await nursery.start(revive.run)
    await create_topic(embedded_cluster, "PopRevGauge", queues=1)
    async with Producer("pg-pop-rev-gauge", embedded_cluster.namesrv_addr) as producer:
        for body in (b"one", b"two"):
            await producer.send(Message("PopRevGauge", body))
    for _ in range(2):  # two pops, each acked: two ACKs wait in the revive queue for their CKs
        [popped] = pop.pop("pop_rev_gauge_cg", "PopRevGauge", 1, 30_000, None)
        pop.ack("pop_rev_gauge_cg", "PopRevGauge", popped.handle)

    def gauges() -> dict[str, list[tuple[dict[str, str], float]]]:
        snapshot = take_snapshot(controller.context, controller.pools, pop_gauges=controller.pop_gauges)
        samples = render(list(broker_families(snapshot, COMMON)))
        names = ("rocketmq_pop_revive_lag_milliseconds", "rocketmq_pop_revive_latency_milliseconds")
        return {name.removeprefix("rocketmq_pop_revive_"): samples.get(name, []) for name in names}

    await trio.sleep(3)  # revive rounds read the ACKs: the revive offset stays before them
    behind = gauges()
    assert behind["lag_milliseconds"] == [({**COMMON, "queue_id": "0"}, 2)]
    [(labels, latency)] = behind["latency_milliseconds"]
    assert labels == {**COMMON, "queue_id": "0"} and 0 <= latency <= 1000
    await trio.sleep(35)  # the CKs came, met their ACKs: the revive offset reached the queue's end
    assert gauges() == {
        "lag_milliseconds": [({**COMMON, "queue_id": "0"}, 0)],
        "latency_milliseconds": [({**COMMON, "queue_id": "0"}, 0)],
    }


def test_the_delay_message_latency_divides_as_java_s_long_division() -> None:
    """TimerMessageStore.enqueue records ``(delayedTime - bornTimestamp) / 1000`` in Java longs, which truncate toward
    zero: a timer due 500 ms before its born time (a producer clock less than a second ahead of the broker's) is
    recorded as 0, and only a whole second or more behind is negative, which OpenTelemetry's histogram drops."""
    assert [latency_seconds(ms) for ms in (0, 999, 1000, 5999, -1, -500, -999, -1000, -2500)] == [
        0, 0, 1, 5, 0, 0, 0, None, None,
    ]  # fmt: skip
