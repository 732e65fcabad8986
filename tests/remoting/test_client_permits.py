"""The client's async and oneway permits (RocketMQ's ``semaphoreAsync`` / ``semaphoreOneway``,
remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingAbstract.java; ``clientAsyncSemaphoreValue``
and ``clientOnewaySemaphoreValue``): a callback invocation holds its permit until its answer, its timeout or its
connection's close; one that finds none free waits up to its own timeout, then fails with Java's message. Real
sockets, virtual time."""

from __future__ import annotations

import contextlib
import socket

import pytest
import trio
import trio.testing

from remoting.client import RemotingClient
from remoting.codec.acl_signing import SessionCredentials
from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.dispatch import Dispatcher, ProcessorPool
from remoting.errors import RemotingError, RemotingTimeoutError, RemotingTooMuchRequestError
from remoting.permits import Permits
from remoting.server import RemotingServer
from tests.remoting.helpers import GateProcessor

HELD = 9_902

Outcomes = list[RemotingCommand | RemotingError]


async def _outcomes(outcomes: Outcomes, count: int) -> None:
    while len(outcomes) < count:
        await trio.sleep(0.01)


async def _held_server(nursery: trio.Nursery, gate: GateProcessor) -> str:
    """A server in ``nursery`` whose HELD requests ``gate`` holds (4 workers); its address."""
    dispatcher = Dispatcher()
    dispatcher.register(HELD, gate, ProcessorPool("held", 4, 100))
    host, port = await nursery.start(RemotingServer(dispatcher).serve, "127.0.0.1", 0)
    return f"{host}:{port}"


