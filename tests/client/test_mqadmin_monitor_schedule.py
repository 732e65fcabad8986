"""``mqadmin startMonitoring``'s schedule against RocketMQ 4.9.8's ``MonitorService.startScheduleTask``
(tools/src/main/java/org/apache/rocketmq/tools/monitor/MonitorService.java), under virtual time: the real monitor
loop with a real Admin against the embedded cluster, a consumer group online with offsets to report."""

from __future__ import annotations

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client import mqadmin_groups
from client.admin import Admin
from client.mqadmin_support import Output
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumerData, HeartbeatData, MessageQueue, SubscriptionData
from remoting.codec.codes import RequestCode
from remoting.codec.command import request


class TimedOutput(Output):
    """The command's JSON output, each line stamped with the virtual time it was written at."""

    def __init__(self) -> None:
        super().__init__(as_json=True)
        self.times: list[float] = []

    def line(self, fmt: str, *values: object) -> None:
        self.times.append(trio.current_time())
        super().line(fmt, *values)


async def test_the_first_monitor_round_runs_20_s_after_start_then_every_round_interval(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """MonitorService.startScheduleTask: ``scheduleAtFixedRate(doMonitorWork, 1000 * 20, roundInterval)``, so the
    first round is 20 s after the start and the next ones every MonitorConfig.roundInterval (60 s) from there. Ours
    ran the first round at once."""
    ns, addr = embedded_cluster.namesrv_addr, embedded_cluster.broker_addr
    async with Admin(ns) as admin:
        for topic in ("MonSchedule", "%RETRY%mon-sched"):
            await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
        await admin.update_consumer_offset(addr, "mon-sched", MessageQueue("MonSchedule", "broker-a", 0), 0)
    sub = SubscriptionData("MonSchedule", "*")
    beat = HeartbeatData("10.0.0.9@sched", consumer_data_set=(ConsumerData("mon-sched", subscription_data_set=(sub,)),))
    out = TimedOutput()
    async with RemotingClient() as online, Admin(ns) as admin:
        assert (await online.invoke(addr, request(RequestCode.HEART_BEAT, body=beat.encode()), 5)).code == 0
        start = trio.current_time()
        await mqadmin_groups.monitor(admin, out, rounds=2)
    reported = [at - start for at, text in zip(out.times, out.doc["lines"], strict=True) if "mon-sched" in text]
    assert len(reported) == 2, out.doc
    assert 20 <= reported[0] < 21 and 80 <= reported[1] < 81, reported
