"""``mqadmin consumerStatus``, ``brokerConsumeStats`` and ``clusterList -m`` against RocketMQ 4.9.8's tools
(tools/src/main/java/org/apache/rocketmq/tools/command/**) and the texts they print
(common/src/main/java/org/apache/rocketmq/common/protocol/body/ConsumerRunningInfo.java), each run against the
threaded embedded cluster; each test failed on the code before.

The consumers here are remoting clients that heartbeat into the real broker and answer GET_CONSUMER_RUNNING_INFO with
the body a Java consumer sends (its ``statusTable`` of pull and consume rates, which a Java consumer fills)."""

from __future__ import annotations

import contextlib
import functools
import re
import time
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
import trio
from click.testing import CliRunner, Result

from client.mqadmin import main as mqadmin
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumerData, HeartbeatData, MessageQueue
from remoting.codec.bodies.admin import dumps_mq_map
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.processor import RequestContext
from tests.client.helpers import register_dead_broker
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.parametrize("anyio_backend", ["trio"])


def _run(*args: str) -> Result:
    return CliRunner().invoke(mqadmin, list(args))


def _human(ms: int) -> str:
    """UtilAll.timeMillisToHumanString: yyyyMMddHHmmssSSS in the local zone."""
    t = time.localtime(ms / 1000)
    return time.strftime("%Y%m%d%H%M%S", t) + f"{ms % 1000:03d}"


def _pq(**fields: Any) -> dict[str, Any]:
    base = {"commitOffset": 0, "cachedMsgMinOffset": 0, "cachedMsgMaxOffset": 0, "cachedMsgCount": 0,
            "cachedMsgSizeInMiB": 0, "transactionMsgMinOffset": 0, "transactionMsgMaxOffset": 0,
            "transactionMsgCount": 0, "locked": False, "tryUnlockTimes": 0, "lastLockTimestamp": 0, "droped": False,
            "lastPullTimestamp": 0, "lastConsumeTimestamp": 0}  # fmt: skip
    return {**base, **fields}


def _body(info: dict[str, Any], table: dict[MessageQueue, dict[str, Any]]) -> bytes:
    """A ConsumerRunningInfo as a Java consumer's fastjson writes it: mqTable keyed by MessageQueue objects."""
    return orjson.dumps(info)[:-1] + b',"mqTable":' + dumps_mq_map(table) + b"}"


class _JavaConsumer:
    """Answers GET_CONSUMER_RUNNING_INFO with ``body``."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def process(self, ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand | None:
        if cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            return cmd.response(ResponseCode.SUCCESS, body=self.body)
        return None


async def _heartbeat(client: RemotingClient, addr: str, client_id: str, group: str) -> None:
    beat = HeartbeatData(client_id, consumer_data_set=(ConsumerData(group),))
    assert (await client.invoke(addr, request(RequestCode.HEART_BEAT, body=beat.encode()), 5)).code == 0


def _sub(topic: str) -> dict[str, Any]:
    return {"topic": topic, "subString": "*", "classFilterMode": False, "tagsSet": [], "codeSet": [], "subVersion": 1,
            "expressionType": "TAG"}  # fmt: skip


def _status(pull_rt: float, pull_tps: float, rt: float, ok: float, failed: float, failed_msgs: int) -> dict[str, Any]:
    """A ConsumeStatus as Java's consumer sends it."""
    return {"pullRT": pull_rt, "pullTPS": pull_tps, "consumeRT": rt, "consumeOKTPS": ok, "consumeFailedTPS": failed,
            "consumeFailedMsgs": failed_msgs}  # fmt: skip


def _f(fmt: str, *args: Any) -> str:
    """Java's String.format for the conversions used here, whose Python spelling is the same."""
    return fmt % args


def _props(orderly: bool = False, started_ms: int = 1) -> dict[str, str]:
    return {"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", "PROP_CONSUMEORDERLY": str(orderly).lower(),
            "PROP_CONSUMER_START_TIMESTAMP": str(started_ms)}  # fmt: skip


# -- consumerStatus -i: ConsumerRunningInfo.formatString ------------------------------------------------------------


