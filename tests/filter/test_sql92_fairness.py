"""One client's heavy SQL92 expression must not starve the others (RocketMQ parses it on one of its pull or heartbeat
threads, so a huge expression costs one thread, not the broker). Real sockets on 127.0.0.1 against the embedded
broker, run in this process: a second client's pulls keep being answered while a 10,000-term expression compiles."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from broker.embedded import EmbeddedCluster
from processors.filter import Sql92Filter
from processors.filter import cache as filter_cache
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumerData, HeartbeatData, SubscriptionData
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.message import MessageRecord, iter_records
from tests.broker.helpers import create_topic_request
from tests.conftest import SMALL_STORE
from tests.processors.conftest import pull_request

TOPIC = "Sql92Fair"
SUBSCRIPTION_ONLY = 0x4  # the request carries its subscription; no long polling


def heavy_expression(terms: int, salt: str) -> str:
    """A legal OR chain of ``terms`` comparisons (about 19 bytes a term), unique per ``salt`` so nothing memoised."""
    return " OR ".join(f"p{i} = '{salt}{i}'" for i in range(terms))


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[EmbeddedCluster]:
    async with EmbeddedCluster(tmp_path / "cluster", enable_property_filter=True, **SMALL_STORE) as cluster:
        async with RemotingClient() as admin:
            created = await admin.invoke(cluster.broker_addr, create_topic_request(TOPIC, 1), 5)
            assert created.code == ResponseCode.SUCCESS
        yield cluster


@pytest.fixture
async def grpc_cluster(tmp_path: Path) -> AsyncIterator[EmbeddedCluster]:
    """The same with the RocketMQ 5 proxy serving gRPC."""
    from proxy.config import ProxyConfig

    proxy = ProxyConfig(enable_proxy=True, grpc_server_port=0)
    async with EmbeddedCluster(tmp_path / "grpc", proxy=proxy, enable_property_filter=True, **SMALL_STORE) as cluster:
        async with RemotingClient() as admin:
            created = await admin.invoke(cluster.broker_addr, create_topic_request(TOPIC, 1), 5)
            assert created.code == ResponseCode.SUCCESS
        yield cluster


def append_backlog(cluster: EmbeddedCluster, skipped: int, prefix: str, wanted: str) -> None:
    """``skipped`` messages with property ``a`` = ``<prefix><i>``, then b"wanted" with ``a`` = ``wanted``."""
    broker = cluster.controller.context
    host = broker.store_host
    for i in range(skipped):
        body, props = f"skip-{i}".encode(), f"a\x01{prefix}{i}"
        broker.store.append(MessageRecord(TOPIC, body, 0, properties=props, store_host=host))
    broker.store.append(MessageRecord(TOPIC, b"wanted", 0, properties=f"a\x01{wanted}", store_host=host))


async def test_other_clients_are_answered_while_a_huge_sql92_expression_compiles(cluster: EmbeddedCluster) -> None:
    addr = cluster.broker_addr
    expression = heavy_expression(10_000, "fair")
    heavy_done = trio.Event()
    answered_while_compiling = 0

    async def heavy() -> None:
        async with RemotingClient() as client:
            pull = pull_request(TOPIC, sys_flag=SUBSCRIPTION_ONLY, subscription=expression, expressionType="SQL92")
            response = await client.invoke(addr, pull, 120)
        assert response.code == ResponseCode.PULL_NOT_FOUND, response.remark
        heavy_done.set()

    async def light() -> None:
        nonlocal answered_while_compiling
        async with RemotingClient() as client:
            await client.invoke(addr, pull_request(TOPIC, sys_flag=SUBSCRIPTION_ONLY), 5)  # connected before
            with trio.fail_after(60):  # a hang guard, not a threshold
                while not filter_cache.compiling():
                    await trio.sleep(0.001)
            while filter_cache.compiling() and not heavy_done.is_set():
                response = await client.invoke(addr, pull_request(TOPIC, sys_flag=SUBSCRIPTION_ONLY), 5)
                assert response.code == ResponseCode.PULL_NOT_FOUND
                if filter_cache.compiling():  # answered while the heavy expression was still being compiled
                    answered_while_compiling += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(heavy)
        nursery.start_soon(light)
    assert answered_while_compiling >= 3


async def test_other_clients_are_answered_while_a_remoting_pop_compiles_a_huge_sql92_expression(
    cluster: EmbeddedCluster,
) -> None:
    """POP_MESSAGE brings its expression in its header, as a pull does: RocketMQ 5.3.3's PopMessageProcessor parses
    it on its pop thread (ConsumerFilterManager.build), so a 10,000-term one costs one thread. Here it compiled on
    the event loop, holding every client until it was done."""
    addr = cluster.broker_addr
    expression = heavy_expression(10_000, "pop")
    heavy_done = trio.Event()
    answered_while_compiling = 0

    async def heavy() -> None:
        fields = {"consumerGroup": "GPopFair", "topic": TOPIC, "queueId": "-1", "maxMsgNums": "1",
                  "invisibleTime": "30000", "pollTime": "0", "bornTime": "0", "initMode": "0", "expType": "SQL92",
                  "exp": expression}  # fmt: skip
        async with RemotingClient() as client:
            response = await client.invoke(addr, request(RequestCode.POP_MESSAGE, fields), 120)
        assert response.code == ResponseCode.POLLING_TIMEOUT, response.remark
        heavy_done.set()

    async def light() -> None:
        nonlocal answered_while_compiling
        async with RemotingClient() as client:
            await client.invoke(addr, pull_request(TOPIC, sys_flag=SUBSCRIPTION_ONLY), 5)  # connected before
            while not filter_cache.compiling() and not heavy_done.is_set():
                await trio.sleep(0.001)
            while filter_cache.compiling() and not heavy_done.is_set():
                response = await client.invoke(addr, pull_request(TOPIC, sys_flag=SUBSCRIPTION_ONLY), 5)
                assert response.code == ResponseCode.PULL_NOT_FOUND
                if filter_cache.compiling():  # answered while the heavy expression was still being compiled
                    answered_while_compiling += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(heavy)
        nursery.start_soon(light)
    assert answered_while_compiling >= 3


async def test_other_clients_are_answered_while_a_retry_pull_compiles_its_groups_huge_sql92(tmp_path: Path) -> None:
    """With ``filterSupportRetry`` a pull of ``%RETRY%<group>`` matches each message against the group's SQL92
    subscription of its origin topic (ExpressionForRetryMessageFilter), whose expression RocketMQ compiled once, at
    the heartbeat (ConsumerFilterManager.register), on the heartbeat thread. Here the retry pull compiled a
    subscription it did not find memoised (property filtering off, so the heartbeat compiled nothing; or other
    clients' long expressions pushed it out) on the event loop, holding every client until it was done."""
    group = "GRetryFair"
    retry = f"%RETRY%{group}"
    expression = heavy_expression(10_000, "retry")
    subscriptions = (
        SubscriptionData(TOPIC, expression, sub_version=1, expression_type="SQL92"),
        SubscriptionData(retry, "*", sub_version=1),
    )
    consumer = ConsumerData(group, subscription_data_set=subscriptions)
    beat = HeartbeatData("10.0.0.9@retry", consumer_data_set=(consumer,))
    heavy_done = trio.Event()
    answered_while_compiling = 0
    async with EmbeddedCluster(tmp_path / "retry", filter_support_retry=True, **SMALL_STORE) as cluster:
        addr = cluster.broker_addr
        async with RemotingClient() as admin:
            created = await admin.invoke(addr, create_topic_request(TOPIC, 1), 5)
            assert created.code == ResponseCode.SUCCESS

        async def heavy() -> None:
            async with RemotingClient() as client:  # one connection: the pull finds the heartbeat's subscriptions
                registered = await client.invoke(addr, request(RequestCode.HEART_BEAT, body=beat.encode()), 30)
                assert registered.code == ResponseCode.SUCCESS, registered.remark
                pull = pull_request(retry, sys_flag=0, subscription=None, group=group)
                response = await client.invoke(addr, pull, 120)
            assert response.code == ResponseCode.PULL_NOT_FOUND, response.remark
            heavy_done.set()

        async def light() -> None:
            nonlocal answered_while_compiling
            async with RemotingClient() as client:
                await client.invoke(addr, pull_request(TOPIC, sys_flag=SUBSCRIPTION_ONLY), 5)  # connected before
                while not filter_cache.compiling() and not heavy_done.is_set():
                    await trio.sleep(0.001)
                while filter_cache.compiling() and not heavy_done.is_set():
                    response = await client.invoke(addr, pull_request(TOPIC, sys_flag=SUBSCRIPTION_ONLY), 5)
                    assert response.code == ResponseCode.PULL_NOT_FOUND
                    if filter_cache.compiling():  # answered while the heavy expression was still being compiled
                        answered_while_compiling += 1

        async with trio.open_nursery() as nursery:
            nursery.start_soon(heavy)
            nursery.start_soon(light)
    assert answered_while_compiling >= 3


async def test_one_pull_evaluates_a_heavy_sql92_filter_on_a_bounded_number_of_entries(cluster: EmbeddedCluster) -> None:
    """Evaluating costs (terms x entries scanned) on the event loop: a 2,000-term filter over 800 messages it refuses
    held every client for the whole scan. One pull now evaluates it on as many entries as a bounded budget allows,
    answering NO_MATCHED_MESSAGE with the offset to go on from, so the consumer reaches the match by pulling on."""
    store = cluster.controller.context.store
    host = cluster.controller.context.store_host
    for i in range(800):
        store.append(MessageRecord(TOPIC, f"skip-{i}".encode(), 0, properties=f"a\x01v{i}", store_host=host))
    store.append(MessageRecord(TOPIC, b"wanted", 0, properties="a\x01x1999", store_host=host))
    expression = " OR ".join(f"a = 'x{i}'" for i in range(2000))
    offsets = [0]
    async with RemotingClient() as client:
        while True:
            pull = pull_request(
                TOPIC, sys_flag=SUBSCRIPTION_ONLY, subscription=expression, expressionType="SQL92", offset=offsets[-1]
            )
            response = await client.invoke(cluster.broker_addr, pull, 30)
            offsets.append(int(response.ext_fields["nextBeginOffset"]))
            if response.code == ResponseCode.SUCCESS:
                break
            assert (response.code, response.remark) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")
            assert offsets[-1] > offsets[-2]  # every pull makes progress
    assert [m.body for m in iter_records(response.body)] == [b"wanted"]
    assert offsets[-1] == 801
    assert len(offsets) > 3  # the 800 refused entries took several pulls, not one


async def test_other_clients_are_answered_while_a_grpc_receive_compiles_a_huge_sql92_filter(tmp_path: Path) -> None:
    """The RocketMQ 5 receive path: a SimpleConsumer's 10,000-term SQL92 filter is compiled off the event loop too
    (RocketMQ's proxy parses it on a gRPC executor thread), so a remoting client's pulls keep being answered."""
    from proxy.config import ProxyConfig
    from tests.proxy.official import start_consumer

    proxy = ProxyConfig(enable_proxy=True, grpc_server_port=0)
    async with EmbeddedCluster(tmp_path / "grpc", proxy=proxy, enable_property_filter=True, **SMALL_STORE) as cluster:
        addr = cluster.broker_addr
        async with RemotingClient() as client:
            assert (await client.invoke(addr, create_topic_request(TOPIC, 1), 5)).code == ResponseCode.SUCCESS
            expression = heavy_expression(10_000, "grpc")
            received: list[object] = []

            def receive() -> None:
                # a long wait: the compile may take seconds of the client's deadline on a loaded machine
                consumer = start_consumer(cluster.grpc_endpoints[0], "G-fair", TOPIC, expression, 20, sql=True)
                try:
                    received.extend(m.body for m in consumer.receive(1, 30))
                finally:
                    consumer.shutdown()

            answered_while_compiling = 0
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.to_thread.run_sync, receive)
                with trio.fail_after(60):  # a hang guard, not a threshold
                    while not filter_cache.compiling():
                        await trio.sleep(0.001)
                while filter_cache.compiling():
                    response = await client.invoke(addr, pull_request(TOPIC, sys_flag=SUBSCRIPTION_ONLY), 5)
                    assert response.code == ResponseCode.PULL_NOT_FOUND
                    if filter_cache.compiling():
                        answered_while_compiling += 1
                broker = cluster.controller.context  # a match ends the receive's wait
                broker.store.append(
                    MessageRecord(TOPIC, b"wanted", 0, properties="p0\x01grpc0", store_host=broker.store_host)
                )
            assert received == [b"wanted"]
            assert answered_while_compiling >= 3


