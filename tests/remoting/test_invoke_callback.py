"""``Connection.invoke_callback``: the task-free invocation behind ``send_async``. Every outcome (response, timeout,
close, a closed connection) reaches the callback exactly once, and it matches what ``invoke`` gives."""

from __future__ import annotations

import logging
import socket

import pytest
import trio
import trio.testing

from remoting.client import RemotingClient
from remoting.codec.acl_signing import SessionCredentials, sign
from remoting.codec.codes import ResponseCode, SerializeType
from remoting.codec.command import RemotingCommand, request
from remoting.codec.frame import encode_json_request
from remoting.connection import Connection, RequestCallback
from remoting.dispatch import Dispatcher, ProcessorPool, RequestContext
from remoting.errors import RemotingClosedError, RemotingConnectError, RemotingError, RemotingTimeoutError
from remoting.server import RemotingServer
from tests.remoting.helpers import EchoProcessor, GateProcessor, RawPeer

ECHO, SILENT = 1, 2


async def _answer(ctx: RequestContext, cmd: RemotingCommand) -> None:
    if cmd.code == ECHO:
        await ctx.connection.send(cmd.response(ResponseCode.SUCCESS, ext_fields={"x": "1"}, body=cmd.body))


def _pair() -> tuple[Connection, Connection]:
    """Over a real socket pair; the invoking side also writes directly to its raw socket, as the client does."""
    left, right = socket.socketpair()
    raw = left.dup()
    raw.setblocking(False)
    return (
        Connection(trio.SocketStream(trio.socket.from_stdlib_socket(left)), ("peer", 1), ("me", 2), raw_socket=raw),
        Connection(trio.SocketStream(trio.socket.from_stdlib_socket(right)), ("me", 2), ("peer", 1)),
    )


def _run_pair(nursery: trio.Nursery, peer_answer: RequestCallback = _answer) -> Connection:
    """A :func:`_pair` run in ``nursery``, the peer answering with ``peer_answer``; returns the invoking end."""
    conn, other = _pair()
    nursery.start_soon(other.run, peer_answer)
    nursery.start_soon(conn.run, _answer)
    return conn


async def _outcomes(outcomes: list[RemotingCommand | RemotingError], count: int) -> None:
    """Wait (at most 5 s, a hang guard) until ``count`` outcomes arrived."""
    with trio.fail_after(5):
        while len(outcomes) < count:
            await trio.sleep(0.001)


async def test_callback_gets_the_same_response_invoke_returns():
    outcomes: list[RemotingCommand | RemotingError] = []
    async with trio.open_nursery() as nursery:
        conn = _run_pair(nursery)
        for i in range(20):
            conn.invoke_callback(request(ECHO, body=b"cb%d" % i), 5.0, outcomes.append)
        frame = encode_json_request(ECHO, 4242, {"k": "v"}, b"cb19")  # a request written from its fields
        conn.invoke_frame_callback(4242, ECHO, frame, 5.0, outcomes.append)
        awaited = await conn.invoke(request(ECHO, body=b"cb19"), 5.0)
        await _outcomes(outcomes, 21)
        nursery.cancel_scope.cancel()
    by_frame = outcomes.pop()
    assert isinstance(by_frame, RemotingCommand) and by_frame.opaque == 4242
    assert (by_frame.code, by_frame.ext_fields, by_frame.body) == (awaited.code, awaited.ext_fields, awaited.body)
    conn.invoke_frame_callback(1, ECHO, frame, 5.0, outcomes.append)  # closed now: the callback hears it at once
    assert isinstance(outcomes.pop(), RemotingClosedError)
    assert [o.body for o in outcomes if isinstance(o, RemotingCommand)] == [b"cb%d" % i for i in range(20)]
    last = outcomes[-1]
    assert isinstance(last, RemotingCommand)
    assert (last.code, last.ext_fields, last.body) == (awaited.code, awaited.ext_fields, awaited.body)
    assert conn.pending_invocations == 0