async def test_an_async_request_past_the_permits_waits_its_timeout_then_fails_with_javas_message(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Two permits, two requests held by the server: a third waits for a permit for its timeout (1 s) and fails with
    invokeAsyncImpl's ``tryAcquire semaphore timeout`` message, never written; once the two are answered, their
    permits are back and the next request goes at once."""
    gate = GateProcessor()
    async with trio.open_nursery() as nursery, RemotingClient(async_permits=2) as client:
        addr = await _held_server(nursery, gate)
        await client.connection(addr)
        held: Outcomes = []
        for _ in range(2):
            client.invoke_callback(addr, request(HELD), 30, held.append)
        assert client.async_permits.used == 2
        third: Outcomes = []
        client.invoke_callback(addr, request(HELD), 1.0, third.append)
        start = trio.current_time()
        await _outcomes(third, 1)
        assert trio.current_time() - start == pytest.approx(1.0, abs=0.02)
        assert isinstance(third[0], RemotingTimeoutError)
        assert str(third[0]) == (
            "invokeAsyncImpl tryAcquire semaphore timeout, 1000ms, waiting thread nums: 0 semaphoreAsyncValue: 0"
        )
        assert gate.entered == 2  # the third was never written
        gate.gate.set()
        await _outcomes(held, 2)
        assert all(isinstance(o, RemotingCommand) and o.code == ResponseCode.SUCCESS for o in held)
        assert client.async_permits.used == 0
        fourth: Outcomes = []
        client.invoke_callback(addr, request(HELD), 5, fourth.append)
        await _outcomes(fourth, 1)
        assert isinstance(fourth[0], RemotingCommand) and fourth[0].code == ResponseCode.SUCCESS
        nursery.cancel_scope.cancel()


async def test_a_waiting_async_request_takes_the_permit_an_answer_gives_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A request waiting for a permit goes out as soon as an answered (or timed-out) invocation gives one back; a
    request given no time at all fails at once with ``invoke too fast`` (RemotingTooMuchRequestException)."""
    gate = GateProcessor()
    async with trio.open_nursery() as nursery, RemotingClient(async_permits=1) as client:
        addr = await _held_server(nursery, gate)
        await client.connection(addr)
        first: Outcomes = []
        client.invoke_callback(addr, request(HELD), 2.0, first.append)  # times out after 2 s: permit back
        second: Outcomes = []
        client.invoke_callback(addr, request(HELD), 10.0, second.append)
        await _outcomes(first, 1)
        assert isinstance(first[0], RemotingTimeoutError)
        while gate.entered < 2:
            await trio.sleep(0.01)
        instant: Outcomes = []
        client.invoke_callback(addr, request(HELD), 0.0, instant.append)
        await _outcomes(instant, 1)
        assert isinstance(instant[0], RemotingTooMuchRequestError)
        assert str(instant[0]) == "invokeAsyncImpl invoke too fast"
        gate.gate.set()
        await _outcomes(second, 1)
        assert isinstance(second[0], RemotingCommand) and second[0].code == ResponseCode.SUCCESS
        assert client.async_permits.used == 0
        nursery.cancel_scope.cancel()


async def test_a_oneway_past_the_oneway_permits_waits_its_timeout_then_fails(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A oneway holds its permit while its write waits behind a backlog the peer does not read; with the one permit
    taken, another oneway fails after its timeout with invokeOnewayImpl's message."""
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    listener.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    addr = f"127.0.0.1:{listener.socket.getsockname()[1]}"
    async with trio.open_nursery() as nursery, listener:
        nursery.start_soon(_accept_and_never_read, listener)
        async with RemotingClient(oneway_permits=1) as client:
            filler = request(HELD, body=b"x" * (1 << 20), oneway=True)
            for _ in range(64):
                await client.invoke_oneway(addr, filler, 2.0)
                if client.connections[addr].congested:
                    break
            assert client.oneway_permits.used == 0
            nursery.start_soon(_oneway_until_closed, client, addr)
            while client.oneway_permits.used == 0:
                await trio.sleep(0)
            with pytest.raises(RemotingTimeoutError) as caught:
                await client.invoke_oneway(addr, request(HELD, oneway=True), 1.0)
            assert str(caught.value).startswith("invokeOnewayImpl tryAcquire semaphore timeout, 1000ms")
        nursery.cancel_scope.cancel()


async def _oneway_until_closed(client: RemotingClient, addr: str) -> None:
    """A oneway that waits behind the backlog until the client closes its connection."""
    with contextlib.suppress(RemotingError):
        await client.invoke_oneway(addr, request(HELD, oneway=True), 10.0)


async def _accept_and_never_read(listener: trio.SocketListener) -> None:
    stream = await listener.accept()
    async with stream:
        await trio.sleep_forever()


async def test_a_callback_request_that_fails_to_sign_or_encode_gives_its_permit_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A request whose fields cannot be signed or encoded (a lone surrogate is no UTF-8) raises to its caller and is
    never registered, so nothing would give its permit back: Java signs (``doBeforeRpcHooks``) before
    ``invokeAsyncImpl`` takes one and releases it on a failed write. With one permit, each such failure used to
    keep it for good and every later async request failed with ``tryAcquire semaphore timeout``."""
    gate = GateProcessor()
    gate.gate.set()
    credentials = SessionCredentials("access-key", "secret-key")
    async with trio.open_nursery() as nursery:
        addr = await _held_server(nursery, gate)
        for signing in (None, credentials):
            async with RemotingClient(async_permits=1, credentials=signing) as client:
                await client.connection(addr)
                unused: Outcomes = []
                with pytest.raises(
                    (TypeError, UnicodeEncodeError)
                ):  # orjson's JSONEncodeError; signed: UnicodeEncodeError
                    client.invoke_fields_callback(addr, HELD, {"k": "\ud800"}, b"", 5.0, unused.append)
                if signing is not None:
                    with pytest.raises(UnicodeEncodeError):
                        client.invoke_callback(addr, request(HELD, {"k": "\ud800"}), 5.0, unused.append)
                after: Outcomes = []
                client.invoke_callback(addr, request(HELD), 5.0, after.append)
                await _outcomes(after, 1)
                assert isinstance(after[0], RemotingCommand), after[0]
                assert after[0].code == ResponseCode.SUCCESS
                assert unused == []
                assert client.async_permits.used == 0
        nursery.cancel_scope.cancel()


async def test_a_callback_request_that_fails_to_encode_raises_gives_its_permit_back_and_calls_nothing_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A command that does not encode (an extFields value that is not text) raises to the caller of
    ``invoke_callback``; it was never written, so it holds no permit and its callback is never called (Java's
    invokeAsyncImpl releases the permit of a request whose write failed). Ours left it registered: it kept its
    permit until its timeout, then told its callback it had timed out, a second outcome for one request."""
    gate = GateProcessor()
    gate.gate.set()
    async with trio.open_nursery() as nursery, RemotingClient(async_permits=1) as client:
        addr = await _held_server(nursery, gate)
        await client.connection(addr)
        unused: Outcomes = []
        with pytest.raises(TypeError):  # orjson's JSONEncodeError
            client.invoke_callback(addr, request(HELD, {"k": b"\xff"}), 30.0, unused.append)  # type: ignore[dict-item]
        after: Outcomes = []
        client.invoke_callback(addr, request(HELD), 5.0, after.append)
        await _outcomes(after, 1)
        assert isinstance(after[0], RemotingCommand), after[0]
        assert after[0].code == ResponseCode.SUCCESS
        await trio.sleep(60)
        assert unused == []
        assert client.async_permits.used == 0
        nursery.cancel_scope.cancel()


async def test_a_permit_given_back_goes_to_the_request_that_waited_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Java's semaphores are fair (``new Semaphore(permits, true)``): a permit given back goes to the longest
    waiter, never to a request that asked after it. Ours let a request that came to wait after the permit was given
    back, but before the woken waiter ran, take it, so a long waiter could time out behind newer requests."""
    permits = Permits("invokeAsyncImpl", 1)
    assert permits.try_acquire()
    order: list[str] = []

    async def wait_then_hold(name: str) -> None:
        await permits.acquire(10.0)
        order.append(name)
        await trio.sleep(1)
        permits.release()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait_then_hold, "first")
        await trio.testing.wait_all_tasks_blocked()
        permits.release()  # wakes "first", which has not run yet
        await wait_then_hold("second")
    assert order == ["first", "second"]


async def test_a_callback_request_that_fails_to_encode_in_its_task_is_told_and_the_client_lives_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A callback request made before its connection opened runs in the client's task; when it does not encode (an
    extFields value that is not text) its callback hears a ``RemotingError`` and its permit is back, as Java's
    invokeAsyncImpl fails the callback of a request whose write failed. Ours let the encoding error out of the task,
    which ended the client's task group: every connection closed and the client was gone."""
    gate = GateProcessor()
    gate.gate.set()
    async with trio.open_nursery() as nursery:
        addr = await _held_server(nursery, gate)
        async with RemotingClient(async_permits=1) as client:
            failed: Outcomes = []
            bad = request(HELD, {"k": b"\xff"})  # type: ignore[dict-item]
            client.invoke_callback(addr, bad, 5.0, failed.append)  # not connected yet
            await _outcomes(failed, 1)
            assert isinstance(failed[0], RemotingError)
            after: Outcomes = []
            client.invoke_callback(addr, request(HELD), 5.0, after.append)
            await _outcomes(after, 1)
            assert isinstance(after[0], RemotingCommand), after[0]
            assert after[0].code == ResponseCode.SUCCESS
            assert client.async_permits.used == 0
        nursery.cancel_scope.cancel()