async def test_a_grpc_receive_reads_on_through_a_refused_backlog_at_once(grpc_cluster: EmbeddedCluster) -> None:
    """A pop reads at most so many entries; when its SQL92 filter refused them all and the queue holds more, RocketMQ
    5's PopMessageProcessor wakes the parked pop at once (``restNum > 0``: notifyMessageArriving) instead of letting
    it wait for a new message. So one receive reaches the match behind 8,000 refused messages (ten reads)."""
    assert await receive_behind_a_refused_backlog(grpc_cluster, "G-backlog") == [b"wanted"]


async def receive_behind_a_refused_backlog(cluster: EmbeddedCluster, group: str) -> list[bytes]:
    """What one receive of ``group`` filtering ``a = 'match'`` gets behind 8,000 messages it refuses."""
    from tests.proxy.official import start_consumer

    append_backlog(cluster, 8000, "", "match")

    def receive_once() -> list[bytes]:
        consumer = start_consumer(cluster.grpc_endpoints[0], group, TOPIC, "a = 'match'", sql=True)
        try:
            return [m.body for m in consumer.receive(1, 30)]
        finally:
            consumer.shutdown()

    return await trio.to_thread.run_sync(receive_once)


async def test_one_pop_evaluates_a_heavy_sql92_filter_on_a_bounded_number_of_entries(
    grpc_cluster: EmbeddedCluster,
) -> None:
    """The pop path bounds its evaluation as the pull path does: a receive whose 2,000-term filter refuses 240
    messages reads them a few at a time (its group's offset seen moving on in many steps, the loop free between
    them) and still reaches the match behind them in one receive. (240, not more: the whole backlog is evaluated
    inside the official client's 23 s receive deadline, on a loaded two-core machine too.)"""
    from tests.proxy.official import start_consumer

    cluster = grpc_cluster
    append_backlog(cluster, 240, "v", "x1999")
    broker = cluster.controller.context
    expression = " OR ".join(f"a = 'x{i}'" for i in range(2000))
    done = False
    seen: set[int] = set()

    def receive_once() -> list[bytes]:
        nonlocal done
        consumer = start_consumer(cluster.grpc_endpoints[0], "G-budget", TOPIC, expression, sql=True)
        try:
            return [m.body for m in consumer.receive(1, 30)]
        finally:
            consumer.shutdown()
            done = True

    async def watch() -> None:
        while not done:
            seen.add(broker.offsets.query("G-budget", TOPIC, 0))
            await trio.sleep(0)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        assert await trio.to_thread.run_sync(receive_once) == [b"wanted"]
    assert len({offset for offset in seen if 0 < offset < 240}) > 3