@pytest.mark.anyio
async def test_consumer_status_of_one_client_prints_javas_format_string_with_rt_and_tps(
    cluster: ThreadedCluster,
) -> None:
    """ConsumerStatusSubCommand -i prints ConsumerRunningInfo.formatString: the subscriptions in their TreeSet order
    (topic@subExpression), the offset and detail tables under headers whose #Topic column is 64 wide (the offset
    rows 32, the detail rows 64), each queue's ProcessQueueInfo.toString (its fields in declaration order, times as
    UtilAll.timeMillisToHumanString), and the ``#Consumer RT&TPS#`` table of the statusTable. Ours had no RT&TPS
    section, 32-wide headers and detail rows, sorted ProcessQueueInfo fields with raw times."""
    mq0, mq1 = MessageQueue("StatusRt", "broker-a", 0), MessageQueue("StatusRt", "broker-a", 1)
    stamp = 1_700_000_123_456
    table = {
        mq1: _pq(commitOffset=7, lastPullTimestamp=stamp),
        mq0: _pq(commitOffset=5, cachedMsgCount=2, cachedMsgSizeInMiB=1, locked=True, lastConsumeTimestamp=stamp),
    }
    info = {
        "properties": {"consumerGroup": "status-rt-cg"},
        "subscriptionSet": [_sub("StatusRt"), _sub("%RETRY%status-rt-cg")],
        "statusTable": {
            "StatusRt": _status(1.5, 2.25, 3.0, 4.5, 0.0, 7),
            "%RETRY%status-rt-cg": _status(0, 0, 0, 0, 0, 0),
        },
    }
    async with RemotingClient(request_handler=_JavaConsumer(_body(info, table))) as consumer:
        await _heartbeat(consumer, cluster.broker_addr, "10.0.0.7@java", "status-rt-cg")
        args = ("consumerStatus", "-n", cluster.namesrv_addr, "-g", "status-rt-cg", "-i", "10.0.0.7@java")
        result = await anyio.to_thread.run_sync(lambda: _run(*args))
    assert result.exit_code == 0, result.output

    def detail(offset: int, count: int, size: int, locked: str, consumed: int, pulled: int) -> str:
        return (f"ProcessQueueInfo [commitOffset={offset}, cachedMsgMinOffset=0, cachedMsgMaxOffset=0, "
                f"cachedMsgCount={count}, cachedMsgSizeInMiB={size}, transactionMsgMinOffset=0, "
                f"transactionMsgMaxOffset=0, transactionMsgCount=0, locked={locked}, tryUnlockTimes=0, "
                f"lastLockTimestamp={_human(0)}, droped=false, lastPullTimestamp={_human(pulled)}, "
                f"lastConsumeTimestamp={_human(consumed)}]")  # fmt: skip

    rt_header = ("#Topic", "#Pull RT", "#Pull TPS", "#Consume RT", "#ConsumeOK TPS", "#ConsumeFailed TPS",
                 "#ConsumeFailedMsgsInHour")  # fmt: skip
    rt_row = "%-32s  %14.2f %14.2f %14.2f %14.2f %18.2f %25d\n"
    expected = "".join(
        [
            "\n\n#Consumer Subscription#\n",
            _f("%03d Topic: %-40s ClassFilter: %-8s SubExpression: %s\n", 1, "%RETRY%status-rt-cg", "false", "*"),
            _f("%03d Topic: %-40s ClassFilter: %-8s SubExpression: %s\n", 2, "StatusRt", "false", "*"),
            "\n\n#Consumer Offset#\n",
            _f("%-64s  %-32s  %-4s  %-20s\n", "#Topic", "#Broker Name", "#QID", "#Consumer Offset"),
            _f("%-32s  %-32s  %-4d  %-20d\n", "StatusRt", "broker-a", 0, 5),
            _f("%-32s  %-32s  %-4d  %-20d\n", "StatusRt", "broker-a", 1, 7),
            "\n\n#Consumer MQ Detail#\n",
            _f("%-64s  %-32s  %-4s  %-20s\n", "#Topic", "#Broker Name", "#QID", "#ProcessQueueInfo"),
            _f("%-64s  %-32s  %-4d  %s\n", "StatusRt", "broker-a", 0, detail(5, 2, 1, "true", stamp, 0)),
            _f("%-64s  %-32s  %-4d  %s\n", "StatusRt", "broker-a", 1, detail(7, 0, 0, "false", 0, stamp)),
            "\n\n#Consumer RT&TPS#\n",
            _f("%-64s  %14s %14s %14s %14s %18s %25s\n", *rt_header),
            _f(rt_row, "%RETRY%status-rt-cg", 0, 0, 0, 0, 0, 0),
            _f(rt_row, "StatusRt", 1.5, 2.25, 3.0, 4.5, 0.0, 7),
        ]
    )
    assert result.output.startswith(_f("#Consumer Properties#\n%-40s: %s\n", "consumerGroup", "status-rt-cg"))
    assert result.output[result.output.index("\n\n#Consumer Subscription#") :] == expected


