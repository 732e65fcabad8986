"""Where a topic's and a consumer group's create-or-update and delete go (found by a review): the brokers picked
in the dialog, as rocketmq-dashboard's ``clusterNameList`` / ``brokerNameList``, and for an update of a topic with
none picked the brokers that hold it, never every master of every cluster. A real cluster of three masters: broker-a
and broker-b in DefaultCluster, broker-x alone in OtherCluster."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest
import trio

from broker.controller import BrokerController
from broker.embedded import EmbeddedCluster
from broker.ports import BROKER, free_ports
from client.admin import Admin
from remoting.codec.bodies import MessageQueue
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from tests.client.helpers import HANG_GUARD
from tests.conftest import SMALL_STORE
from tests.dashboard.conftest import Dash, open_dash


@attrs.frozen
class Three:
    dash: Dash
    controllers: dict[str, BrokerController]

    def holders(self, topic: str) -> dict[str, int]:
        """Broker name -> the topic's read queue count, on each broker that stores the topic."""
        return {
            name: config.read_queue_nums
            for name, c in self.controllers.items()
            if (config := c.context.topics.get(topic)) is not None
        }


@pytest.fixture
async def three(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Three]:
    async with EmbeddedCluster(tmp_path / "c", brokers=2, **SMALL_STORE) as cluster:
        other = attrs.evolve(
            cluster.other_config(1),
            broker_cluster_name="OtherCluster",
            broker_name="broker-x",
            listen_port=free_ports(1, **BROKER)[0],  # room for the fast channel the dashboard uses by default
            store_path_root_dir=str(tmp_path / "x"),
        )
        x = BrokerController(other)
        scope, done = trio.CancelScope(), trio.Event()
        await nursery.start(_serve, x, scope, done)
        try:
            async with Admin(cluster.namesrv_addr) as admin:
                with trio.fail_after(HANG_GUARD):
                    while "OtherCluster" not in (await admin.cluster_info()).cluster_addr_table:
                        await trio.sleep(0.05)
            async for dash in open_dash(cluster, nursery):
                [a, b] = cluster.controllers
                yield Three(dash, {"broker-a": a, "broker-b": b, "broker-x": x})
        finally:
            scope.cancel()  # broker-x stops before the name server it unregisters from
            await done.wait()


async def _serve(
    controller: BrokerController,
    scope: trio.CancelScope,
    done: trio.Event,
    *,
    task_status: trio.TaskStatus[object] = trio.TASK_STATUS_IGNORED,
) -> None:
    try:
        with scope:
            await controller.serve(task_status=task_status)
    finally:
        done.set()


async def _routed(dash: Dash, topic: str, brokers: set[str]) -> None:
    with trio.fail_after(HANG_GUARD):
        while True:
            listed = topic in await dash.admin.topic_list()
            if listed and {bd.broker_name for bd in (await dash.admin.topic_route(topic)).broker_datas} == brokers:
                return
            await trio.sleep(0.02)


async def test_a_topic_goes_to_the_picked_brokers_and_an_update_stays_on_its_holders(three: Three) -> None:
    dash = three.dash
    queues = {"readQueueNums": 3, "writeQueueNums": 3}
    created = await dash.post("/api/topics", {"topic": "PickedTopic", **queues, "brokerNameList": ["broker-a"]})
    assert created["brokerNames"] == ["broker-a"] and three.holders("PickedTopic") == {"broker-a": 3}
    await _routed(dash, "PickedTopic", {"broker-a"})

    # An update naming no broker changes the brokers holding the topic, and only those.
    updated = await dash.post("/api/topics", {"topic": "PickedTopic", "readQueueNums": 5, "writeQueueNums": 5})
    assert updated["brokerNames"] == ["broker-a"] and three.holders("PickedTopic") == {"broker-a": 5}

    # A cluster picked: every broker of that cluster, none of the other's.
    queues = {"readQueueNums": 2, "writeQueueNums": 2}
    spread = await dash.post("/api/topics", {"topic": "PickedTopic", **queues, "clusterNameList": ["DefaultCluster"]})
    assert spread["brokerNames"] == ["broker-a", "broker-b"]
    assert three.holders("PickedTopic") == {"broker-a": 2, "broker-b": 2}
    picks = {"clusterNameList": ["OtherCluster"], "brokerNameList": ["broker-b"]}
    other = await dash.post("/api/topics", {"topic": "OtherTopic", **picks})
    assert other["brokerNames"] == ["broker-b", "broker-x"]
    assert set(three.holders("OtherTopic")) == {"broker-b", "broker-x"}

    # The config view: the topic's config on each broker holding it, with its cluster.
    await _routed(dash, "OtherTopic", {"broker-b", "broker-x"})
    configs = (await dash.get("/api/topic/config?topic=OtherTopic"))["brokers"]
    held = [("broker-b", "DefaultCluster"), ("broker-x", "OtherCluster")]
    assert [(c["brokerName"], c["cluster"], c["readQueueNums"], c["permText"]) for c in configs] == [
        (*h, 4, "RW") for h in held
    ]
    route = (await dash.get("/api/topic?topic=OtherTopic"))["route"]
    assert sorted((r["brokerName"], r["cluster"]) for r in route) == held