async def test_timeout_reaches_the_callback_once_and_a_late_answer_is_dropped(autojump_clock):
    outcomes: list[tuple[float, RemotingCommand | RemotingError]] = []
    async with trio.open_nursery() as nursery:
        conn = _run_pair(nursery)
        start = trio.current_time()
        conn.invoke_callback(request(SILENT), 3.0, lambda o: outcomes.append((trio.current_time() - start, o)))
        conn.invoke_callback(request(SILENT), 1.0, lambda o: outcomes.append((trio.current_time() - start, o)))
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    assert [round(t, 3) for t, _ in outcomes] == [1.0, 3.0]
    assert all(isinstance(o, RemotingTimeoutError) for _, o in outcomes)
    assert "request code 2" in str(outcomes[0][1])


async def test_close_fails_every_pending_callback_once_and_a_closed_connection_fails_at_once():
    outcomes: list[RemotingCommand | RemotingError] = []
    async with trio.open_nursery() as nursery:
        conn = _run_pair(nursery)
        for _ in range(5):
            conn.invoke_callback(request(SILENT), 30.0, outcomes.append)
        await trio.sleep(0.01)
        conn.close()
        conn.close()
        assert len(outcomes) == 5 and all(isinstance(o, RemotingConnectError) for o in outcomes)
        conn.invoke_callback(request(ECHO), 30.0, outcomes.append)
        nursery.cancel_scope.cancel()
    assert len(outcomes) == 6 and isinstance(outcomes[5], RemotingClosedError)


async def test_a_raising_callback_is_logged_and_the_reader_goes_on(caplog: pytest.LogCaptureFixture):
    outcomes: list[RemotingCommand | RemotingError] = []

    def explode(outcome: RemotingCommand | RemotingError) -> None:
        raise ValueError("callback bug")

    with caplog.at_level(logging.ERROR):
        async with trio.open_nursery() as nursery:
            conn = _run_pair(nursery)
            conn.invoke_callback(request(ECHO), 5.0, explode)
            conn.invoke_callback(request(ECHO, body=b"after"), 5.0, outcomes.append)
            with trio.fail_after(5):
                while not outcomes:
                    await trio.sleep(0.001)
            assert not conn.closed
            nursery.cancel_scope.cancel()
    assert isinstance(outcomes[0], RemotingCommand) and outcomes[0].body == b"after"
    assert "callback bug" in caplog.text


async def test_a_timeout_callback_that_closes_the_connection_does_not_crash_the_client(autojump_clock):
    """Two callback invocations expire in the same sweep; the first one's callback drops the connection (as Java's
    ``clientCloseSocketIfTimeout`` does). The second must get its outcome and the client must live on."""
    dispatcher = Dispatcher()
    dispatcher.register(SILENT, GateProcessor(), ProcessorPool("silent", 4, 100))  # never answers
    dispatcher.register(ECHO, EchoProcessor(), ProcessorPool("echo", 4, 100))
    outcomes: list[RemotingCommand | RemotingError] = []
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(RemotingServer(dispatcher).serve)
        address = f"{host}:{port}"
        async with RemotingClient() as client:
            await client.connection(address)

            def on_outcome(outcome: RemotingCommand | RemotingError) -> None:
                outcomes.append(outcome)
                if isinstance(outcome, RemotingTimeoutError):
                    client.close_connection(address)

            client.invoke_callback(address, request(SILENT), 3.0, on_outcome, plain=True)
            client.invoke_callback(address, request(SILENT), 3.0, on_outcome, plain=True)
            await trio.sleep(10)
            assert [type(o) for o in outcomes] == [RemotingTimeoutError, RemotingTimeoutError]
            echoed = await client.invoke(address, request(ECHO, body=b"alive"), 5.0)  # reconnects
            assert echoed.body == b"alive"
        nursery.cancel_scope.cancel()


async def test_an_invocation_made_by_a_timeout_callback_still_times_out(autojump_clock):
    """A callback that retries on timeout (``invoke_callback`` again from inside the callback, which the sweeper
    calls) must see the retry time out too; the retry's deadline must not be lost by the sweeper."""
    outcomes: list[tuple[float, RemotingCommand | RemotingError]] = []
    async with trio.open_nursery() as nursery:
        conn = _run_pair(nursery)
        start = trio.current_time()

        def retry_once(outcome: RemotingCommand | RemotingError) -> None:
            outcomes.append((trio.current_time() - start, outcome))
            if len(outcomes) == 1:
                conn.invoke_callback(request(SILENT), 3.0, retry_once)

        conn.invoke_callback(request(SILENT), 3.0, retry_once)
        await trio.sleep(60)  # ten times the two timeouts
        nursery.cancel_scope.cancel()
    assert [round(t, 3) for t, _ in outcomes] == [3.0, 6.0]
    assert all(isinstance(o, RemotingTimeoutError) for _, o in outcomes)