# -- consumerStatus: ConsumerRunningInfo.analyzeProcessQueue --------------------------------------------------------


@pytest.mark.anyio
async def test_consumer_status_reports_blocked_and_unlocked_queues_as_java_analyzes_them(
    cluster: ThreadedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After ``Rebalance OK`` ConsumerStatusSubCommand prints ConsumerRunningInfo.analyzeProcessQueue for each client
    of a push group: a concurrent consumer's queue holding messages and not consumed for over a minute is "can't
    consume for a while, maybe blocked"; an orderly consumer's unlocked queue "can't lock for a while", a dropped
    locked one that failed to unlock "unlock N times, still failed". Ours printed none of them."""
    monkeypatch.chdir(tmp_path)  # consumerStatus writes <now>/<clientId> files, as Java's
    now = int(time.time() * 1000)
    blocked, fresh = MessageQueue("StatusPq", "broker-a", 0), MessageQueue("StatusPq", "broker-a", 1)
    concurrent = {
        blocked: _pq(cachedMsgCount=3, lastConsumeTimestamp=now - 600_000),
        fresh: _pq(cachedMsgCount=3, lastConsumeTimestamp=now + 600_000),
    }
    orderly = {blocked: _pq(locked=False, lastLockTimestamp=now - 600_000),
               fresh: _pq(locked=True, droped=True, tryUnlockTimes=2)}  # fmt: skip
    outputs = []
    for group, client_id, is_orderly, table in (
        ("status-pq-cg", "10.0.0.8@java", False, concurrent),
        ("status-pq-orderly-cg", "10.0.0.9@java", True, orderly),
    ):
        info = {"properties": _props(is_orderly), "subscriptionSet": [_sub("StatusPq")], "statusTable": {}}
        async with RemotingClient(request_handler=_JavaConsumer(_body(info, table))) as consumer:
            await _heartbeat(consumer, cluster.broker_addr, client_id, group)
            args = ("consumerStatus", "-n", cluster.namesrv_addr, "-g", group)
            result = await anyio.to_thread.run_sync(lambda args=args: _run(*args))
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    mq = "MessageQueue [topic=StatusPq, brokerName=broker-a, queueId=%d]"
    waits = re.findall(rf"^10\.0\.0\.8@java {re.escape(mq % 0)} can't consume for a while, maybe blocked, (\d+)ms$",
                       outputs[0], re.M)  # fmt: skip
    assert len(waits) == 1 and int(waits[0]) >= 600_000, outputs[0]
    assert "queueId=1" not in outputs[0], outputs[0]
    assert outputs[0].index("Rebalance OK") < outputs[0].index("can't consume")
    locks = re.findall(rf"^10\.0\.0\.9@java {re.escape(mq % 0)} can't lock for a while, (\d+)ms$", outputs[1], re.M)
    assert len(locks) == 1 and int(locks[0]) >= 600_000, outputs[1]
    assert f"10.0.0.9@java {mq % 1} unlock 2 times, still failed\n" in outputs[1], outputs[1]


# -- brokerConsumeStats -t: the request's timeout -------------------------------------------------------------------


class _SlowLink:
    """Forwards TCP connections to ``target``, holding each chunk of the answers back ``delay`` seconds (a broker
    busy collecting thousands of groups' stats, a slow network)."""

    def __init__(self, target: str, delay: float) -> None:
        host, _, port = target.rpartition(":")
        self.target = (host, int(port))
        self.delay = delay

    async def start(self, nursery: trio.Nursery) -> str:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, self._serve, 0, host="127.0.0.1"))
        return f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"

    async def _serve(self, client: trio.SocketStream) -> None:
        upstream = await trio.open_tcp_stream(*self.target)
        async with upstream, trio.open_nursery() as nursery:
            nursery.start_soon(self._pump, client, upstream, 0.0)
            nursery.start_soon(self._pump, upstream, client, self.delay)

    async def _pump(self, source: trio.SocketStream, sink: trio.SocketStream, delay: float) -> None:
        try:
            while data := await source.receive_some():
                await trio.sleep(delay)
                await sink.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        await sink.aclose()


