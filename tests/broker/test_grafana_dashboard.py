"""docs/grafana/rocketrio-dashboard.json is built on what we serve: every metric its queries name is exported by a
live broker's ``/metrics`` after some traffic, with the labels the queries filter or group on."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import trio
from prometheus_client.parser import text_string_to_metric_families

from broker.embedded import EmbeddedCluster
from client import ConsumeConcurrentlyStatus, Message, MessageExt, Producer, PushConsumer
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from tests.conftest import SMALL_STORE

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "rocketrio-dashboard.json"
_METRIC = re.compile(r"\b(rocketmq_[a-z_]+)(?:\{([^}]*)\})?")
_LABEL = re.compile(r"([a-z_]+)\s*(?:=~|=|!=)")
_BY = re.compile(r"by \(([^)]*)\)")


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    queries += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    return queries


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
    for query in dashboard_queries():
        grouped = {label.strip() for match in _BY.findall(query) for label in match.split(",")} - {"le"}
        for name, selector in _METRIC.findall(query):
            assert name in served, f"{name} is not served (query {query!r})"
            used = set(_LABEL.findall(selector)) | grouped
            assert used <= served[name], f"{name} lacks {used - served[name]} (query {query!r})"