async def test_a_woken_pull_reuses_its_filter_when_the_cache_let_it_go(
    cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parked pull whose long expression another client's pushed out of the memo and the filter cache (both bounded
    in characters) is re-run, when a message arrives, with the filter its pull compiled off the loop: re-running it
    must not parse the expression again, on the event loop every client shares."""
    monkeypatch.setattr(filter_cache, "KEPT_CHARS", 3000)  # room for one of the two expressions below
    mine, other = heavy_expression(100, "held"), heavy_expression(100, "other")
    addr = cluster.broker_addr
    async with RemotingClient() as parked, RemotingClient() as client:
        response: list[object] = []

        async def park() -> None:
            pull = pull_request(TOPIC, subscription=f"a = 'wanted' OR {mine}", expressionType="SQL92")
            response.append(await parked.invoke(addr, pull, 30))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(park)
            hold = cluster.controller.context.hold
            while not hold.held_count:
                await trio.sleep(0.001)
            pull = pull_request(TOPIC, sys_flag=SUBSCRIPTION_ONLY, subscription=other, expressionType="SQL92")
            assert (await client.invoke(addr, pull, 30)).code == ResponseCode.PULL_NOT_FOUND
            assert filter_cache._memoised(f"a = 'wanted' OR {mine}", False) is None  # let go
            append_backlog(cluster, 0, "", "wanted")
    [woken] = response
    assert woken.code == ResponseCode.SUCCESS  # type: ignore[attr-defined]
    assert filter_cache._memoised(f"a = 'wanted' OR {mine}", False) is None  # not parsed again


async def test_a_grpc_receive_whose_filter_the_memo_let_go_compiles_it_off_the_event_loop(
    cluster: EmbeddedCluster,
) -> None:
    """The gRPC servicer compiles a long SQL92 filter on an executor thread, leaving it memoised for the receive on the
    Trio thread; the memo may have let it go meanwhile (other long expressions pushed it out). The receive must then
    compile it in a worker thread as the remoting pop and pull do, not on the event loop every client shares."""
    from proxy.config import ProxyConfig
    from proxy.pb import definition, service
    from proxy.startup import build_activity
    from tests.proxy.test_renew import md

    activity, _ = build_activity(cluster.controller, ProxyConfig())
    req = service.ReceiveMessageRequest(batch_size=1)
    req.group.name, req.message_queue.topic.name, req.message_queue.id = "G-memo", TOPIC, -1
    req.filter_expression.type = definition.FilterType.SQL
    req.filter_expression.expression = expression = heavy_expression(10_000, "memo")  # not memoised
    req.invisible_duration.FromSeconds(30)
    req.long_polling_timeout.FromSeconds(5)
    consuming = activity.consuming
    compiled_off_loop = False

    async def receive() -> None:
        if consuming.receive_now(req, md("memo-client"), 10) is None:
            await consuming.receive(req, md("memo-client"), 10)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receive)
        while not compiled_off_loop and nursery.child_tasks:
            compiled_off_loop = expression in filter_cache.compiling()
            await trio.sleep(0.001)
        nursery.cancel_scope.cancel()
    assert compiled_off_loop, "the receive compiled its filter on the event loop"


async def test_a_grpc_receive_plans_its_poll_from_the_time_left_after_its_filter_compiled(tmp_path: Path) -> None:
    """The receive's polling window is cut to the client's deadline; a long SQL92 filter is compiled first, on an
    executor thread, and that takes time. The window must be planned from what is left after it, or the answer comes
    after the client's deadline (DEADLINE_EXCEEDED where an empty receive is due)."""
    import grpc

    from proxy.common import Code
    from proxy.config import ProxyConfig
    from proxy.pb import definition, service, service_grpc

    proxy = ProxyConfig(enable_proxy=True, grpc_server_port=0, grpc_client_consumer_min_long_polling_timeout_millis=100)
    async with EmbeddedCluster(tmp_path / "grpc", proxy=proxy, enable_property_filter=True, **SMALL_STORE) as cluster:
        async with RemotingClient() as admin:
            assert (
                await admin.invoke(cluster.broker_addr, create_topic_request(TOPIC, 1), 5)
            ).code == ResponseCode.SUCCESS
        req = service.ReceiveMessageRequest(batch_size=1)
        req.group.name, req.message_queue.topic.name, req.message_queue.id = "G-late", TOPIC, -1
        req.filter_expression.type = definition.FilterType.SQL
        req.filter_expression.expression = heavy_expression(4000, "late")  # compiles in about a second
        req.invisible_duration.FromSeconds(30)
        req.long_polling_timeout.FromSeconds(6)  # all the client waits: cut to its deadline less the margin

        def receive() -> list[object]:
            with grpc.insecure_channel(cluster.grpc_endpoints[0]) as channel:
                stub = service_grpc.MessagingServiceStub(channel)
                return list(stub.ReceiveMessage(req, timeout=6, metadata=[("x-mq-client-id", "late-client")]))

        responses = await trio.to_thread.run_sync(receive)
    assert responses[0].status.code == Code.MESSAGE_NOT_FOUND


