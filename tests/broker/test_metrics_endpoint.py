"""``/metrics`` (metricsExporterType=PROM) of a live broker and name server: scraped over HTTP while a load runs, its
counters agree with what the producers were acknowledged, and every scrape parses with prometheus-client's own
parser. Real sockets on 127.0.0.1 port 0; real clock (the HTTP server runs in threads), no time thresholds."""

from __future__ import annotations

import contextlib
import threading
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from broker.broker_config import load_broker_config
from broker.embedded import EmbeddedCluster
from broker.metrics import lag as lag_module
from client import ConsumeConcurrentlyStatus, Message, MessageExt, MQBrokerError, Producer, PushConsumer
from client.transaction import LocalTransactionState, TransactionProducer
from namesrv.config import NamesrvConfig
from namesrv.server import NamesrvServer
from processors.pull import build_subscription
from remoting import prometheus
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumerData, ConsumeType, HeartbeatData
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.pull_body import decode_records
from remoting.prometheus import PrometheusExporter
from tests.broker.test_ops_wire import ask
from tests.broker.test_pop_wire import ack_request
from tests.broker.test_reply_wire import REPLY_TOPIC, reply_v2
from tests.conftest import SMALL_STORE
from tests.processors.conftest import send_request, tags_props

TOPIC = "MetricsLoad"
PRODUCERS = 8
PER_PRODUCER = 250


@pytest.fixture
async def metrics_cluster(tmp_path: Path) -> AsyncIterator[EmbeddedCluster]:
    settings = {"metrics_exporter_type": "PROM", "metrics_prom_exporter_port": 0, "metrics_label": "env:test"}
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE, **settings) as cluster:
        yield cluster