@pytest.mark.anyio
async def test_broker_consume_stats_waits_as_long_as_its_timeout_option_says(cluster: ThreadedCluster) -> None:
    """BrokerConsumeStatsSubCommad passes ``-t`` (default 50000 ms) to fetchConsumeStatsInBroker as the request's
    timeout: a broker answering after 4 s is waited for by default and given up on with ``-t 200``. Ours ignored
    ``-t`` and waited the client's 3 s rpc timeout, failing the default and succeeding with ``-t 200``."""
    ns = cluster.namesrv_addr
    async with trio.open_nursery() as nursery:
        slow = await _SlowLink(cluster.broker_addr, 4.0).start(nursery)
        waited = await anyio.to_thread.run_sync(lambda: _run("brokerConsumeStats", "-n", ns, "-b", slow))
        short = await anyio.to_thread.run_sync(lambda: _run("brokerConsumeStats", "-n", ns, "-b", slow, "-t", "200"))
        nursery.cancel_scope.cancel()
    assert waited.exit_code == 0, waited.output
    assert "Diff Total: 0" in waited.output
    assert short.exit_code == 1, short.output
    assert "Diff Total" not in short.output


# -- clusterList: the clusters in ClusterInfo's HashMap order -------------------------------------------------------


@pytest.mark.anyio
async def test_cluster_list_goes_over_the_clusters_in_java_s_hash_map_order(cluster: ThreadedCluster) -> None:
    """ClusterListSubCommand (base and ``-m``) iterates ``ClusterInfo.clusterAddrTable``, a ``HashMap`` fastjson fills
    (common/src/main/java/org/apache/rocketmq/common/protocol/body/ClusterInfo.java): the clusters come in its bucket
    order, ACluster, ZCluster, DefaultCluster here (as ``java.util.HashMap`` lists them), whatever order the name
    server wrote them in. Ours listed them in the name server's order."""
    for name, cluster_name in (("broker-z", "ZCluster"), ("broker-x", "ACluster")):
        await anyio.to_thread.run_sync(
            lambda n=name, c=cluster_name: register_dead_broker(cluster, name=n, addr="127.0.0.1:1", cluster=c)
        )
    for more in ((), ("-m",)):
        args = ("clusterList", "-n", cluster.namesrv_addr, *more)
        result = await anyio.to_thread.run_sync(lambda args=args: _run(*args))
        assert result.exit_code == 0, result.output
        clusters = [line.split()[0] for line in result.stdout.splitlines()[1:] if line.strip()]
        assert clusters == ["ACluster", "ZCluster", "DefaultCluster"], result.stdout