async def test_a_fifo_grpc_receive_reads_on_through_a_refused_backlog_at_once(grpc_cluster: EmbeddedCluster) -> None:
    """An orderly group's pop that moved its queue on past refused entries, none in flight, and left more unread is
    woken at once as any pop is (5.3.3's PopMessageProcessor counts an unblocked order queue's ``restNum`` too), so
    one FIFO receive reaches the match behind 8,000 refused messages rather than one read per polling window."""
    from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig

    orderly = SubscriptionGroupConfig("G-fifo-backlog", consume_message_orderly=True)
    grpc_cluster.controller.context.groups.update(orderly)
    assert await receive_behind_a_refused_backlog(grpc_cluster, "G-fifo-backlog") == [b"wanted"]


async def test_a_compile_whose_first_asker_is_cancelled_still_answers_the_others() -> None:
    """Askers of one long expression share its compile in a thread (the brokers of one process too). When the asker
    that started it is cancelled (its broker stopping), another still waiting must still get the compiled filter, not
    nothing, which would make its pull parse the expression on the event loop every client shares."""
    expression = heavy_expression(3000, "cancelled")
    got: list[object] = []

    async def first_asker(*, task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        with trio.CancelScope() as scope:  # stands for the first broker's pull
            task_status.started(scope)
            await filter_cache.compile_offloaded(expression)

    async def second() -> None:
        got.append(await filter_cache.compile_offloaded(expression))

    async with trio.open_nursery() as nursery:
        first = await nursery.start(first_asker)
        with trio.fail_after(60):  # a hang guard, not a threshold
            while expression not in filter_cache.compiling():
                await trio.sleep(0.001)
        nursery.start_soon(second)
        await trio.sleep(0.01)  # the second asker waits on the compile in flight
        first.cancel()
    [result] = got
    assert isinstance(result, Sql92Filter)


class EvaluationCost:
    """Counts what the SQL92 filters evaluated cost (:attr:`Sql92Filter.cost` units), from every caller."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.spent = 0
        original = Sql92Filter.matches_raw

        def counted(sql: Sql92Filter, raw: str | bytes | memoryview) -> bool:
            self.spent += sql.cost
            return original(sql, raw)

        monkeypatch.setattr(Sql92Filter, "matches_raw", counted)


async def test_an_arrival_evaluates_the_parked_pulls_sql92_filters_within_a_budget(
    cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RocketMQ checks each held pull's filter against an arriving message on its reput thread
    (PullRequestHoldService.notifyMessageArriving); ours runs inside the append, on the loop every client shares: 40
    pulls parked on a 2,000-term filter made one arriving message cost 40 evaluations there. One arrival evaluates
    them within the pull path's budget; a pull it could not check is woken (its re-run reads the message with its own
    budget), and those it checked stay parked until a message they match arrives."""
    from processors.pull import SQL92_EVALUATION_BUDGET

    cost = EvaluationCost(monkeypatch)
    expression = " OR ".join(f"a = 'x{i}'" for i in range(2000))
    hold, parked = cluster.controller.context.hold, 40
    answers: list[RemotingCommand] = []
    async with RemotingClient() as client, trio.open_nursery() as nursery:

        async def park() -> None:
            pull = pull_request(TOPIC, subscription=expression, expressionType="SQL92", suspend_ms=600_000)
            answers.append(await client.invoke(cluster.broker_addr, pull, 600))

        for _ in range(parked):
            nursery.start_soon(park)
        with trio.fail_after(60):  # a hang guard, not a threshold
            while hold.held_count < parked:
                await trio.sleep(0.001)
        cost.spent = 0
        append_backlog(cluster, 0, "", "refused")  # matches none of them
        assert 0 < cost.spent <= SQL92_EVALUATION_BUDGET
        still = hold.held_count  # the pulls it checked (and that refused the message)
        assert 0 < still < parked
        with trio.fail_after(60):
            while len(answers) < parked - still:
                await trio.sleep(0.001)
        assert {(a.code, a.remark) for a in answers} == {(ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")}
        assert hold.held_count == still
        append_backlog(cluster, 0, "", "x1999")  # matches every one
        with trio.fail_after(60):
            while len(answers) < parked:
                await trio.sleep(0.001)
    assert [[m.body for m in iter_records(a.body)] for a in answers[parked - still :]] == [[b"wanted"]] * still
