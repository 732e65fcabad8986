"""mqadmin consumerProgress without ``-g`` against the embedded cluster: one line per consumer group (the groups with
a ``%RETRY%`` topic) with its online clients, their lowest version, consume type and model, and its TPS and lag, for
groups with and without an online consumer."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from client.admin import Admin
from client.config import ClientConfig
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.lite_pull import LitePullConsumer
from client.consumer.push import PushConsumer
from client.errors import MQBrokerError
from client.message import Message, MessageExt
from client.mqadmin import main as mqadmin
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere, MessageQueue
from tests.client.helpers import HANG_GUARD, create_topic, wait_until
from tests.threaded_cluster import ThreadedCluster

COLUMNS = ["#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total"]
#: mqadmin --json keys rows by the column names without their ``#``.
KEYS = [c.lstrip("#") for c in COLUMNS]


def _cli(*args: str) -> Any:
    result = CliRunner().invoke(mqadmin, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


async def _pull_and_commit(consumer: LitePullConsumer, mq: MessageQueue, count: int) -> int:
    """Poll ``mq`` until at least ``count`` messages came, commit them, and return how many came."""
    await consumer.assign([mq])
    with anyio.fail_after(HANG_GUARD):
        taken = 0
        while taken < count:
            taken += len(await consumer.poll(timeout=10))
    await consumer.commit([mq])
    return taken


async def _wait_for(admin: Admin, group: str, diff_total: int) -> None:
    """Until the broker's stored offsets of ``group`` leave ``diff_total`` messages to consume."""
    with anyio.fail_after(HANG_GUARD):
        while True:
            progress = await admin.consumer_progress(group)
            if progress and sum(w.broker_offset - w.consumer_offset for w in progress.values()) == diff_total:
                return
            await anyio.sleep(0.05)


@pytest.mark.anyio
async def test_consumer_progress_without_a_group_lists_every_group_online_or_not(cluster: ThreadedCluster) -> None:
    ns = cluster.namesrv_addr
    await create_topic(ns, "Progress", queues=2)
    q0, q1 = MessageQueue("Progress", "broker-a", 0), MessageQueue("Progress", "broker-a", 1)
    async with Producer("pg-progress", ns) as producer:
        for i in range(10):
            await producer.send(Message("Progress", f"{i}".encode()), queue=(q0, q1)[i % 2])
    # A group that consumed some of queue 0's 5 messages and went away: offline, with a lag.
    async with LitePullConsumer("cg-gone", ns, auto_commit=False, pull_batch_size=2) as gone:
        gone_lag = 10 - await _pull_and_commit(gone, q0, 2)
    seen: list[MessageExt] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    pushers = []
    for _ in range(2):
        config = ClientConfig(namesrv_addr=ns, persist_consumer_offset_interval=0.1)
        pusher = PushConsumer(
            "cg-push", ns, config=config, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        )
        pusher.subscribe("Progress")
        pusher.register_message_listener(listener)
        pushers.append(pusher)
    async with (
        pushers[0],
        pushers[1],
        LitePullConsumer("cg-pull", ns, auto_commit=False, pull_batch_size=1) as puller,
        Admin(ns) as admin,
    ):
        pull_lag = 10 - await _pull_and_commit(puller, q1, 1)
        # At least once: a queue moving to the second consumer may be delivered again before its offset is saved.
        await wait_until(lambda: len({m.body for m in seen}) == 10)
        await _wait_for(admin, "cg-push", 0)
        await _wait_for(admin, "cg-pull", pull_lag)
        await _wait_for(admin, "cg-gone", gone_lag)
        with pytest.raises(MQBrokerError):
            await admin.consumer_connection("cg-gone")
        assert len((await admin.consumer_connection("cg-push")).connection_set) == 2
        groups = {"cg-push", "cg-pull", "cg-gone"}
        with anyio.fail_after(HANG_GUARD):  # the broker registers each new %RETRY% topic with the name server
            while not {f"%RETRY%{g}" for g in groups} <= set(await admin.topic_list()):
                await anyio.sleep(0.05)

        run = anyio.to_thread.run_sync
        rows = (await run(_cli, "consumerProgress", "-n", ns))["rows"]
        assert all(list(row) == KEYS and isinstance(row["TPS"], int) and row["TPS"] >= 0 for row in rows)
        assert [[row[c] for c in KEYS if c != "TPS"] for row in rows] == [
            ["cg-gone", 0, "OFFLINE", "", "", gone_lag],
            ["cg-pull", 1, "V4_9_8", "PULL", "", pull_lag],
            ["cg-push", 2, "V4_9_8", "PUSH", "CLUSTERING", 0],
        ]
        # The -g form still lists one group's queues.
        one = await run(_cli, "consumerProgress", "-n", ns, "-g", "cg-gone")
        assert [(r["QID"], r["Diff"]) for r in one["rows"] if r["Topic"] == "Progress"] == [(0, gone_lag - 5), (1, 5)]
        assert one["Diff Total"] == gone_lag and one["Consume TPS"] >= 0
        table = await run(lambda: CliRunner().invoke(mqadmin, ["consumerProgress", "-n", ns]))
    assert table.exit_code == 0, table.output
    assert all(column in table.output for column in COLUMNS)
    assert "OFFLINE" in table.output and "CLUSTERING" in table.output