@pytest.mark.anyio
async def test_cluster_rt_goes_over_the_clusters_and_brokers_in_java_s_hash_order(cluster: ThreadedCluster) -> None:
    """CLusterSendMsgRTCommand (tools/src/main/java/org/apache/rocketmq/tools/command/cluster/
    CLusterSendMsgRTCommand.java) probes the clusters of ``ClusterInfo.clusterAddrTable.keySet()`` (a ``HashMap``)
    and each cluster's broker names as its ``Set``, which fastjson fills as a ``HashSet``: ACluster, ZCluster,
    DefaultCluster, and in DefaultCluster broker-b before broker-a (as ``java.util.HashSet`` lists them). Ours went
    over the clusters in the name server's order and sorted each cluster's broker names, as clusterList's
    ``TreeSet`` does (clusterList's order was fixed, clusterRT's not)."""
    for name, cluster_name in (("broker-b", "DefaultCluster"), ("broker-z", "ZCluster"), ("broker-x", "ACluster")):
        await anyio.to_thread.run_sync(
            lambda n=name, c=cluster_name: register_dead_broker(
                cluster, name=n, addr="127.0.0.1:1", topics=(n,), cluster=c
            )
        )
    args = ("clusterRT", "-n", cluster.namesrv_addr, "-a", "1", "--rounds", "1")
    result = await anyio.to_thread.run_sync(lambda: _run(*args))
    assert result.exit_code == 0, result.output
    rows = [line.split()[:2] for line in result.stdout.splitlines()[1:] if line.strip()]
    assert rows == [
        ["ACluster", "broker-x"],
        ["ZCluster", "broker-z"],
        ["DefaultCluster", "broker-b"],
        ["DefaultCluster", "broker-a"],
    ], result.stdout


# -- consumerStatus without -i: analyzeSubscription and analyzeRebalance ---------------------------------------------


async def _group_status(
    cluster: ThreadedCluster, group: str, clients: list[tuple[str, dict[str, Any], dict[MessageQueue, Any]]]
) -> Result:
    """``consumerStatus -g group`` while each of ``clients`` (client id, running info, mqTable) is online."""
    async with contextlib.AsyncExitStack() as stack:
        for client_id, info, table in clients:
            answering = RemotingClient(request_handler=_JavaConsumer(_body(info, table)))
            consumer = await stack.enter_async_context(answering)
            await _heartbeat(consumer, cluster.broker_addr, client_id, group)
        args = ("consumerStatus", "-n", cluster.namesrv_addr, "-g", group)
        return await anyio.to_thread.run_sync(lambda: _run(*args))


