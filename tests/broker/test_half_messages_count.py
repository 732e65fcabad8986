"""``rocketmq_half_messages``' count (broker/stats/half_messages.py) against RocketMQ 5.3.3's SendMessageProcessor and
TransactionMetricsFlushService: a half message counts once its put is PUT_OK, and the counts are saved on a period,
not after every change."""

from __future__ import annotations

import math
from pathlib import Path

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from broker.stats.half_messages import FLUSH_INTERVAL_S
from remoting.client import RemotingClient
from remoting.codec.codes import ResponseCode
from tests.broker.helpers import create_topic_request
from tests.conftest import SMALL_STORE
from tests.processors.conftest import send_request

TOPIC = "HalfCountTopic"
HALF = "TRAN_MSG\x01true\x02PGROUP\x01pg-half\x02UNIQ_KEY\x01AC11000100002A9F0000000000000001"


async def test_a_half_message_whose_put_is_not_ok_is_not_counted(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """SendMessageProcessor adds one to TransactionMetrics only for a PUT_OK put (or a SUCCESS answer): a SYNC_MASTER
    without a slave stores the half and answers SLAVE_NOT_AVAILABLE, and the gauge does not count it (ours counted
    it at the append, and the producer's retry counted it again)."""
    async with EmbeddedCluster(tmp_path / "c", broker_role="SYNC_MASTER", **SMALL_STORE) as cluster:
        async with RemotingClient() as client:
            created = await client.invoke(cluster.broker_addr, create_topic_request(TOPIC, queues=1), 5)
            assert created.code == ResponseCode.SUCCESS
            answer = await client.invoke(cluster.broker_addr, send_request(TOPIC, properties=HALF), 10)
        assert answer.code == ResponseCode.SLAVE_NOT_AVAILABLE
        assert cluster.controller.context.half_messages.counts.get(TOPIC, (0, 0))[0] == 0


async def test_half_message_counts_are_saved_on_a_period_not_after_every_change(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """TransactionMetricsFlushService saves every ``transactionMetricFlushInterval`` (3 s): a stream of half
    messages makes a save every 3 s at most, not one fsync per message."""
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE) as cluster:
        persister = cluster.controller.context.half_messages.persister
        async with RemotingClient() as client:
            created = await client.invoke(cluster.broker_addr, create_topic_request(TOPIC, queues=1), 5)
            assert created.code == ResponseCode.SUCCESS
            before, started = persister.saves, trio.current_time()
            for _ in range(40):  # 40 half messages over 12 virtual seconds
                answer = await client.invoke(cluster.broker_addr, send_request(TOPIC, properties=HALF), 10)
                assert answer.code == ResponseCode.SUCCESS
                await trio.sleep(0.3)
            # A save's fsync runs in a worker thread, in real time, while the autojump clock may run on: on a loaded
            # machine the first save can still be running. Let time follow the real clock until it ends.
            autojump_clock.autojump_threshold, autojump_clock.rate = math.inf, 1.0
            with trio.fail_after(30):
                while persister.saves == before:
                    await trio.sleep(0.01)
            elapsed = trio.current_time() - started
        assert cluster.controller.context.half_messages.counts[TOPIC][0] == 40
        assert persister.saves - before <= 1 + elapsed / FLUSH_INTERVAL_S < 40, (persister.saves - before, elapsed)
