"""A push consumer's statistics as GET_CONSUMER_RUNNING_INFO reports them (client/consumer/stats.py): a real broker,
a push consumer that consumes 10 messages of which 3 fail once, read through our Admin and printed as ``mqadmin
consumerStatus`` prints them, in virtual time so the figures are what Java's ConsumerStatsManager formulas give."""

from __future__ import annotations

import anyio
import pytest
import trio
import trio.testing
from click.testing import CliRunner

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus
from client.consumer.lite_pull import LitePullConsumer
from client.consumer.subscription import retry_topic
from client.message import MessageExt
from client.mqadmin import main as mqadmin
from client.mqadmin_groups import running_info_text
from client.mqadmin_support import printf
from remoting.codec.bodies import ConsumeFromWhere
from tests.client.helpers import HANG_GUARD, create_topic, first_offset_consumer, poll_until, send_bodies, wait_until
from tests.semantics.helpers import use_virtual_store_clock
from tests.threaded_cluster import ThreadedCluster

TOPIC = "StatsTopic"
GROUP = "stats_cg"
LISTENER_TIME = 0.2  # each listener call's consume RT: 200 ms of virtual time


async def test_running_info_reports_java_consume_status(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    use_virtual_store_clock(embedded_cluster)  # the retries' 10 s delay runs on the broker's store clock
    ns = embedded_cluster.namesrv_addr
    await create_topic(ns, TOPIC, queues=1)
    await send_bodies(ns, TOPIC, [f"m{i}".encode() for i in range(10)])
    failing = {b"m1", b"m4", b"m7"}
    done: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        await anyio.sleep(LISTENER_TIME)
        if msgs[0].body in failing and msgs[0].reconsume_times == 0:
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        done.append(msgs[0].body)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = first_offset_consumer(ns, GROUP, TOPIC)
    consumer.register_message_listener(listener)
    async with consumer, Admin(ns) as admin:
        with trio.fail_after(HANG_GUARD):
            await wait_until(lambda: len(done) == 10)  # the 3 failures back from %RETRY% after 10 s
        origin = consumer.instance.consumer_stats.origin
        assert origin is not None
        # Between the minute window's ticks 60 and 70: its zero sample at the origin and six more, 60 s.
        await trio.sleep_until(origin + 65)
        info = await admin.consumer_running_info(GROUP, consumer.instance.client_id)
        status = info["statusTable"]
        assert set(status) == {TOPIC, retry_topic(GROUP)}
        main = status[TOPIC]
        assert main["pullRT"] == 0.0  # one FOUND pull, answered at once (the broker runs in this loop)
        assert main["pullTPS"] == 10 / 60
        assert main["consumeRT"] == 200.0
        assert main["consumeOKTPS"] == 7 / 60
        assert main["consumeFailedTPS"] == 3 / 60
        assert main["consumeFailedMsgs"] == 0  # the hour window has no sample before its first 10-minute tick
        # The retry topic's items were created after tick 10: their window starts there, 50 s.
        retry = status[retry_topic(GROUP)]
        # Its long poll was held from the start until the retries arrived: 10 s delay after a 200 ms listener call.
        assert retry["pullRT"] == 10_200.0
        assert retry["pullTPS"] == 3 / 50
        assert retry["consumeRT"] == 200.0
        assert retry["consumeOKTPS"] == 3 / 50
        assert retry["consumeFailedTPS"] == 0.0
        text = running_info_text(info)
        assert (
            printf("%-32s  %14.2f %14.2f %14.2f %14.2f %18.2f %25d%n", TOPIC, 0.0, 10 / 60, 200.0, 7 / 60, 3 / 60, 0)
            in text
        )

        # After the first 10-minute tick: the minute window is idle, consumeRT falls back to the hour's average and
        # the failed messages of the hour are counted.
        await trio.sleep_until(origin + 605)
        info = await admin.consumer_running_info(GROUP, consumer.instance.client_id)
        main = info["statusTable"][TOPIC]
        assert main["consumeRT"] == 200.0
        assert main["consumeOKTPS"] == main["consumeFailedTPS"] == main["pullTPS"] == 0.0
        assert main["consumeFailedMsgs"] == 3


async def test_orderly_consumer_counts_a_suspension_as_failed(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """ConsumeMessageOrderlyService: SUCCESS counts the call's messages OK, SUSPEND_CURRENT_QUEUE_A_MOMENT failed;
    every call its RT."""
    ns = embedded_cluster.namesrv_addr
    await create_topic(ns, TOPIC, queues=1)
    await send_bodies(ns, TOPIC, [f"m{i}".encode() for i in range(5)])
    done: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        await anyio.sleep(LISTENER_TIME)
        if msgs[0].body == b"m2" and msgs[0].reconsume_times == 0:
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        done.append(msgs[0].body)
        return ConsumeOrderlyStatus.SUCCESS

    consumer = first_offset_consumer(ns, GROUP, TOPIC)
    consumer.register_message_listener_orderly(listener)
    async with consumer, Admin(ns) as admin:
        with trio.fail_after(HANG_GUARD):
            await wait_until(lambda: len(done) == 5)
        origin = consumer.instance.consumer_stats.origin
        assert origin is not None
        await trio.sleep_until(origin + 65)
        main = (await admin.consumer_running_info(GROUP, consumer.instance.client_id))["statusTable"][TOPIC]
        assert main["consumeRT"] == 200.0  # 6 calls of 200 ms
        assert main["consumeOKTPS"] == 5 / 60
        assert main["consumeFailedTPS"] == 1 / 60
        assert main["pullTPS"] == 5 / 60


async def test_lite_pull_consumer_reports_its_pull_figures(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Ours records the lite pull loop's pull RT and TPS (Java's DefaultLitePullConsumerImpl records none); its
    consume figures stay 0."""
    ns = embedded_cluster.namesrv_addr
    await create_topic(ns, TOPIC, queues=1)
    await send_bodies(ns, TOPIC, [f"m{i}".encode() for i in range(10)])
    consumer = LitePullConsumer(GROUP, ns, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    async with consumer, Admin(ns) as admin:
        await consumer.subscribe(TOPIC)
        with trio.fail_after(HANG_GUARD):
            assert len(await poll_until(consumer, 10)) == 10
        origin = consumer.instance.consumer_stats.origin
        assert origin is not None
        await trio.sleep_until(origin + 65)
        info = await admin.consumer_running_info(GROUP, consumer.instance.client_id)
        assert info["statusTable"][TOPIC] == {
            "pullRT": 0.0,
            "pullTPS": 10 / 60,
            "consumeRT": 0.0,
            "consumeOKTPS": 0.0,
            "consumeFailedTPS": 0.0,
            "consumeFailedMsgs": 0,
        }


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_mqadmin_consumer_status_prints_our_consumers_rt_and_tps(cluster: ThreadedCluster) -> None:
    """``mqadmin consumerStatus -i`` against our push consumer (real time, the broker in another thread): the
    ``#Consumer RT&TPS#`` table has a row per subscribed topic, the retry topic's included (before these statistics
    our consumer sent an empty statusTable and the table had no rows)."""
    ns = cluster.namesrv_addr
    await create_topic(ns, TOPIC, queues=1)
    await send_bodies(ns, TOPIC, [b"a", b"b"])
    done: list[bytes] = []

    def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        done.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = first_offset_consumer(ns, GROUP, TOPIC)
    consumer.register_message_listener(listener)
    async with consumer:
        await wait_until(lambda: len(done) == 2)
        args = ["consumerStatus", "-n", ns, "-g", GROUP, "-i", consumer.instance.client_id]
        result = await anyio.to_thread.run_sync(lambda: CliRunner().invoke(mqadmin, args))
    assert result.exit_code == 0, result.output
    table = result.output.split("#Consumer RT&TPS#\n", 1)[1].splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in table[1:] if line.strip()}
    assert set(rows) == {TOPIC, retry_topic(GROUP)}
    assert rows[TOPIC][-2:] == ["0.00", "0"]  # nothing failed