async def scrape(address: tuple[str, int]) -> dict[str, list[Sample]]:
    """GET /metrics in a worker thread; the samples of each family by family name (parsed by prometheus-client)."""

    def get() -> str:
        with urllib.request.urlopen(f"http://{address[0]}:{address[1]}/metrics", timeout=30) as answer:
            assert answer.status == 200
            return str(answer.read().decode())

    text = await trio.to_thread.run_sync(get)
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def value(families: dict[str, list[Sample]], name: str, **labels: str) -> float:
    """The sum of the samples called ``name`` whose labels include ``labels``."""
    family = name
    for suffix in ("_total", "_bucket", "_count", "_sum"):
        family = family.removesuffix(suffix)
    return sum(
        s.value
        for s in families.get(family, [])
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


async def create_one_queue_topic(client: RemotingClient, cluster: EmbeddedCluster, topic: str) -> None:
    """UPDATE_AND_CREATE_TOPIC of ``topic`` with one queue."""
    create = {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6",
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
    }  # fmt: skip
    created = await client.invoke(cluster.broker_addr, request(RequestCode.UPDATE_AND_CREATE_TOPIC, create), 5)
    assert created.code == ResponseCode.SUCCESS


async def test_counters_scraped_during_a_load_agree_with_what_was_acknowledged(
    metrics_cluster: EmbeddedCluster,
) -> None:
    cluster = metrics_cluster
    exporter = cluster.controller.metrics
    assert exporter is not None and exporter.address is not None
    address = exporter.address
    acked = refused = 0
    running = True
    checked = []

    async with Producer("metrics_pg", cluster.namesrv_addr) as producer:
        await producer.send(Message(TOPIC, b"warm-up"))  # the route, before the measured load
        acked = 1

        async def produce() -> None:
            nonlocal acked, refused
            for i in range(PER_PRODUCER):
                try:
                    await producer.send(Message(TOPIC, b"load %d" % i))
                except MQBrokerError as exc:
                    # Fast failure (on by default, as RocketMQ's): on a loaded machine a send can wait its 200 ms in
                    # the send queue. Refused, it is stored nowhere and counted nowhere but its own RPC series.
                    assert exc.code == ResponseCode.SYSTEM_BUSY, exc
                    refused += 1
                    continue
                acked += 1

        async def scrape_meanwhile() -> None:
            while running and len(checked) < 200:
                before = acked
                families = await scrape(address)
                after = acked
                stored = value(families, "rocketmq_messages_in_total", topic=TOPIC)
                # Stored before or while this scrape: at least what was acknowledged before it, at most what was
                # acknowledged after it plus one send in flight per producer task.
                assert before <= stored <= after + PRODUCERS, (before, stored, after)
                assert not checked or stored >= checked[-1]  # a counter never goes back
                checked.append(stored)
                await trio.sleep(0)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(scrape_meanwhile)
            async with trio.open_nursery() as load:
                for _ in range(PRODUCERS):
                    load.start_soon(produce)
            running = False

    total = acked  # what was stored: every send but those refused
    assert acked + refused == 1 + PRODUCERS * PER_PRODUCER and len(checked) >= 1
    print(f"{len(checked)} scrapes during the load")
    families = await scrape(address)
    labels = {"topic": TOPIC, "cluster": "DefaultCluster", "node_type": "broker", "env": "test"}
    assert value(families, "rocketmq_messages_in_total", message_type="normal", **labels) == total
    store = cluster.controller.context.store
    assert value(families, "rocketmq_throughput_in_total", **labels) == store.max_phy_offset
    sends = value(
        families, "rocketmq_rpc_latency_milliseconds_count", request_code="send_message_v2", response_code="success"
    )
    assert sends == total
    assert (
        value(families, "rocketmq_rpc_latency_milliseconds_bucket", request_code="send_message_v2", le="+Inf") == total
    )
    assert value(families, "rocketmq_storage_put_latency_count") == total

    received = 0
    done = trio.Event()

    async def on_messages(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        nonlocal received
        received += len(msgs)
        if received >= total:
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("metrics_cg", cluster.namesrv_addr)
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(on_messages)
    async with consumer:
        with trio.fail_after(60):
            await done.wait()
        families = await scrape(address)
        out = value(families, "rocketmq_messages_out_total", topic=TOPIC, consumer_group="metrics_cg")
        assert out == received == total
        assert value(families, "rocketmq_throughput_out_total", topic=TOPIC) == store.max_phy_offset
        group = {"consumer_group": "metrics_cg", "topic": TOPIC}
        assert value(families, "rocketmq_consumer_connections", consumer_group="metrics_cg") == 1
        ready = value(families, "rocketmq_consumer_ready_messages", **group)
        assert ready == 0 and "rocketmq_consumer_lag_messages" in families


async def test_a_held_pull_is_labelled_long_polling(metrics_cluster: EmbeddedCluster) -> None:
    cluster = metrics_cluster
    exporter = cluster.controller.metrics
    assert exporter is not None and exporter.address is not None
    async with RemotingClient() as client:
        await create_one_queue_topic(client, cluster, "HeldTopic")
        pull = {
            "consumerGroup": "held_cg", "topic": "HeldTopic", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
            "sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "300", "subscription": "*",
            "subVersion": "0", "expressionType": "TAG",
        }  # fmt: skip
        answer = await client.invoke(cluster.broker_addr, request(RequestCode.PULL_MESSAGE, pull), 10)
        assert answer.code == ResponseCode.PULL_NOT_FOUND
    families = await scrape(exporter.address)
    held = value(
        families, "rocketmq_rpc_latency_milliseconds_count", request_code="pull_message", is_long_polling="true"
    )
    assert held == 1
    # The held pull waited about its 300 ms suspend time: it is not in the buckets up to 100 ms.
    fast = value(families, "rocketmq_rpc_latency_milliseconds_bucket", request_code="pull_message", le="100.0")
    assert fast == 0


async def test_a_pop_that_finds_nothing_is_labelled_polling_timeout(metrics_cluster: EmbeddedCluster) -> None:
    """RocketMQ 5.3.3 labels ``response_code`` with RemotingHelper.getResponseCodeDesc, the lower-cased name of
    remoting/src/main/java/org/apache/rocketmq/remoting/protocol/ResponseCode.java's field of that number: 209 and 210
    are POLLING_FULL and POLLING_TIMEOUT there (4.x's ACL failures no longer exist)."""
    cluster = metrics_cluster
    exporter = cluster.controller.metrics
    assert exporter is not None and exporter.address is not None
    async with RemotingClient() as client:
        await create_one_queue_topic(client, cluster, "PopNothing")
        pop = {
            "consumerGroup": "pop_nothing_cg", "topic": "PopNothing", "queueId": "-1", "maxMsgNums": "32",
            "invisibleTime": "30000", "pollTime": "0", "bornTime": "0", "initMode": "0", "expType": "TAG", "exp": "*",
        }  # fmt: skip
        answer = await client.invoke(cluster.broker_addr, request(RequestCode.POP_MESSAGE, pop), 10)
        assert answer.code == ResponseCode.POLLING_TIMEOUT
    families = await scrape(exporter.address)
    pops = value(families, "rocketmq_rpc_latency_milliseconds_count", request_code="pop_message")
    labelled = value(
        families, "rocketmq_rpc_latency_milliseconds_count", request_code="pop_message", response_code="polling_timeout"
    )
    assert pops == labelled == 1


async def test_a_slave_does_not_report_replicated_messages_as_incoming(tmp_path: Path) -> None:
    """RocketMQ 5.3.3 counts ``rocketmq_messages_in_total`` / ``rocketmq_throughput_in_total`` in the send path
    (broker/.../processor/SendMessageProcessor.java ``handlePutMessageResult``): a slave, which only replicates, never
    counts one, so ``sum by (topic) (rate(rocketmq_messages_in_total[..]))`` over a master and its slave (same
    ``cluster`` and ``node_id``) sees each message once. Its runtime info still counts the replicated puts, as 4.9.8's
    ``ReputMessageService`` does on a slave."""
    settings = {"metrics_exporter_type": "PROM", "metrics_prom_exporter_port": 0}
    async with EmbeddedCluster(tmp_path / "cluster", slaves=1, **SMALL_STORE, **settings) as cluster:
        async with Producer("replicated_pg", cluster.namesrv_addr) as producer:
            for i in range(5):
                await producer.send(Message("Replicated", b"m%d" % i))
        await cluster.wait_replicated()
        (slave,) = cluster.slave_controllers
        assert slave.metrics is not None and slave.metrics.address is not None
        on_slave = await scrape(slave.metrics.address)
        assert cluster.controller.metrics is not None and cluster.controller.metrics.address is not None
        on_master = await scrape(cluster.controller.metrics.address)
        runtime_puts = slave.context.stats.runtime_entries()["msgPutTotalTodayNow"]
    assert value(on_master, "rocketmq_messages_in_total", topic="Replicated") == 5
    assert value(on_slave, "rocketmq_messages_in_total") == 0
    assert value(on_slave, "rocketmq_throughput_in_total") == 0
    assert runtime_puts == "5"


async def test_without_prom_nothing_is_served_or_timed(embedded_cluster: EmbeddedCluster) -> None:
    controller = embedded_cluster.controller
    assert controller.metrics is None and controller.rpc_latency is None
    assert all(conn.rpc_latency is None for conn in controller.remoting_server.connections)


async def test_the_name_server_serves_its_request_latency(tmp_path: Path) -> None:
    config = NamesrvConfig(
        listen_port=0,
        listen_host="127.0.0.1",
        kv_config_path=str(tmp_path / "kv.json"),
        metrics_exporter_type="2",
        metrics_prom_exporter_port=0,
    )
    server = NamesrvServer(config)
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve)
        async with RemotingClient() as client:
            for _ in range(3):
                answer = await client.invoke(f"{host}:{port}", request(RequestCode.GET_BROKER_CLUSTER_INFO), 5)
                assert answer.code == ResponseCode.SUCCESS
        assert server.metrics is not None and server.metrics.address is not None
        families = await scrape(server.metrics.address)
        count = value(
            families,
            "rocketmq_rpc_latency_milliseconds_count",
            request_code="get_broker_cluster_info",
            node_type="nameserver",
            node_id=f"{host}:{port}",
        )
        assert count == 3
        assert value(families, "rocketmq_rpc_latency_milliseconds_count", otel_scope_name="namesrv-meter") >= 3
        nursery.cancel_scope.cancel()


async def test_request_codes_past_the_cardinality_limit_share_one_overflow_series(tmp_path: Path) -> None:
    """RocketMQ 5 caps every metric at ``metricsOtelCardinalityLimit`` label sets (BrokerMetricsManager's views,
    OpenTelemetry's overflow series ``otel_metric_overflow="true"`` beyond it); a client sending ever new request
    codes must not grow the broker's series, and its memory, without bound."""
    limit = 20
    settings = {
        "metrics_exporter_type": "PROM",
        "metrics_prom_exporter_port": 0,
        "metrics_otel_cardinality_limit": limit,
    }
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE, **settings) as cluster:
        exporter = cluster.controller.metrics
        assert exporter is not None and exporter.address is not None
        sent = 100
        async with RemotingClient() as client:
            for code in range(90_000, 90_000 + sent):
                answer = await client.invoke(cluster.broker_addr, request(code), 5)
                assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        families = await scrape(exporter.address)
        counts = [
            s
            for s in families["rocketmq_rpc_latency_milliseconds"]
            if s.name == "rocketmq_rpc_latency_milliseconds_count"
        ]
        assert len(counts) <= limit + 1, len(counts)
        overflow_labels = {"otel_scope_name": "broker-meter", "otel_metric_overflow": "true"}  # as OpenTelemetry 1.29
        overflow = [s for s in counts if s.labels == overflow_labels]
        assert len(overflow) == 1 and overflow[0].value >= sent - limit
        assert sum(s.value for s in counts) >= sent


