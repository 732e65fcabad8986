"""The producer's timeouts against a master that never answers a send (RocketMQ 4.9.8's DefaultMQProducerImpl): a sync
send's ``send_msg_timeout`` covers all its attempts, and a request gives up within its own timeout. Real sockets on
127.0.0.1, virtual time."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

import attrs
import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.errors import MQClientError, SendFailedError
from client.message import Message
from client.producer import Producer
from client.request_reply import RequestTimeoutError
from remoting.client import RemotingClient
from remoting.codec.bodies import MessageQueue
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.dispatch import Dispatcher, ProcessorPool, RequestContext
from remoting.errors import RemotingError
from remoting.server import RemotingServer
from tests.client.test_master_watch import register_as_master

TOPIC = "Silent"


class SilentBroker:
    """A master that answers everything but sends: those it never answers (a paused or wedged broker)."""

    def __init__(self) -> None:
        self.sends = 0
        self.sent_at: list[float] = []  # when each send came in

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_MESSAGE, RequestCode.SEND_BATCH_MESSAGE):
            self.sends += 1
            self.sent_at.append(trio.current_time())
            return None
        return request.response(ResponseCode.SUCCESS)


@contextlib.asynccontextmanager
async def _silent_master(cluster: EmbeddedCluster) -> AsyncIterator[SilentBroker]:
    silent = SilentBroker()
    dispatcher = Dispatcher()
    dispatcher.set_default(silent, ProcessorPool("silent", 4, 100))
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        host, port = await nursery.start(RemotingServer(dispatcher).serve, "127.0.0.1", 0)
        await register_as_master(client, cluster.namesrv_addr, f"{host}:{port}", TOPIC, "broker-s")
        yield silent
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("cached", [False, True], ids=["first-send", "route-cached"])
async def test_a_sync_send_gives_up_once_send_msg_timeout_has_passed_since_its_first_try(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, cached: bool
) -> None:
    """DefaultMQProducerImpl.sendDefaultImpl counts ``sendMsgTimeout`` from before the first attempt: each attempt
    gets what is left (``timeout - costTime``), and once nothing is left the send stops ("sendDefaultImpl call
    timeout"). Before, every attempt got the whole timeout: a send to a master that never answers took 3 x 3 s and
    wrote the message three times."""
    async with _silent_master(embedded_cluster) as silent, Producer("pg-silent", embedded_cluster.namesrv_addr) as p:
        if cached:
            await p.publish_info(TOPIC)
        started = trio.current_time()
        with pytest.raises(SendFailedError) as caught:
            await p.send(Message(TOPIC, b"never answered"))
        elapsed = trio.current_time() - started
    assert elapsed == pytest.approx(3.0, abs=0.5), elapsed
    assert silent.sends == 1
    assert "sendDefaultImpl call timeout" in str(caught.value)


@pytest.mark.parametrize("mode", ["request", "request_async"])
async def test_a_request_whose_send_is_never_answered_gives_up_within_its_timeout(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, mode: str
) -> None:
    """DefaultMQProducerImpl.request waits ``timeout - cost`` for the reply whatever became of the send (waitResponse):
    a send not answered by then has not failed yet (RequestResponseFuture's ``sendRequestOk`` starts true, and the
    async send's own timeout is found later by the response table's scan), so the request raises
    RequestTimeoutException (10006) "send request message to <topic> OK, but wait reply message timeout" after the
    request's timeout; the callback of request(msg, callback, timeout) gets "request timeout, no reply message." from
    the expired-request scan (client/.../producer/RequestFutureHolder.java). Before, the request waited for the async
    send's three attempts of the whole timeout each (9 s for a 3 s request), then raised "send request message to
    <topic> fail"."""
    async with _silent_master(embedded_cluster), Producer("pg-silent-req", embedded_cluster.namesrv_addr) as p:
        started = trio.current_time()
        outcome: object
        if mode == "request":
            with pytest.raises(MQClientError) as caught:
                await p.request(Message(TOPIC, b"ping"), 3.0)
            outcome = caught.value
        else:
            done = trio.Event()
            got: list[object] = []

            def callback(result: object) -> None:
                got.append(result)
                done.set()

            p.request_async(Message(TOPIC, b"ping"), callback, 3.0)
            await done.wait()
            [outcome] = got
        elapsed = trio.current_time() - started
    assert elapsed == pytest.approx(3.0, abs=0.5), elapsed
    if mode == "request":
        assert isinstance(outcome, RequestTimeoutError) and outcome.code == 10006, repr(outcome)
        assert str(outcome) == f"send request message to <{TOPIC}> OK, but wait reply message timeout, 3000 ms."
    else:
        assert isinstance(outcome, RequestTimeoutError), outcome
        assert str(outcome) == "request timeout, no reply message."


class RouteFront:
    """A name server in front of the cluster's: it forwards every request, the route lookups ``slow`` picks (by their
    count, from 1) after ``delay`` seconds (a name server slow to answer), the others at once."""

    def __init__(self, upstream: str, client: RemotingClient, delay: float, slow: Callable[[int], bool]) -> None:
        self.upstream, self.client, self.delay, self.slow = upstream, client, delay, slow
        self.lookups = 0
        self.silent: SilentBroker | None = None  # the silent master behind it, when there is one

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            self.lookups += 1
            if self.slow(self.lookups):
                await trio.sleep(self.delay)
        answer = await self.client.invoke(self.upstream, attrs.evolve(request, opaque=0), 10)
        return request.response(answer.code, answer.remark, dict(answer.ext_fields), answer.body)


@contextlib.asynccontextmanager
async def _silent_master_behind_a_front(
    cluster: EmbeddedCluster, slow: Callable[[int], bool]
) -> AsyncIterator[tuple[RouteFront, str]]:
    """A silent master, and a :class:`RouteFront` (2 s a slow lookup) before the name server: it and its address."""
    async with _silent_master(cluster) as silent, trio.open_nursery() as nursery, RemotingClient() as client:
        dispatcher = Dispatcher()
        front = RouteFront(cluster.namesrv_addr, client, 2.0, slow)
        front.silent = silent
        dispatcher.set_default(front, ProcessorPool("front", 4, 100))
        host, port = await nursery.start(RemotingServer(dispatcher).serve, "127.0.0.1", 0)
        yield front, f"{host}:{port}"
        nursery.cancel_scope.cancel()


async def test_a_timed_out_send_does_not_wait_for_a_slow_route_reread_past_its_timeout(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """After a failed attempt ours re-reads the route (to find a new master sooner than the 30 s poll); a sync send
    whose ``send_msg_timeout`` is spent must not wait for that re-read beyond it (sendDefaultImpl gives up once
    ``timeout - costTime`` is gone): with a name server taking 2 s a lookup, a 3 s send took 7 s."""
    async with (
        _silent_master_behind_a_front(embedded_cluster, lambda lookup: lookup > 1) as (front, addr),
        Producer("pg-slow-routes", addr) as producer,
    ):
        await producer.publish_info(TOPIC)  # the first lookup, at once
        started = trio.current_time()
        with pytest.raises(SendFailedError) as caught:
            await producer.send(Message(TOPIC, b"never answered"))
        elapsed = trio.current_time() - started
    assert front.lookups >= 2  # the re-read was asked for
    assert elapsed == pytest.approx(3.0, abs=0.5), elapsed
    assert "sendDefaultImpl call timeout" in str(caught.value)


@pytest.mark.parametrize("mode", ["selector", "queue", "batch"])
async def test_a_send_counts_its_route_lookup_in_its_timeout(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, mode: str
) -> None:
    """sendSelectImpl and sendDefaultImpl (which a batch goes through) take the time before
    tryToFindTopicPublishInfo and give the attempt ``timeout - costTime``; sendKernelImpl counts a route lookup for a
    chosen queue likewise. With a name server taking 2 s a lookup, a 3 s selector, queue or batch send to a master that
    never answers took 2 + 3 s."""
    async with _silent_master_behind_a_front(embedded_cluster, lambda lookup: lookup > 1) as (front, addr):
        front.lookups = 1  # every lookup is slow, the first too
        async with Producer("pg-slow-first-route", addr) as producer:
            started = trio.current_time()
            with pytest.raises((SendFailedError, RemotingError)):
                if mode == "selector":
                    await producer.send(Message(TOPIC, b"never answered"), selector=lambda mqs, m, a: mqs[0])
                elif mode == "queue":
                    await producer.send(Message(TOPIC, b"never answered"), queue=MessageQueue(TOPIC, "broker-s", 0))
                else:
                    await producer.send_batch([Message(TOPIC, b"never"), Message(TOPIC, b"answered")])
            elapsed = trio.current_time() - started
    assert front.lookups >= 2  # the lookup was slow
    assert elapsed == pytest.approx(3.0, abs=0.5), elapsed


async def test_an_async_send_counts_its_route_lookup_in_its_timeout(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """An async send without a queue goes through sendDefaultImpl too, which takes the time before
    tryToFindTopicPublishInfo and gives its attempt ``timeout - costTime`` (client/.../impl/producer/
    DefaultMQProducerImpl.java); MQClientAPIImpl.sendMessageAsync keeps that budget. With a name server taking 2 s a
    lookup, a 3 s async send to a master that never answers called back after 2 + 3 s."""
    async with (
        _silent_master_behind_a_front(embedded_cluster, lambda lookup: lookup == 1) as (front, addr),
        Producer("pg-slow-async-route", addr) as producer,
    ):
        producer.retry_times_when_send_async_failed = 0
        outcomes: list[object] = []
        done = trio.Event()

        def callback(outcome: object) -> None:
            outcomes.append(outcome)
            done.set()

        started = trio.current_time()
        producer.send_async(Message(TOPIC, b"never answered"), callback)
        await done.wait()
        elapsed = trio.current_time() - started
    assert front.lookups >= 1
    assert isinstance(outcomes[0], (MQClientError, RemotingError)), outcomes
    assert elapsed == pytest.approx(3.0, abs=0.5), elapsed


async def test_an_async_send_calls_back_when_its_last_attempt_fails_not_after_a_route_reread(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """MQClientAPIImpl.onExceptionImpl (client/.../impl/MQClientAPIImpl.java) calls ``onException`` as soon as the
    last attempt failed. Ours re-read the route after every failed attempt of an async send's retries, the last one
    too, with no bound: with a name server taking 2 s a lookup, the callback came 2 s after the last attempt's 3 s
    timeout. (That attempt is the first: it spent the timeout, so no retry is written.)"""
    async with (
        _silent_master_behind_a_front(embedded_cluster, lambda lookup: lookup > 1) as (front, addr),
        Producer("pg-async-last-reread", addr) as producer,
    ):
        producer.retry_times_when_send_async_failed = 1
        await producer.publish_info(TOPIC)  # the first lookup, at once
        silent = front.silent
        assert silent is not None
        done = trio.Event()
        outcomes: list[tuple[float, object]] = []

        def callback(outcome: object) -> None:
            outcomes.append((trio.current_time(), outcome))
            done.set()

        producer.send_async(Message(TOPIC, b"never answered"), callback)
        await done.wait()
    [(called_back, outcome)] = outcomes
    assert isinstance(outcome, SendFailedError), outcome
    assert len(silent.sent_at) == 1, silent.sent_at
    assert called_back - silent.sent_at[-1] == pytest.approx(3.0, abs=0.5), (called_back, silent.sent_at)


@pytest.mark.parametrize("cached", [False, True], ids=["first-send", "route-cached"])
async def test_an_async_sends_retries_share_its_timeout_so_none_follows_a_timed_out_attempt(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, cached: bool
) -> None:
    """MQClientAPIImpl.sendMessageAsync gives a retry ``timeoutMillis - cost`` (client/.../impl/MQClientAPIImpl.java
    operationComplete, onExceptionImpl), and NettyRemotingClient.invokeAsync writes nothing once that is spent
    ("invokeAsync call timeout"): an attempt that timed out is the last one written. Ours gave every retry the whole
    timeout, so an async send to a master that went silent took 3 x 3 s and left it three copies to store."""
    async with (
        _silent_master(embedded_cluster) as silent,
        Producer("pg-async-budget", embedded_cluster.namesrv_addr) as p,
    ):
        if cached:
            await p.publish_info(TOPIC)
        done = trio.Event()
        outcomes: list[tuple[float, object]] = []

        def callback(outcome: object) -> None:
            outcomes.append((trio.current_time(), outcome))
            done.set()

        started = trio.current_time()
        p.send_async(Message(TOPIC, b"never answered"), callback)
        await done.wait()
    [(called_back, outcome)] = outcomes
    assert isinstance(outcome, SendFailedError), outcome
    assert outcome.timed_out
    assert silent.sends == 1, silent.sent_at
    assert called_back - started == pytest.approx(3.0, abs=0.5), called_back - started