@pytest.mark.anyio
async def test_consumer_status_answers_rebalance_ok_when_two_clients_hold_one_queue(
    cluster: ThreadedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ConsumerRunningInfo.analyzeRebalance answers true whatever the clients hold, so ConsumerStatusSubCommand
    prints "Rebalance OK" once the subscriptions are the same (common/src/main/java/org/apache/rocketmq/common/
    protocol/body/ConsumerRunningInfo.java). Ours printed "Rebalance Failed" for a queue held by two clients."""
    monkeypatch.chdir(tmp_path)
    mq = MessageQueue("StatusShared", "broker-a", 0)
    info = {"properties": _props(), "subscriptionSet": [_sub("StatusShared")], "statusTable": {}}
    result = await _group_status(
        cluster, "status-shared-cg", [("10.0.0.21@a", info, {mq: _pq()}), ("10.0.0.22@b", info, {mq: _pq()})]
    )
    assert result.exit_code == 0, result.output
    assert "\n\nSame subscription in the same group of consumer\n\nRebalance OK\n" in result.stdout, result.stdout


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("kind", "started_ms"),
    [("CONSUME_PASSIVELY", "now"), ("CONSUME_ACTIVELY", "long ago")],
    ids=["push-started-lately", "pull"],
)
async def test_consumer_status_compares_subscriptions_only_of_a_push_group_up_for_two_minutes(
    cluster: ThreadedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, started_ms: str
) -> None:
    """ConsumerRunningInfo.analyzeSubscription compares the clients' subscriptions only when the first client (by
    client id) is a push consumer (CONSUME_PASSIVELY) started more than 2 minutes ago; a pull group, or a push group
    that started lately, is "Same subscription" whatever its clients subscribe. Ours always compared and warned."""
    monkeypatch.chdir(tmp_path)
    started = int(time.time() * 1000) if started_ms == "now" else 1
    props = {**_props(started_ms=started), "PROP_CONSUME_TYPE": kind}
    first = {"properties": props, "subscriptionSet": [_sub("StatusSubA")], "statusTable": {}}
    second = {"properties": props, "subscriptionSet": [_sub("StatusSubB")], "statusTable": {}}
    result = await _group_status(cluster, "status-sub-cg", [("10.0.0.31@a", first, {}), ("10.0.0.32@b", second, {})])
    assert result.exit_code == 0, result.output
    assert "Different subscription" not in result.stdout, result.stdout
    assert "\n\nSame subscription in the same group of consumer\n\nRebalance OK\n" in result.stdout, result.stdout


@pytest.mark.anyio
async def test_consumer_status_warns_on_a_push_group_with_no_subscription(
    cluster: ThreadedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For a push group up for over 2 minutes, ConsumerRunningInfo.analyzeSubscription answers false when the last
    client's subscription set is empty, so ConsumerStatusSubCommand prints "WARN: Different subscription in the same
    group of consumer!!!". Ours said "Same subscription" and "Rebalance OK"."""
    monkeypatch.chdir(tmp_path)
    info = {"properties": _props(started_ms=1), "subscriptionSet": [], "statusTable": {}}
    result = await _group_status(cluster, "status-empty-cg", [("10.0.0.41@a", info, {}), ("10.0.0.42@b", info, {})])
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("\n\nWARN: Different subscription in the same group of consumer!!!"), result.stdout


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("first", "second", "same_said"),
    [
        ({"PROP_CONSUMER_START_TIMESTAMP": "1"}, None, False),
        ({"PROP_CONSUME_TYPE": "PUSH", "PROP_CONSUMER_START_TIMESTAMP": "1"}, None, False),
        ({"PROP_CONSUME_TYPE": "CONSUME_ACTIVELY"}, None, False),
        ({"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", "PROP_CONSUMER_START_TIMESTAMP": "soon"}, None, False),
        (_props(started_ms=1), {"PROP_CONSUMER_START_TIMESTAMP": "1"}, True),
    ],
    ids=["no-consume-type", "unknown-consume-type", "no-start-timestamp", "bad-start-timestamp", "later-no-type"],
)
async def test_consumer_status_fails_as_java_on_running_info_it_cannot_analyze(
    cluster: ThreadedCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    first: dict[str, str],
    second: dict[str, str] | None,
    same_said: bool,
) -> None:
    """ConsumerRunningInfo.analyzeSubscription reads the first client's PROP_CONSUME_TYPE as
    ``ConsumeType.valueOf(property)`` (a NullPointerException when it is missing, IllegalArgumentException when it
    is no ConsumeType) and its PROP_CONSUMER_START_TIMESTAMP with ``Long.parseLong`` (``"null"`` when missing:
    NumberFormatException), whatever the type; analyzeProcessQueue reads each client's type the same way. Either
    failure leaves ConsumerStatusSubCommand's try: "ConsumerStatusSubCommand command failed" after the rows
    (common/src/main/java/org/apache/rocketmq/common/protocol/body/ConsumerRunningInfo.java). Ours took such a
    client for a pull consumer and said "Same subscription" and "Rebalance OK"."""
    monkeypatch.chdir(tmp_path)
    clients = [("10.0.0.51@a", {"properties": first, "subscriptionSet": [_sub("StatusOdd")], "statusTable": {}}, {})]
    if second is not None:
        clients.append(("10.0.0.52@b", {"properties": second, "subscriptionSet": [_sub("StatusOdd")]}, {}))
    result = await _group_status(cluster, "status-odd-cg", clients)
    assert result.exit_code == 1, result.output
    assert "ConsumerStatusSubCommand command failed" in result.stderr, result.stderr
    assert [line.split()[1] for line in result.stdout.splitlines()[1:3]] == [c[0] for c in clients], result.stdout
    assert ("Same subscription in the same group of consumer" in result.stdout) == same_said, result.stdout
    assert "Different subscription" not in result.stdout, result.stdout