async def test_stopping_the_exporter_closes_a_connection_left_in_the_middle_of_a_request() -> None:
    """RocketMQ 5's exporter (OpenTelemetry's PrometheusHttpServer) stops its HTTP server with the broker and closes
    the connections it holds; one whose client sent half a request kept a server thread blocked on it and the socket
    open for as long as the process lived."""
    exporter = PrometheusExporter("127.0.0.1", 0, [])
    threads = threading.active_count()
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(exporter.run)
        stream = await trio.open_tcp_stream(host, port)
        await stream.send_all(b"GET /metrics HTTP/1.1\r\n")  # the request never ends
        while threading.active_count() < threads + 2:  # the server's thread and the one serving this connection
            await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    with trio.fail_after(10), contextlib.suppress(trio.BrokenResourceError):  # a guard against the hang
        assert await stream.receive_some(100) == b""
    await stream.aclose()


async def test_a_connection_that_sends_no_request_is_closed_after_the_read_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each connection holds a server thread while it is open: one that never sends its request must not hold it for
    good, or idle connections use up the process's threads. A scrape on the side is still answered."""
    monkeypatch.setattr(prometheus, "READ_TIMEOUT_S", 0.3)
    exporter = PrometheusExporter("127.0.0.1", 0, [])
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(exporter.run)
        idle = await trio.open_tcp_stream(host, port)
        await idle.send_all(b"GET /metr")  # and nothing more
        with trio.fail_after(10):  # a guard against the hang, not a timing
            assert await idle.receive_some(100) == b""
        await idle.aclose()
        scrape = await trio.to_thread.run_sync(
            lambda: urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10).status
        )
        assert scrape == 200
        nursery.cancel_scope.cancel()


async def test_a_connection_that_trickles_its_request_is_closed_after_the_read_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """READ_TIMEOUT_S bounds the whole request, not each read: a client sending one byte every 50 ms (each read well
    within the timeout) never finishes its request and must not hold its server thread for good either."""
    monkeypatch.setattr(prometheus, "READ_TIMEOUT_S", 1.0)
    exporter = PrometheusExporter("127.0.0.1", 0, [])
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(exporter.run)
        slow = await trio.open_tcp_stream(host, port)

        async def trickle() -> None:
            with contextlib.suppress(trio.BrokenResourceError):
                for byte in b"GET /metrics HTTP/1.0\r\nX-Pad: " + b"a" * 1000:  # 50 s at this pace
                    await slow.send_all(bytes([byte]))
                    await trio.sleep(0.05)

        nursery.start_soon(trickle)
        closed = False
        with trio.move_on_after(8):  # 8 timeouts: a guard against the hang (the old code held it for 50 s)
            with contextlib.suppress(trio.BrokenResourceError):
                assert await slow.receive_some(100) == b""
            closed = True
        assert closed, "a request trickled a byte at a time held its connection past the read timeout"
        nursery.cancel_scope.cancel()
    await slow.aclose()