async def test_a_new_topic_with_no_broker_picked_is_refused(three: Three) -> None:
    """rocketmq-dashboard's ``TopicController.topicCreateOrUpdateRequest`` refuses a create naming no cluster and no
    broker ("clusterName or brokerName can not be all blank"): a new topic never lands on every master of every
    cluster because nothing was ticked."""
    refused = await three.dash.post("/api/topics", {"topic": "EverywhereTopic"}, status=400)
    assert "clusterName or brokerName" in refused["error"]["message"]
    assert three.holders("EverywhereTopic") == {}


async def test_an_unknown_cluster_or_broker_name_changes_nothing(three: Three) -> None:
    dash = three.dash
    for body in (
        {"topic": "NowhereTopic", "brokerNameList": ["broker-a", "broker-q"]},
        {"topic": "NowhereTopic", "clusterNameList": ["NoSuchCluster"], "brokerNameList": ["broker-a"]},
    ):
        error = (await dash.post("/api/topics", body, status=400))["error"]["message"]
        assert "broker-q" in error or "NoSuchCluster" in error, error
    assert three.holders("NowhereTopic") == {}
    bad = await dash.post("/api/topics", {"topic": "NowhereTopic", "brokerNameList": "broker-a"}, status=400)
    assert "brokerNameList" in bad["error"]["message"]


def _group(c: BrokerController, group: str) -> SubscriptionGroupConfig | None:
    return c.context.groups.get(group)


async def test_a_groups_config_is_viewed_and_edited_on_the_picked_brokers(three: Three) -> None:
    dash, c = three.dash, three.controllers
    created = await dash.post("/api/group/config", {
        "brokerNameList": ["broker-a"],
        "subscriptionGroupConfig": {"groupName": "cfg-cg", "retryMaxTimes": 3, "consumeBroadcastEnable": False},
    })  # fmt: skip
    assert created["brokerNames"] == ["broker-a"] and _group(c["broker-b"], "cfg-cg") is None
    a = _group(c["broker-a"], "cfg-cg")
    assert a is not None and (a.retry_max_times, a.consume_broadcast_enable, a.consume_enable) == (3, False, True)
    [row] = (await dash.get("/api/group/config?group=cfg-cg"))["brokers"]
    assert (row["brokerName"], row["cluster"], row["address"], row["error"]) == (
        "broker-a", "DefaultCluster", c["broker-a"].broker_addr, None)  # fmt: skip
    assert row["config"]["retryMaxTimes"] == 3 and row["config"]["groupName"] == "cfg-cg"

    # None picked: the brokers that have the group; the settings not sent keep their values there.
    edited = {"groupName": "cfg-cg", "consumeEnable": False, "whichBrokerWhenConsumeSlowly": 2, "brokerId": 1}
    assert (await dash.post("/api/group/config", {"subscriptionGroupConfig": edited}))["brokerNames"] == ["broker-a"]
    a = _group(c["broker-a"], "cfg-cg")
    assert a is not None and (a.consume_enable, a.which_broker_when_consume_slowly, a.broker_id) == (False, 2, 1)
    assert a.retry_max_times == 3 and _group(c["broker-b"], "cfg-cg") is None

    # A cluster picked: its brokers get the group, from the defaults where they had none.
    other = {"groupName": "cfg-cg", "retryQueueNums": 2, "consumeFromMinEnable": "false"}
    body = {"clusterNameList": ["OtherCluster"], "subscriptionGroupConfig": other}
    assert (await dash.post("/api/group/config", body))["brokerNames"] == ["broker-x"]
    x = _group(c["broker-x"], "cfg-cg")
    assert x is not None and (x.retry_queue_nums, x.consume_from_min_enable, x.retry_max_times) == (2, False, 16)
    rows = (await dash.get("/api/group/config?group=cfg-cg"))["brokers"]
    assert [(r["brokerName"], r["config"]["retryQueueNums"]) for r in rows] == [("broker-a", 1), ("broker-x", 2)]

    refused = await dash.post("/api/group/config", {"subscriptionGroupConfig": {"groupName": "new-cg"}}, status=400)
    assert "pick the clusters or brokers" in refused["error"]["message"]
    bad = {"brokerNameList": ["broker-a"], "subscriptionGroupConfig": {"groupName": "new-cg", "retryMaxTimes": "x"}}
    assert "retryMaxTimes" in (await dash.post("/api/group/config", bad, status=400))["error"]["message"]
    assert all(_group(controller, "new-cg") is None for controller in c.values())