@pytest.mark.anyio
async def test_consumer_status_of_one_client_lists_its_properties_in_java_s_properties_order(
    cluster: ThreadedCluster,
) -> None:
    """ConsumerRunningInfo.formatString's ``#Consumer Properties#`` walks ``this.properties.entrySet()``: the
    ``Properties`` fastjson fills from the body's keys in their order, on Java 8 a ``Hashtable`` (the order below
    is what jshell printed for ``java.util.Hashtable`` filled so). Ours printed the keys sorted."""
    keys = ["consumerGroup", "messageModel", "consumeFromWhere", "consumeThreadMin", "consumeThreadMax",
            "pullBatchSize", "consumeMessageBatchMaxSize", "maxReconsumeTimes", "PROP_NAMESERVER_ADDR",
            "PROP_THREADPOOL_CORE_SIZE", "PROP_CONSUMEORDERLY", "PROP_CONSUME_TYPE", "PROP_CLIENT_VERSION",
            "PROP_CONSUMER_START_TIMESTAMP"]  # fmt: skip
    java_order = ["PROP_CONSUMER_START_TIMESTAMP", "maxReconsumeTimes", "consumeMessageBatchMaxSize",
                  "PROP_THREADPOOL_CORE_SIZE", "PROP_CLIENT_VERSION", "PROP_CONSUMEORDERLY", "consumeThreadMin",
                  "PROP_NAMESERVER_ADDR", "messageModel", "PROP_CONSUME_TYPE", "pullBatchSize", "consumerGroup",
                  "consumeFromWhere", "consumeThreadMax"]  # fmt: skip
    info = {"properties": {k: f"v{i}" for i, k in enumerate(keys)}, "subscriptionSet": [], "statusTable": {}}
    async with RemotingClient(request_handler=_JavaConsumer(_body(info, {}))) as consumer:
        await _heartbeat(consumer, cluster.broker_addr, "10.0.0.61@java", "status-props-cg")
        args = ("consumerStatus", "-n", cluster.namesrv_addr, "-g", "status-props-cg", "-i", "10.0.0.61@java")
        result = await anyio.to_thread.run_sync(lambda: _run(*args))
    assert result.exit_code == 0, result.output
    section = result.stdout.split("#Consumer Properties#\n", 1)[1].split("\n\n", 1)[0]
    assert section.splitlines() == [_f("%-40s: %s", k, f"v{keys.index(k)}") for k in java_order], result.stdout


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("started", "read"),
    [("\uff11", True), ("+\u0967\u0968", True), ("\U0001d7cf", False), ("\u00b9", False)],
    ids=["fullwidth-one", "devanagari-plus-twelve", "supplementary-digit", "superscript-one"],
)
async def test_consumer_status_reads_a_start_timestamp_of_unicode_digits_as_long_parse_long(
    cluster: ThreadedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, started: str, read: bool
) -> None:
    """ConsumerRunningInfo.analyzeSubscription reads PROP_CONSUMER_START_TIMESTAMP with ``Long.parseLong``, whose
    ``Character.digit`` takes any decimal digit of a UTF-16 unit, not only ASCII ones (java/lang/Long.java): a
    fullwidth one or a plus and Devanagari twelve are 1 and 12, long ago, so the subscriptions are compared; a
    digit outside the BMP (two surrogates) or a superscript is a NumberFormatException, the command failing
    (common/src/main/java/org/apache/rocketmq/common/protocol/body/ConsumerRunningInfo.java). Ours failed on any
    non-ASCII digit."""
    monkeypatch.chdir(tmp_path)
    props = {"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", "PROP_CONSUMER_START_TIMESTAMP": started}
    info = {"properties": props, "subscriptionSet": [_sub("StatusDigits")], "statusTable": {}}
    result = await _group_status(cluster, "status-digits-cg", [("10.0.0.71@a", info, {})])
    assert result.exit_code == (0 if read else 1), result.output
    assert ("Same subscription in the same group of consumer" in result.stdout) == read, result.stdout
    assert ("ConsumerStatusSubCommand command failed" in result.stderr) == (not read), result.stderr