async def test_metrics_with_a_unit_carry_its_suffix_as_rocketmq_5_3_3_exports_them(
    metrics_cluster: EmbeddedCluster,
) -> None:
    """RocketMQ 5.3.3 gives these instruments a unit (``setUnit("milliseconds")`` / ``"bytes"`` in
    broker/.../metrics/BrokerMetricsManager.java, remoting/.../metrics/RemotingMetricsManager.java and
    store/.../metrics/DefaultStoreMetricsManager.java), and the OpenTelemetry 1.29 Prometheus exporter it ships
    appends a unit the name does not already contain: a dashboard made for RocketMQ 5.3.3 queries
    ``rocketmq_rpc_latency_milliseconds_bucket``, ``rocketmq_storage_size_bytes``... and found nothing here."""
    cluster = metrics_cluster
    exporter = cluster.controller.metrics
    assert exporter is not None and exporter.address is not None
    async with Producer("unit_pg", cluster.namesrv_addr) as producer:
        for i in range(3):
            await producer.send(Message("UnitTopic", b"u%d" % i))
    got = trio.Event()

    async def on_messages(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        got.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("unit_cg", cluster.namesrv_addr)
    consumer.subscribe("UnitTopic", "*")
    consumer.register_message_listener(on_messages)
    async with consumer:
        with trio.fail_after(30):
            await got.wait()
        families = await scrape(exporter.address)
    expected = {
        "rocketmq_rpc_latency_milliseconds": "rocketmq_rpc_latency_milliseconds_count",
        "rocketmq_consumer_lag_latency_milliseconds": "rocketmq_consumer_lag_latency_milliseconds",
        "rocketmq_consumer_queueing_latency_milliseconds": "rocketmq_consumer_queueing_latency_milliseconds",
        "rocketmq_storage_size_bytes": "rocketmq_storage_size_bytes",
        "rocketmq_storage_message_reserve_time_milliseconds": "rocketmq_storage_message_reserve_time_milliseconds",
    }
    for family, sample in expected.items():
        assert any(s.name == sample for s in families.get(family, [])), f"{family} is not served"
    for old in (
        "rocketmq_rpc_latency",
        "rocketmq_consumer_lag_latency",
        "rocketmq_consumer_queueing_latency",
        "rocketmq_storage_size",
        "rocketmq_storage_message_reserve_time",
    ):
        assert old not in families, f"{old} is still served under its name without the unit"
    # Names that already hold their unit, or have none, are unchanged.
    assert "rocketmq_storage_flush_behind_bytes" in families and "rocketmq_consumer_lag_messages" in families
    assert value(families, "rocketmq_rpc_latency_milliseconds_count", request_code="send_message_v2") == 3


async def test_lag_is_not_reported_for_a_group_the_broker_has_no_subscription_config_for(tmp_path: Path) -> None:
    """RocketMQ 5.3.3's ConsumerLagCalculator (broker/.../metrics/ConsumerLagCalculator.java ``processAllGroup``)
    walks the subscription group table and only then looks the group up among the online consumers: with
    ``autoCreateSubscriptionGroup=false`` a consumer of a group nobody created is connected (its connection counted)
    but can pull nothing, and no lag, inflight or ready series is reported for it (ours reported a lag growing for
    ever)."""
    settings = {"metrics_exporter_type": "PROM", "metrics_prom_exporter_port": 0}
    async with EmbeddedCluster(
        tmp_path / "cluster", **SMALL_STORE, **settings, auto_create_subscription_group=False
    ) as cluster:
        exporter = cluster.controller.metrics
        assert exporter is not None and exporter.address is not None
        async with Producer("nogroup_pg", cluster.namesrv_addr) as producer:
            for i in range(3):
                await producer.send(Message("NoGroupTopic", b"n%d" % i))

        async def on_messages(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer("uncreated_cg", cluster.namesrv_addr)
        consumer.subscribe("NoGroupTopic", "*")
        consumer.register_message_listener(on_messages)
        async with consumer:
            with trio.fail_after(30):
                while True:
                    families = await scrape(exporter.address)
                    if value(families, "rocketmq_consumer_connections", consumer_group="uncreated_cg") == 1:
                        break
                    await trio.sleep(0.05)
    assert cluster.controller.context.groups.get("uncreated_cg") is None
    for family in ("rocketmq_consumer_lag_messages", "rocketmq_consumer_ready_messages"):
        groups = {s.labels["consumer_group"] for s in families.get(family, [])}
        assert "uncreated_cg" not in groups, f"{family} reports a group without a subscription config"


async def test_a_broker_running_the_proxy_serves_rocketmq_proxy_up(tmp_path: Path) -> None:
    """RocketMQ 5.3.3's local proxy (``mqbroker --enable-proxy``) registers ``rocketmq_proxy_up`` on the broker's
    meter (proxy/.../metrics/ProxyMetricsManager.java ``initLocalMode``): 1, labelled ``node_type="proxy"``,
    ``cluster`` the ``proxyClusterName``, ``node_id`` the ``proxyName`` and ``proxy_mode="local"`` over the broker's
    other labels; the liveness gauge proxy dashboards and alerts read was missing."""
    from proxy.config import proxy_config_from

    proxy, _ = proxy_config_from({"enableProxy": "true", "grpcServerPort": "0", "proxyName": "proxy-1"})
    settings = {"metrics_exporter_type": "PROM", "metrics_prom_exporter_port": 0, "metrics_label": "env:test"}
    async with EmbeddedCluster(tmp_path / "cluster", proxy=proxy, **SMALL_STORE, **settings) as cluster:
        exporter = cluster.controller.metrics
        assert exporter is not None and exporter.address is not None
        families = await scrape(exporter.address)
    up = families.get("rocketmq_proxy_up", [])
    assert [(s.labels, s.value) for s in up] == [
        (
            {
                "otel_scope_name": "broker-meter",  # the broker's meter: one scope
                "cluster": "DefaultCluster",
                "node_type": "proxy",
                "node_id": "proxy-1",
                "env": "test",
                "proxy_mode": "local",
            },
            1.0,
        )
    ]
    # The broker's own families keep the broker's labels.
    assert value(families, "rocketmq_broker_permission", node_type="broker", node_id="broker-a") == 6


async def test_metrics_in_delta_labels_every_broker_series_aggregation_delta(tmp_path: Path) -> None:
    """``metricsInDelta=true`` in broker.conf: RocketMQ 5.3.3's BrokerMetricsManager ``init``
    (broker/src/main/java/org/apache/rocketmq/broker/metrics/BrokerMetricsManager.java) puts
    ``aggregation="delta"`` into the label map every broker instrument (the RPC latency too) is recorded with, over a
    ``metricsLabel`` pair of that name; the Prometheus exporter still serves cumulative values (only the OTLP
    exporter switches temporality). Ours did not know the setting."""
    conf = tmp_path / "broker.conf"
    conf.write_text("metricsInDelta=true\nmetricsLabel=env:test,aggregation:mine\n")
    config, unknown = load_broker_config(conf)
    assert unknown == []
    settings = {"metrics_exporter_type": "PROM", "metrics_prom_exporter_port": 0}
    overrides = {"metrics_in_delta": config.metrics_in_delta, "metrics_label": config.metrics_label}
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE, **settings, **overrides) as cluster:
        exporter = cluster.controller.metrics
        assert exporter is not None and exporter.address is not None
        async with Producer("delta_pg", cluster.namesrv_addr) as producer:
            for _ in range(2):
                await producer.send(Message("DeltaTopic", b"d"))
        families = await scrape(exporter.address)
    samples = [s for name, found in families.items() if name.startswith("rocketmq_") for s in found]
    assert samples and all(s.labels.get("aggregation") == "delta" for s in samples)
    assert all(s.labels.get("env") == "test" for s in samples)
    assert value(families, "rocketmq_messages_in_total", topic="DeltaTopic") == 2  # cumulative, as 5.3.3's PROM


async def test_metrics_in_delta_labels_the_proxy_up_gauge_too(tmp_path: Path) -> None:
    """RocketMQ 5.3.3's local proxy records ``rocketmq_proxy_up`` with the broker's attributes builder
    (proxy/src/main/java/org/apache/rocketmq/proxy/metrics/ProxyMetricsManager.java ``initLocalMode`` passes
    ``BrokerMetricsManager::newAttributesBuilder``), so with ``metricsInDelta`` it carries ``aggregation="delta"``
    as every broker series does; ours left it out."""
    from proxy.config import proxy_config_from

    proxy, _ = proxy_config_from({"enableProxy": "true", "grpcServerPort": "0", "proxyName": "proxy-1"})
    settings = {"metrics_exporter_type": "PROM", "metrics_prom_exporter_port": 0, "metrics_in_delta": True}
    async with EmbeddedCluster(tmp_path / "cluster", proxy=proxy, **SMALL_STORE, **settings) as cluster:
        exporter = cluster.controller.metrics
        assert exporter is not None and exporter.address is not None
        families = await scrape(exporter.address)
    [up] = families.get("rocketmq_proxy_up", [])
    assert (up.labels.get("aggregation"), up.labels["node_type"], up.value) == ("delta", "proxy", 1.0)


async def test_every_series_carries_its_otel_scope_and_the_target_and_scope_info_are_served(
    metrics_cluster: EmbeddedCluster,
) -> None:
    """RocketMQ 5.3.3's exporter (OpenTelemetry 1.29's ``PrometheusHttpServer``, exporters/prometheus/.../Serializer
    .java) writes ``otel_scope_name="broker-meter"`` (``BrokerMetricsConstant.OPEN_TELEMETRY_METER_NAME``) on every
    sample, the overflow series' too, a ``target_info`` line (the broker's empty resource) and an ``otel_scope_info``
    line per scope; queries and dashboards made for it select or join on them."""
    cluster = metrics_cluster
    exporter = cluster.controller.metrics
    assert exporter is not None and exporter.address is not None
    async with Producer("scope_pg", cluster.namesrv_addr) as producer:
        await producer.send(Message("ScopeTopic", b"s"))
    families = await scrape(exporter.address)
    samples = [s for name, got in families.items() if name not in ("target_info", "otel_scope_info") for s in got]
    assert samples and all(s.labels.get("otel_scope_name") == "broker-meter" for s in samples)
    assert [(s.labels, s.value) for s in families["target_info"]] == [({}, 1)]
    assert [(s.labels, s.value) for s in families["otel_scope_info"]] == [({"otel_scope_name": "broker-meter"}, 1)]
    assert value(families, "rocketmq_messages_in_total", otel_scope_name="broker-meter", topic="ScopeTopic") == 1


async def test_lag_of_a_tag_subscription_counts_only_the_messages_of_its_tags(metrics_cluster: EmbeddedCluster) -> None:
    """RocketMQ 5.3.3's ConsumerLagCalculator ``calculateMessageCount``, with ``estimateAccumulation`` (true by
    default): a TAG subscription's lag and ready messages count the consume-queue entries whose tags code it takes
    (DefaultMessageStore / ConsumeQueue ``estimateMessageCount``), not every message after its offset. A consumer of
    TagA behind 2 TagA and 6 TagB messages has a lag of 2 (ours reported 8, alerts firing for messages it will
    never receive)."""
    cluster = metrics_cluster
    exporter = cluster.controller.metrics
    assert exporter is not None and exporter.address is not None
    topic, group = "TagLagTopic", "taglag_cg"
    async with RemotingClient() as client:
        await create_one_queue_topic(client, cluster, topic)
        for i in range(8):
            send = send_request(topic, b"m%d" % i, properties=tags_props("TagA" if i % 4 == 0 else "TagB"))
            assert (await client.invoke(cluster.broker_addr, send, 5)).code == ResponseCode.SUCCESS
        subscription = build_subscription(topic, "TagA")
        consumer = ConsumerData(group, subscription_data_set=(subscription,))
        beat = HeartbeatData("taglag-client", consumer_data_set=(consumer,))
        answer = await client.invoke(cluster.broker_addr, request(RequestCode.HEART_BEAT, body=beat.encode()), 5)
        assert answer.code == ResponseCode.SUCCESS
        commit = {"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": "0"}
        answer = await client.invoke(cluster.broker_addr, request(RequestCode.UPDATE_CONSUMER_OFFSET, commit), 5)
        assert answer.code == ResponseCode.SUCCESS
        families = await scrape(exporter.address)
    lag = value(families, "rocketmq_consumer_lag_messages", consumer_group=group, topic=topic)
    ready = value(families, "rocketmq_consumer_ready_messages", consumer_group=group, topic=topic)
    assert (lag, ready) == (2, 2), "messages of tags the group does not take counted as its lag"


async def test_past_the_scan_budgets_a_tag_range_is_estimated_without_scanning(
    metrics_cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One scrape's tag estimates scan a bounded number of consume-queue entries in all (ours: RocketMQ 5.3.3 scans
    up to 20,000 per range on a metrics thread of its own; here they run on the event loop): past the budget and the
    per-range floor's own budget, a range is estimated from the share of the group's tags seen so far, scanning
    nothing. Ours kept scanning 1,000 entries per further range, so 10,000 lagging ranges cost half a second of the
    loop per scrape (found by a review). Here the budgets cover one topic's range: the other topic's is estimated
    with its ratio, so both show the same lag whichever comes first."""
    monkeypatch.setattr(lag_module, "SCAN_BUDGET", 8)
    monkeypatch.setattr(lag_module, "SCAN_FLOOR", 8)
    monkeypatch.setattr(lag_module, "FLOOR_BUDGET", 0, raising=False)
    cluster = metrics_cluster
    exporter = cluster.controller.metrics
    assert exporter is not None and exporter.address is not None
    group, tags = "budget_cg", {"HalfTagA": ("TagA", "TagB"), "AllTagA": ("TagA", "TagA")}
    async with RemotingClient() as client:
        for topic, (even, odd) in tags.items():
            await create_one_queue_topic(client, cluster, topic)
            for i in range(8):
                send = send_request(topic, b"m%d" % i, properties=tags_props(even if i % 2 == 0 else odd))
                assert (await client.invoke(cluster.broker_addr, send, 5)).code == ResponseCode.SUCCESS
        subscriptions = tuple(build_subscription(topic, "TagA") for topic in tags)
        beat = HeartbeatData(
            "budget-client", consumer_data_set=(ConsumerData(group, subscription_data_set=subscriptions),)
        )
        answer = await client.invoke(cluster.broker_addr, request(RequestCode.HEART_BEAT, body=beat.encode()), 5)
        assert answer.code == ResponseCode.SUCCESS
        for topic in tags:
            commit = {"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": "0"}
            answer = await client.invoke(cluster.broker_addr, request(RequestCode.UPDATE_CONSUMER_OFFSET, commit), 5)
            assert answer.code == ResponseCode.SUCCESS
        families = await scrape(exporter.address)
    lags = [value(families, "rocketmq_consumer_lag_messages", consumer_group=group, topic=topic) for topic in tags]
    assert lags[0] == lags[1] and lags[0] in (4, 8), lags


async def test_a_oneway_request_its_processor_does_not_answer_is_not_timed(
    metrics_cluster: EmbeddedCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """RocketMQ 5.3.3 records ``rocketmq_rpc_latency`` in ``NettyRemotingAbstract.writeResponse``, which returns
    before recording when the processor gave no response: a producer's oneway END_TRANSACTION of an unknown outcome,
    to which EndTransactionProcessor returns null, adds no series (ours recorded one with
    ``response_code="success"``, an answer the broker never made)."""
    cluster = metrics_cluster
    exporter = cluster.controller.metrics
    assert exporter is not None and exporter.address is not None
    caplog.set_level("WARNING", logger="processors.end_transaction")

    async def unknown(msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.UNKNOWN

    async def check(msg: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.UNKNOWN

    async with TransactionProducer(
        "oneway_tx_pg", cluster.namesrv_addr, execute_local_transaction=unknown, check_local_transaction=check
    ) as producer:
        await producer.send_message_in_transaction(Message(TOPIC, b"pending"))
        with trio.fail_after(30):
            while not any("pending status" in r.getMessage() for r in caplog.records):
                await trio.sleep(0.05)
    families = await scrape(exporter.address)
    ends = value(families, "rocketmq_rpc_latency_milliseconds_count", request_code="end_transaction")
    assert ends == 0, "a oneway request nobody answered was timed with a response code"


async def test_message_type_fifo_follows_the_messages_sharding_key_not_the_topics_order_flag(
    metrics_cluster: EmbeddedCluster,
) -> None:
    """RocketMQ 5.3.3's ``BrokerMetricsManager.getMessageType`` labels an incoming message from its own properties:
    ``fifo`` when it carries ``__SHARDINGKEY`` (a 5.x message group), whatever the topic; the topic config's order
    flag plays no part. A message group's message to a topic created without the flag (as 5.x FIFO topics are, with
    ``message.type=FIFO``) is ``fifo``; a 4.x producer's plain message to an order topic is ``normal`` (ours labelled
    both by the flag)."""
    cluster = metrics_cluster
    exporter = cluster.controller.metrics
    assert exporter is not None and exporter.address is not None
    async with RemotingClient() as client:
        await create_one_queue_topic(client, cluster, "GroupedTopic")
        create = {
            "topic": "OrderFlagTopic", "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
            "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "true",
        }  # fmt: skip
        created = await client.invoke(cluster.broker_addr, request(RequestCode.UPDATE_AND_CREATE_TOPIC, create), 5)
        assert created.code == ResponseCode.SUCCESS
        grouped = send_request("GroupedTopic", b"g", properties=tags_props("A", __SHARDINGKEY="order-1"))
        plain = send_request("OrderFlagTopic", b"p", properties=tags_props("A"))
        for send in (grouped, plain):
            assert (await client.invoke(cluster.broker_addr, send, 5)).code == ResponseCode.SUCCESS
        families = await scrape(exporter.address)
    kinds = {
        s.labels["topic"]: s.labels["message_type"]
        for s in families["rocketmq_messages_in"]
        if s.name == "rocketmq_messages_in_total" and s.labels["topic"] in ("GroupedTopic", "OrderFlagTopic")
    }
    assert kinds == {"GroupedTopic": "fifo", "OrderFlagTopic": "normal"}


async def test_commits_and_rollbacks_are_counted_per_real_topic_with_their_finish_latency(
    metrics_cluster: EmbeddedCluster,
) -> None:
    """RocketMQ 5.3.3's EndTransactionProcessor ``processRequest`` adds one to ``rocketmq_commit_messages_total`` once
    the committed message is stored, and records ``(now - the half's born time) / 1000`` (seconds, under the unit
    ``ms`` the exporter spells ``milliseconds``) in ``rocketmq_finish_message_latency`` with 5.3.3's buckets (5 s, 1
    min, 10 min, 1 h, 12 h, 24 h; BrokerMetricsManager ``registerMetricsView``); a rollback adds one to
    ``rocketmq_rollback_messages_total``. All labelled with the real topic (ours exported none of them)."""
    cluster = metrics_cluster
    exporter = cluster.controller.metrics
    assert exporter is not None and exporter.address is not None
    outcomes = iter([LocalTransactionState.COMMIT_MESSAGE] * 2 + [LocalTransactionState.ROLLBACK_MESSAGE])

    async def execute(msg: Message, arg: object) -> LocalTransactionState:
        return next(outcomes)

    async def check(msg: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.UNKNOWN

    async with TransactionProducer(
        "tx_metrics_pg", cluster.namesrv_addr, execute_local_transaction=execute, check_local_transaction=check
    ) as producer:
        for body in (b"a", b"b", b"c"):
            await producer.send_message_in_transaction(Message(TOPIC, body))
    with trio.fail_after(30):  # END_TRANSACTION is oneway: wait until the broker handled all three
        while True:
            families = await scrape(exporter.address)
            ends = value(families, "rocketmq_commit_messages_total", topic=TOPIC)
            if ends + value(families, "rocketmq_rollback_messages_total", topic=TOPIC) == 3:
                break
            await trio.sleep(0.05)
    assert ends == 2
    assert value(families, "rocketmq_rollback_messages_total", topic=TOPIC) == 1
    latency = "rocketmq_finish_message_latency_milliseconds"
    buckets = {s.labels["le"]: s.value for s in families[latency] if s.name == f"{latency}_bucket"}
    assert buckets == {
        "5.0": 2, "60.0": 2, "600.0": 2, "3600.0": 2, "43200.0": 2, "86400.0": 2, "+Inf": 2,
    }  # fmt: skip
    assert value(families, f"{latency}_count", topic=TOPIC, cluster="DefaultCluster") == 2


async def test_half_messages_count_pending_transactions_per_real_topic_across_a_restart(
    metrics_cluster: EmbeddedCluster,
) -> None:
    """RocketMQ 5.3.3's ``rocketmq_half_messages{topic}`` (BrokerMetricsManager ``initTransactionMetrics``) reads
    TransactionMetrics: one more per half message stored (SendMessageProcessor), one less per commit or rollback
    (EndTransactionProcessor) or discard (DefaultTransactionalMessageCheckListener), kept per real topic in
    ``config/transactionMetrics`` (TransactionalMessageServiceImpl loads it at start), so pending transactions are
    still counted after a restart (ours exported no such gauge)."""
    cluster = metrics_cluster
    outcomes = iter([LocalTransactionState.UNKNOWN] * 2 + [LocalTransactionState.COMMIT_MESSAGE])

    async def execute(msg: Message, arg: object) -> LocalTransactionState:
        return next(outcomes)

    async def check(msg: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.UNKNOWN

    async def half_messages() -> float:
        exporter = cluster.controller.metrics
        assert exporter is not None and exporter.address is not None
        return value(await scrape(exporter.address), "rocketmq_half_messages", topic=TOPIC)

    async with TransactionProducer(
        "tx_half_pg", cluster.namesrv_addr, execute_local_transaction=execute, check_local_transaction=check
    ) as producer:
        for body in (b"a", b"b", b"c"):
            await producer.send_message_in_transaction(Message(TOPIC, body))
    with trio.fail_after(30):  # the commit is oneway
        while await half_messages() != 2:
            await trio.sleep(0.05)
    await cluster.restart_broker()
    assert (Path(cluster.controller.config.store_path_root_dir) / "config" / "transactionMetrics").is_file()
    assert await half_messages() == 2


async def test_message_size_is_recorded_once_per_send_request_with_the_batch_average(
    metrics_cluster: EmbeddedCluster,
) -> None:
    """RocketMQ 5.3.3's SendMessageProcessor ``handlePutMessageResult`` records ``rocketmq_message_size`` once per
    send request: the written bytes over the message count (a batch's average record size), labelled as
    ``rocketmq_messages_in_total``, with the buckets of BrokerMetricsManager ``registerMetricsView`` (1 KB, 4 KB,
    512 KB, 1 MB, 2 MB, 4 MB). Ours exported no such histogram."""
    cluster = metrics_cluster
    exporter = cluster.controller.metrics
    assert exporter is not None and exporter.address is not None
    async with Producer("size_pg", cluster.namesrv_addr) as producer:
        await producer.send(Message("SizeTopic", b"s" * 100))
        await producer.send(Message("SizeTopic", b"m" * 2000))
        await producer.send_batch([Message("SizeTopic", b"b" * 3000) for _ in range(3)])
    store = cluster.controller.context.store
    sizes = [len(m) for m in store.get("SizeTopic", 0, 0, 10).messages]
    for queue in range(1, 4):
        sizes += [len(m) for m in store.get("SizeTopic", queue, 0, 10).messages]
    small = [s for s in sizes if s < 1024]
    assert len(small) == 1 and len(sizes) == 5
    families = await scrape(exporter.address)
    labels = {"topic": "SizeTopic", "message_type": "normal", "is_system": "false"}
    buckets = {
        s.labels["le"]: s.value
        for s in families["rocketmq_message_size"]
        if s.name == "rocketmq_message_size_bucket" and all(s.labels[k] == v for k, v in labels.items())
    }
    assert buckets == {
        "1024.0": 1, "4096.0": 3, "524288.0": 3, "1048576.0": 3, "2097152.0": 3, "4194304.0": 3, "+Inf": 3,
    }  # fmt: skip
    assert value(families, "rocketmq_message_size_count", **labels) == 3
    batch = sorted(sizes)[2:]
    assert value(families, "rocketmq_message_size_sum", **labels) == sum(sorted(sizes)[:2]) + sum(batch) // 3


async def test_a_stored_reply_records_its_message_size_as_a_send_does(metrics_cluster: EmbeddedCluster) -> None:
    """RocketMQ 5.3.3's ReplyMessageProcessor ``handlePutMessageResult`` records ``rocketmq_message_size`` for a
    stored reply, whether the push reached the requester or not, with the send path's labels (``getMessageType`` of
    the request's properties: ``transaction`` with TRAN_MSG true, ``fifo`` with a sharding key, ``delay`` with a
    start-deliver time). Ours recorded nothing for a reply, then labelled a delayed or transactional one ``normal``."""
    cluster = metrics_cluster
    exporter = cluster.controller.metrics
    assert exporter is not None and exporter.address is not None
    extras = {
        "normal": b"",
        "fifo": b"__SHARDINGKEY\\u0001g1\\u0002",
        "delay": b"__STARTDELIVERTIME\\u00011700000009000\\u0002",
        "transaction": b"TRAN_MSG\\u0001true\\u0002__SHARDINGKEY\\u0001g1\\u0002",
    }
    for extra in extras.values():
        answer = await ask(cluster.broker_addr, reply_v2(None, extra=extra))
        assert answer.code == ResponseCode.SYSTEM_ERROR  # nobody to push to; stored all the same
    store = cluster.controller.context.store
    sizes = [len(m) for m in store.get(REPLY_TOPIC, 0, 0, 10).messages]
    assert len(sizes) == len(extras)
    families = await scrape(exporter.address)
    for kind, size in zip(extras, sizes, strict=True):
        labels = {"topic": REPLY_TOPIC, "message_type": kind}
        assert value(families, "rocketmq_message_size_count", **labels) == 1
        assert value(families, "rocketmq_message_size_sum", **labels) == size
        assert value(families, "rocketmq_messages_in_total", **labels) == 1


async def test_a_group_that_pops_without_heartbeats_reports_pop_lag_and_its_retry_series(
    metrics_cluster: EmbeddedCluster,
) -> None:
    """RocketMQ 5.3.3's ConsumerLagCalculator ``processAllGroup`` finds a group that pops without heartbeats in the
    compensation table (``getConsumerGroupInfo(group, true)``), as CONSUME_POP (PopMessageProcessor
    ``compensateBasicConsumerInfo``): its lag is the messages past the pop offset plus those in flight
    (PopInflightMessageCounter: popped, not acked nor revived), inflight those, ready those past the pop offset, and a
    second series of each labelled ``is_retry="true"`` reads the group's pop retry topic. Ours reported no lag for a
    group without heartbeats."""
    cluster = metrics_cluster
    exporter = cluster.controller.metrics
    assert exporter is not None and exporter.address is not None
    async with RemotingClient() as client:
        await create_one_queue_topic(client, cluster, "PopLag")
        async with Producer("pop_lag_pg", cluster.namesrv_addr) as producer:
            for i in range(5):
                await producer.send(Message("PopLag", b"%d" % i))
        pop = {
            "consumerGroup": "pop_lag_cg", "topic": "PopLag", "queueId": "-1", "maxMsgNums": "2",
            "invisibleTime": "60000", "pollTime": "0", "bornTime": "0", "initMode": "0", "expType": "TAG", "exp": "*",
        }  # fmt: skip
        answer = await client.invoke(cluster.broker_addr, request(RequestCode.POP_MESSAGE, pop), 10)
        popped = decode_records(bytes(answer.body))
        assert len(popped) == 2
        acked = await client.invoke(cluster.broker_addr, ack_request("PopLag", popped[0], "pop_lag_cg"), 10)
        assert acked.code == ResponseCode.SUCCESS, acked.remark
    families = await scrape(exporter.address)
    row = {"consumer_group": "pop_lag_cg", "topic": "PopLag"}

    def gauges(retry: str) -> tuple[float, ...]:
        names = ("consumer_lag_messages", "consumer_inflight_messages", "consumer_ready_messages")
        return tuple(value(families, f"rocketmq_{name}", **row, is_retry=retry) for name in names)

    assert gauges("false") == (3 + 1, 1, 3)
    assert value(families, "rocketmq_consumer_lag_latency_milliseconds", **row, is_retry="false") > 0
    assert gauges("true") == (0, 0, 0)
    retry_rows = [s for s in families["rocketmq_consumer_lag_messages"] if s.labels.get("is_retry") == "true"]
    assert [s.labels["consumer_group"] for s in retry_rows] == ["pop_lag_cg"]


async def test_a_consumer_group_whose_consume_type_is_null_has_no_connection_series(
    metrics_cluster: EmbeddedCluster,
) -> None:
    """A heartbeat whose ``consumeType`` names no member registers the group with it null (4.9.8's ConsumerData read
    by fastjson 1.2.69); RocketMQ 5.3.3's BrokerMetricsManager labels ``rocketmq_consumer_connections`` with
    ``getTypeCN()`` of it, which throws, so such a group has no series, and the scrape still serves the others."""
    cluster = metrics_cluster
    exporter = cluster.controller.metrics
    assert exporter is not None and exporter.address is not None
    async with RemotingClient() as client:
        for group, consume_type in (("null_type_cg", None), ("pull_type_cg", ConsumeType.CONSUME_ACTIVELY)):
            beat = HeartbeatData(f"{group}-client", consumer_data_set=(ConsumerData(group, consume_type),))
            answer = await client.invoke(cluster.broker_addr, request(RequestCode.HEART_BEAT, body=beat.encode()), 5)
            assert answer.code == ResponseCode.SUCCESS
        families = await scrape(exporter.address)
    assert value(families, "rocketmq_consumer_connections", consumer_group="pull_type_cg", consume_mode="pull") == 1
    assert value(families, "rocketmq_consumer_connections", consumer_group="null_type_cg") == 0