async def test_a_group_deleted_on_some_brokers_keeps_its_retry_topic_routed_until_the_last(three: Three) -> None:
    """rocketmq-dashboard's ``deleteSubGroup``: on each broker picked, the group with its offsets (``removeOffset``)
    and its ``%RETRY%``/``%DLQ%`` topics; the name servers forget those topics only once every broker having the
    group was picked."""
    dash, c = three.dash, three.controllers
    config = {"groupName": "del-some-cg"}
    await dash.post(
        "/api/group/config", {"brokerNameList": ["broker-a", "broker-x"], "subscriptionGroupConfig": config}
    )
    await dash.post("/api/topics", {"topic": "%RETRY%del-some-cg", "brokerNameList": ["broker-a", "broker-x"]})
    await _routed(dash, "%RETRY%del-some-cg", {"broker-a", "broker-x"})
    # a broker refuses offsets of a topic it does not hold (5.3.3's updateConsumerOffset)
    await dash.post("/api/topics", {"topic": "DelSomeTopic", "brokerNameList": ["broker-a", "broker-x"]})
    for name in ("broker-a", "broker-x"):
        mq = MessageQueue("DelSomeTopic", name, 0)
        await dash.admin.update_consumer_offset(c[name].broker_addr, "del-some-cg", mq, 5)
        assert c[name].context.offsets.query("del-some-cg", "DelSomeTopic", 0) == 5

    first = await dash.post("/api/group/delete", {"groupName": "del-some-cg", "brokerNameList": ["broker-x"]})
    assert (first["brokerNames"], first["namesrvCleaned"]) == (["broker-x"], False)
    assert _group(c["broker-x"], "del-some-cg") is None and _group(c["broker-a"], "del-some-cg") is not None
    assert c["broker-x"].context.offsets.query("del-some-cg", "DelSomeTopic", 0) < 0  # removeOffset
    assert c["broker-a"].context.offsets.query("del-some-cg", "DelSomeTopic", 0) == 5
    assert c["broker-x"].context.topics.get("%RETRY%del-some-cg") is None
    assert c["broker-a"].context.topics.get("%RETRY%del-some-cg") is not None
    assert "%RETRY%del-some-cg" in await dash.admin.topic_list()
    assert [r["brokerName"] for r in (await dash.get("/api/group/config?group=del-some-cg"))["brokers"]] == ["broker-a"]

    last = await dash.post("/api/group/delete", {"groupName": "del-some-cg", "brokerNameList": ["broker-a"]})
    assert (last["brokerNames"], last["namesrvCleaned"]) == (["broker-a"], True)
    assert (
        _group(c["broker-a"], "del-some-cg") is None and c["broker-a"].context.topics.get("%RETRY%del-some-cg") is None
    )
    assert "%RETRY%del-some-cg" not in await dash.admin.topic_list()
    assert (await dash.get("/api/group/config?group=del-some-cg"))["brokers"] == []

    nothing = await dash.post("/api/group/delete", {"groupName": "del-some-cg", "brokerNameList": []}, status=400)
    assert "brokerNameList" in nothing["error"]["message"]