async def test_the_client_writes_from_fields_only_what_would_go_out_as_json_and_signs_them_with_credentials():
    dispatcher = Dispatcher()
    dispatcher.register(ECHO, EchoProcessor(), ProcessorPool("send", 1, 100))
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(RemotingServer(dispatcher).serve)
        address = f"{host}:{port}"
        for client, expected in (
            (RemotingClient(credentials=SessionCredentials("ak", "sk")), True),
            (RemotingClient(serialize_type=SerializeType.CBOR), False),
            (RemotingClient(), True),
        ):
            async with client:
                await client.invoke(address, request(ECHO), 5.0)  # the connection is live now
                outcomes: list[RemotingCommand | RemotingError] = []
                fields = {"k": "v"}
                taken = client.invoke_fields_callback(address, ECHO, fields, b"f", 5.0, outcomes.append)
                assert taken is expected
                assert fields == {"k": "v"}  # the caller's dict is left alone
                if taken:
                    await _outcomes(outcomes, 1)
                    (got,) = outcomes
                    assert isinstance(got, RemotingCommand) and got.body == b"f"
                    # The echo carries the fields as they went out: signed exactly as sign() signs the command.
                    unsigned = request(ECHO, {"k": "v"}, b"f")
                    wanted = (
                        unsigned.ext_fields
                        if client.credentials is None
                        else sign(unsigned, client.credentials).ext_fields
                    )
                    assert got.ext_fields == wanted
        nursery.cancel_scope.cancel()


class _Recording:
    """An :class:`~remoting.future.Invocation` of the test's own: takes a JSON answer whose ``x`` is ``take``."""

    def __init__(self, take: str | None) -> None:
        self.deadline = 0.0
        self.take = take
        self.outcomes: list[object] = []

    def complete_json(self, fields: dict[str, object], body: bytes) -> bool:
        ext = fields.get("extFields")
        if self.take is None or not isinstance(ext, dict) or ext.get("x") != self.take:
            return False
        self.outcomes.append(("json", fields["opaque"], body))
        return True

    def complete(self, response: RemotingCommand | None = None, error: RemotingError | None = None) -> None:
        self.outcomes.append(response if response is not None else error if error is not None else "timeout")


async def test_an_invocation_of_the_callers_own_takes_its_answer_from_the_header_or_as_a_command(autojump_clock):
    taking, declining, silent = _Recording("1"), _Recording("2"), _Recording("1")
    async with trio.open_nursery() as nursery:
        conn = _run_pair(nursery)
        conn.invoke_frame_future(7, encode_json_request(ECHO, 7, {"k": "v"}, b"a"), taking, 5.0)
        conn.invoke_frame_future(8, encode_json_request(ECHO, 8, {"k": "v"}, b"b"), declining, 5.0)
        conn.invoke_frame_future(9, encode_json_request(SILENT, 9, {"k": "v"}, b""), silent, 2.0)
        assert silent.deadline == trio.current_time() + 2.0
        awaited = await conn.invoke_frame(10, ECHO, encode_json_request(ECHO, 10, {"k": "v"}, b"c"), 5.0, _x_is_1)
        declined = await conn.invoke_frame(11, ECHO, encode_json_request(ECHO, 11, {"k": "v"}, b"d"), 5.0, _never)
        await trio.sleep(3)
        nursery.cancel_scope.cancel()
    assert taking.outcomes == [("json", 7, b"a")]
    (command,) = declining.outcomes
    assert isinstance(command, RemotingCommand) and (command.opaque, command.body) == (8, b"b")
    assert silent.outcomes == ["timeout"]
    assert awaited == ("1", b"c")
    assert isinstance(declined, RemotingCommand) and declined.body == b"d"
    assert conn.pending_invocations == 0
    closed = _Recording("1")
    conn.invoke_frame_future(12, encode_json_request(ECHO, 12, {"k": "v"}, b""), closed, 5.0)
    assert len(closed.outcomes) == 1 and isinstance(closed.outcomes[0], RemotingClosedError)


