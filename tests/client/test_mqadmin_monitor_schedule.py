"""``mqadmin startMonitoring``'s schedule against RocketMQ 4.9.8's ``MonitorService.startScheduleTask``
(tools/src/main/java/org/apache/rocketmq/tools/monitor/MonitorService.java), under virtual time: the real monitor
loop with a real Admin against the embedded cluster, a consumer group online with offsets to report, or against a
name server whose answers are malformed."""

from __future__ import annotations

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client import mqadmin_groups
from client.admin import Admin
from client.mqadmin_support import Output
from remoting.client import RemotingClient
from remoting.codec.bodies import (
    BrokerData,
    ConsumerData,
    HeartbeatData,
    MessageQueue,
    QueueData,
    SubscriptionData,
    TopicList,
    TopicRouteData,
)
from remoting.codec.bodies.admin import ConsumerConnection, ConsumeStats, OffsetWrapper
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.dispatch import Dispatcher, ProcessorPool, RequestContext
from remoting.server import RemotingServer


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


class MalformedCluster:
    """A name server and broker in one: routes of every topic to itself as broker ``b``, a group with a consumed
    queue of ``MonBad`` online, and GET_MAX_OFFSET answers whose ``offset`` is no number (a malformed answer)."""

    def __init__(self) -> None:
        self.addr = ""  # set once it listens

    async def process(self, ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand | None:
        if cmd.code == RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER:
            return cmd.response(ResponseCode.SUCCESS, body=TopicList(["MonBad", "%RETRY%mon-bad"]).encode())
        if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            route = TopicRouteData([QueueData("b", 1, 1, 6)], [BrokerData("c", "b", {0: self.addr})])
            return cmd.response(ResponseCode.SUCCESS, body=route.encode())
        if cmd.code == RequestCode.GET_CONSUME_STATS:
            stats = ConsumeStats({MessageQueue("MonBad", "b", 0): OffsetWrapper(7, 2, 1_000)})
            return cmd.response(ResponseCode.SUCCESS, body=stats.encode())
        if cmd.code == RequestCode.GET_CONSUMER_CONNECTION_LIST:
            return cmd.response(ResponseCode.SUCCESS, body=ConsumerConnection().encode())
        if cmd.code == RequestCode.GET_MAX_OFFSET:
            return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": "x"})
        return cmd.response(ResponseCode.SYSTEM_ERROR, remark="not here")


async def test_a_malformed_answer_in_a_monitor_round_does_not_end_the_monitor(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """MonitorService catches every Exception: of a queue's delay read in ``computeUndoneMsgs`` (the delay stays 0),
    of a group's report in ``doMonitorWork``, of the round in the scheduled task ("doMonitorWork Exception"), and the
    next round runs (tools/src/main/java/org/apache/rocketmq/tools/monitor/MonitorService.java; a GET_MAX_OFFSET
    answer whose offset is no number: a NumberFormatException there). Ours caught only the broker failures: the
    ValueError ended the monitor in its first round."""
    cluster, dispatcher = MalformedCluster(), Dispatcher()
    dispatcher.set_default(cluster, ProcessorPool("malformed", 4, 100))
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(RemotingServer(dispatcher).serve, "127.0.0.1", 0)
        cluster.addr = f"{host}:{port}"
        out = TimedOutput()
        async with Admin(f"{host}:{port}") as admin:
            start = trio.current_time()
            await mqadmin_groups.monitor(admin, out, rounds=2)
        nursery.cancel_scope.cancel()
    assert [round(at - start) for at in out.times] == [20, 80], out.doc
    assert all("undoneMsgsTotal=5" in text and "undoneMsgsDelayTimeMills=0" in text for text in out.doc["lines"])
