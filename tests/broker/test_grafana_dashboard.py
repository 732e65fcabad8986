"""docs/grafana/rocketrio-dashboard.json is built on what we serve: every metric its queries name is exported by a
live broker's ``/metrics`` after some traffic (sends, a push consumer, a DLQ send-back, transactions, a pop), with the
labels the queries filter or group on; and every family that traffic makes the broker serve is charted, but those
:data:`NOT_CHARTED` names."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import trio
from prometheus_client.parser import text_string_to_metric_families

from broker.embedded import EmbeddedCluster
from client import ConsumeConcurrentlyStatus, Message, MessageExt, Producer, PushConsumer
from client.transaction import LocalTransactionState, TransactionProducer
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from tests.conftest import SMALL_STORE

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "rocketrio-dashboard.json"
_METRIC = re.compile(r"\b(rocketmq_[a-z_]+)(?:\{([^}]*)\})?")
_LABEL = re.compile(r"([a-z_]+)\s*(?:=~|=|!=)")
_BY = re.compile(r"by \(([^)]*)\)")
#: Families served but left off the dashboard: table sizes, the queueing latency beside the lag latency, the timer's.
NOT_CHARTED = frozenset({
    "rocketmq_topic_number", "rocketmq_consumer_group_number", "rocketmq_consumer_queueing_latency_milliseconds",
    "rocketmq_timer_enqueue_lag", "rocketmq_timer_enqueue_latency_milliseconds", "rocketmq_timer_dequeue_lag",
    "rocketmq_timer_dequeue_latency_milliseconds", "rocketmq_timing_messages", "rocketmq_timer_enqueue_total",
    "rocketmq_timer_dequeue_total", "rocketmq_timer_message_snapshot", "rocketmq_delay_message_latency_seconds",
})  # fmt: skip


def _family(sample: str) -> str:
    """The family of a sample name (a histogram's without its ``_bucket``, ``_count`` or ``_sum``)."""
    return re.sub(r"_(bucket|count|sum)$", "", sample)


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    queries += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    return queries


POP = {
    "consumerGroup": "dash_pop_cg", "topic": "DashTopic", "queueId": "-1", "maxMsgNums": "1", "invisibleTime": "60000",
    "pollTime": "0", "bornTime": "0", "initMode": "0", "expType": "TAG", "exp": "*",
}  # fmt: skip


async def end_transactions(cluster: EmbeddedCluster) -> None:
    """One committed and one rolled-back transaction on DashTopic, once the broker ended both (END_TRANSACTION is
    oneway)."""
    outcomes = iter([LocalTransactionState.COMMIT_MESSAGE, LocalTransactionState.ROLLBACK_MESSAGE])

    async def execute(msg: Message, arg: object) -> LocalTransactionState:
        return next(outcomes)

    async def check(msg: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.UNKNOWN

    async with TransactionProducer(
        "dash_tx_pg", cluster.namesrv_addr, execute_local_transaction=execute, check_local_transaction=check
    ) as producer:
        for body in (b"commit", b"rollback"):
            await producer.send_message_in_transaction(Message("DashTopic", body))
    ends = cluster.controller.context.stats.transactions
    with trio.fail_after(30):
        while sum(ends.commits.values()) + sum(ends.rollbacks.values()) < 2:
            await trio.sleep(0.05)


async def test_every_metric_and_label_the_dashboard_uses_is_served(tmp_path: Path) -> None:
    settings = {"metrics_exporter_type": "PROM", "metrics_prom_exporter_port": 0}
    cluster = EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE, **settings)
    async with cluster, Producer("dash_pg", cluster.namesrv_addr) as producer:
        for i in range(5):
            await producer.send(Message("DashTopic", b"%d" % i))
        got = trio.Event()

        async def on_messages(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            got.set()
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        # One message straight to the group's DLQ (delay level -1), for rocketmq_send_to_dlq_messages_total.
        back = {
            "offset": "0",
            "group": "dash_cg",
            "delayLevel": "-1",
            "originMsgId": "x",
            "originTopic": "DashTopic",
        }
        async with RemotingClient() as client:
            answer = await client.invoke(cluster.broker_addr, request(RequestCode.CONSUMER_SEND_MSG_BACK, back), 10)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
        await end_transactions(cluster)
        async with RemotingClient() as client:  # a pop: its CK is put into the revive topic
            answer = await client.invoke(cluster.broker_addr, request(RequestCode.POP_MESSAGE, POP), 10)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
        consumer = PushConsumer("dash_cg", cluster.namesrv_addr)
        consumer.subscribe("DashTopic", "*")
        consumer.register_message_listener(on_messages)
        async with consumer:
            with trio.fail_after(30):
                await got.wait()
            exporter = cluster.controller.metrics
            assert exporter is not None and exporter.address is not None
            url = f"http://{exporter.address[0]}:{exporter.address[1]}/metrics"
            text = await trio.to_thread.run_sync(lambda: urllib.request.urlopen(url, timeout=30).read().decode())
    served: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            served.setdefault(sample.name, set()).update(sample.labels)
    charted = {_family(name) for query in dashboard_queries() for name, _ in _METRIC.findall(query)}
    families = {_family(name) for name in served if name.startswith("rocketmq_")}
    assert families - charted - NOT_CHARTED == set(), "served, not charted"
    for query in dashboard_queries():
        grouped = {label.strip() for match in _BY.findall(query) for label in match.split(",")} - {"le"}
        for name, selector in _METRIC.findall(query):
            assert name in served, f"{name} is not served (query {query!r})"
            used = set(_LABEL.findall(selector)) | grouped
            assert used <= served[name], f"{name} lacks {used - served[name]} (query {query!r})"