def _x_is_1(fields: dict[str, object], body: bytes) -> object | None:
    ext = fields.get("extFields")
    return (ext["x"], body) if isinstance(ext, dict) and ext.get("x") == "1" else None


def _never(fields: dict[str, object], body: bytes) -> object | None:
    return None


async def test_a_malformed_answer_to_a_declining_invocation_closes_the_connection_and_fails_it_once():
    declining = _Recording(None)

    async def bad_answer(ctx: RequestContext, cmd: RemotingCommand) -> None:
        header = b'{"code":"zero","flag":1,"opaque":%d}' % cmd.opaque  # 'code' is no int: a codec error
        ctx.connection.send_frame_nowait((len(header) + 4).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header)

    async with trio.open_nursery() as nursery:
        conn = _run_pair(nursery, bad_answer)
        conn.invoke_frame_future(5, encode_json_request(ECHO, 5, {"k": "v"}, b""), declining, 5.0)
        with trio.fail_after(5):
            while not declining.outcomes:
                await trio.sleep(0.001)
        nursery.cancel_scope.cancel()
    assert conn.closed
    (outcome,) = declining.outcomes
    assert isinstance(outcome, RemotingConnectError)


class _RaisingOnCompletion(_Recording):
    """Records each completion (and each answer it takes from the header), then raises, as a bug of its owner's."""

    def complete_json(self, fields: dict[str, object], body: bytes) -> bool:
        if super().complete_json(fields, body):
            raise ValueError("completion handler bug")
        return False

    def complete(self, response: RemotingCommand | None = None, error: RemotingError | None = None) -> None:
        super().complete(response, error)
        raise ValueError("completion handler bug")


async def test_an_invocation_raising_on_its_timeout_is_logged_and_the_sweep_goes_on(
    autojump_clock, caplog: pytest.LogCaptureFixture
):
    """An :class:`~remoting.future.Invocation` whose completion raises must not end the connection, nor keep the
    invocations expiring with it from their timeout (Java's ``scanResponseTable`` catches per callback)."""
    raising, after = _RaisingOnCompletion(None), _Recording(None)
    with caplog.at_level(logging.ERROR):
        async with trio.open_nursery() as nursery:
            conn = _run_pair(nursery)
            conn.invoke_frame_future(5, encode_json_request(SILENT, 5, {}, b""), raising, 2.0)
            conn.invoke_frame_future(6, encode_json_request(SILENT, 6, {}, b""), after, 2.0)
            await trio.sleep(3)
            assert not conn.closed and conn.pending_invocations == 0
            nursery.cancel_scope.cancel()
    assert raising.outcomes == after.outcomes == ["timeout"]
    assert "completion handler bug" in caplog.text


async def _client_and_peer(client: RemotingClient) -> tuple[str, RawPeer, trio.socket.SocketType]:
    """``client`` connected to a bare frame-level peer on 127.0.0.1 port 0 (the test writes its answers); returns
    the address, the peer and its listening socket (the caller closes both)."""
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    host, port = listener.getsockname()[:2]
    address = f"{host}:{port}"
    await client.connection(address)
    sock, _ = await listener.accept()
    await trio.testing.wait_all_tasks_blocked()  # the connection runs: its reader, writer and sweeper wait
    return address, RawPeer(trio.SocketStream(sock)), listener


async def test_a_response_callback_that_closes_the_connection_leaves_the_other_invocations_completed_once():
    """Two answers arrive in one read; the first one's callback closes the connection, which fails the other
    invocation. The second answer, still in the read, must find nothing left to complete: an invocation is
    completed once (``client.async_send.AsyncSend`` would otherwise retry the send, a duplicate message, and report
    the answer as well)."""
    other = _Recording(None)
    first_outcomes: list[object] = []
    async with RemotingClient() as client:
        address, peer, listener = await _client_and_peer(client)

        def close_on_answer(outcome: RemotingCommand | RemotingError) -> None:
            first_outcomes.append(outcome)
            client.close_connection(address)

        client.invoke_callback(address, request(ECHO, body=b"a"), 5.0, close_on_answer, plain=True)
        assert client.invoke_frame_future(address, 4242, encode_json_request(ECHO, 4242, {}, b"b"), other, 5.0)
        first, second = await peer.receive(), await peer.receive()
        assert first is not None and second is not None and second.opaque == 4242
        await peer.send(first.response(ResponseCode.SUCCESS), second.response(ResponseCode.SUCCESS))  # one write
        with trio.fail_after(5):
            while not first_outcomes:
                await trio.sleep(0.001)
        await trio.testing.wait_all_tasks_blocked()
        await peer.aclose()
        listener.close()
    assert len(first_outcomes) == 1 and isinstance(first_outcomes[0], RemotingCommand)
    assert len(other.outcomes) == 1 and isinstance(other.outcomes[0], RemotingConnectError), other.outcomes


async def test_close_tells_every_pending_invocation_even_when_one_raises(autojump_clock):
    """Close fails every pending invocation, as the sweeper times them out: one whose completion raises is logged,
    close() itself does not raise, and the invocations after it are still told (an ``invoke`` waiting on the
    connection would otherwise wait for ever, its sweeper gone with the connection)."""
    raising = _RaisingOnCompletion(None)
    outcome: list[object] = []
    raised: list[BaseException] = []
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        address, peer, listener = await _client_and_peer(client)
        client.connections[address].invoke_frame_future(7, encode_json_request(SILENT, 7, {}, b""), raising, 30.0)

        async def waiter() -> None:
            try:
                await client.invoke(address, request(SILENT), 30.0)
            except RemotingError as exc:
                outcome.append(exc)

        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        try:
            client.close_connection(address)
        except Exception as exc:  # what the caller of close() gets
            raised.append(exc)
        with trio.move_on_after(600):  # virtual: twenty times the invocation's timeout
            while not outcome:
                await trio.sleep(1)
        nursery.cancel_scope.cancel()
        await peer.aclose()
        listener.close()
    assert raised == [], f"close() raised {raised!r}"
    assert len(raising.outcomes) == 1 and isinstance(raising.outcomes[0], RemotingConnectError)
    assert len(outcome) == 1 and isinstance(outcome[0], RemotingConnectError), "the waiting invoke was never told"


async def test_an_invocation_raising_on_its_answer_is_logged_and_the_client_lives_on(
    caplog: pytest.LogCaptureFixture,
):
    """The reader hands answers to invocations too: what one raises, taking its answer from the JSON header or as
    a command, is logged; the invocation is not told again, and neither the connection nor the client's task group
    ends."""
    taking, declining = _RaisingOnCompletion("1"), _RaisingOnCompletion(None)
    crashed: list[BaseException] = []
    with caplog.at_level(logging.ERROR):
        try:
            async with RemotingClient() as client:
                address, peer, listener = await _client_and_peer(client)
                assert client.invoke_frame_future(address, 8, encode_json_request(ECHO, 8, {}, b"a"), taking, 5.0)
                assert client.invoke_frame_future(address, 9, encode_json_request(ECHO, 9, {}, b"b"), declining, 5.0)
                for _ in range(2):
                    sent = await peer.receive()
                    assert sent is not None
                    await peer.send(sent.response(ResponseCode.SUCCESS, ext_fields={"x": "1"}, body=sent.body))
                with trio.fail_after(5):
                    while not (taking.outcomes and declining.outcomes):
                        await trio.sleep(0.001)
                await trio.testing.wait_all_tasks_blocked()
                assert address in client.connections and not client.connections[address].closed
                assert client.connections[address].pending_invocations == 0
                await peer.aclose()
                listener.close()
        except BaseException as exc:  # what the client's task group let out
            crashed.append(exc)
    assert crashed == [], f"the client's task group ended with {crashed!r}"
    assert taking.outcomes == [("json", 8, b"a")]
    (command,) = declining.outcomes
    assert isinstance(command, RemotingCommand) and command.opaque == 9
    logged = [r for r in caplog.records if r.exc_info is not None and isinstance(r.exc_info[1], ValueError)]
    assert len(logged) == 2
