"""Our Connection passes the transport conformance check over every kind of Trio stream pair."""

from __future__ import annotations

import socket

import pytest
import trio
import trio.testing

from remoting import connection
from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.frame import FrameDecoder, encode_command
from remoting.connection import SEND_HIGH_WATER, Connection
from remoting.dispatch import RequestContext
from remoting.errors import RemotingClosedError, RemotingTimeoutError
from tests.remoting.conformance import check_connection_pair
from tests.remoting.helpers import CountingSocket, tcp_pair


def _socketpair_connection(
    sndbuf: int | None = None,
) -> tuple[Connection, socket.socket, trio.SocketStream, socket.socket]:
    """A connection over one end of a socket pair (its raw twin for direct writes, ``sndbuf`` bytes of send buffer
    when given), the peer's stream and the peer's socket."""
    a, b = socket.socketpair()
    if sndbuf is not None:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    a.setblocking(False)
    raw = socket.fromfd(a.fileno(), a.family, a.type)
    conn = Connection(trio.SocketStream(trio.socket.from_stdlib_socket(a)), ("peer", 1), ("me", 2), raw_socket=raw)
    return conn, raw, trio.SocketStream(trio.socket.from_stdlib_socket(b)), b


async def test_connection_conforms_over_memory_streams():
    await check_connection_pair(*trio.testing.memory_stream_pair())


async def test_connection_conforms_over_lockstep_streams():
    await check_connection_pair(*trio.testing.lockstep_stream_pair())


async def test_connection_conforms_over_real_sockets():
    a, b = trio.socket.socketpair()
    await check_connection_pair(trio.SocketStream(a), trio.SocketStream(b))


async def test_idle_connection_closes_without_read_or_write_over_memory_streams(autojump_clock):
    left_stream, right_stream = trio.testing.memory_stream_pair()
    conn = Connection(left_stream, ("peer", 1), ("me", 2), idle_timeout=10.0)
    other = Connection(right_stream, ("me", 2), ("peer", 1))

    async def ignore(ctx: RequestContext, cmd: object) -> None:
        return None

    closed_at: list[float] = []

    async def run_and_record() -> None:
        await conn.run(ignore)
        closed_at.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other.run, ignore)
        start = trio.current_time()
        nursery.start_soon(run_and_record)
        await trio.sleep(6)
        await conn.send(request(1, oneway=True))  # a write counts as activity: the deadline moves to 16 s
        await trio.sleep(9)
        assert not conn.closed
        await trio.sleep(2)
        assert conn.closed and closed_at == [start + 16.0]
        nursery.cancel_scope.cancel()


class _Silent:
    """A peer that reads and never answers."""

    async def on_request(self, ctx: RequestContext, cmd: object) -> None:
        return None


async def test_earlier_invocation_deadline_fires_first_even_after_a_later_one(autojump_clock):
    left_stream, right_stream = trio.testing.memory_stream_pair()
    conn = Connection(left_stream, ("peer", 1), ("me", 2))
    other = Connection(right_stream, ("me", 2), ("peer", 1))
    timed_out_at: dict[str, float] = {}

    async def invoke(name: str, timeout: float) -> None:
        with pytest.raises(RemotingTimeoutError):
            await conn.invoke(request(1), timeout)
        timed_out_at[name] = trio.current_time()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other.run, _Silent().on_request)
        nursery.start_soon(conn.run, _Silent().on_request)
        start = trio.current_time()
        nursery.start_soon(invoke, "long", 100.0)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(invoke, "short", 1.0)
        while len(timed_out_at) < 2:
            await trio.sleep(1)
        assert timed_out_at == {"short": start + 1.0, "long": start + 100.0}
        assert conn.pending_invocations == 0 and not conn.closed
        nursery.cancel_scope.cancel()


async def test_send_waits_above_the_high_water_mark_until_the_peer_reads():
    left_stream, right_stream = trio.testing.lockstep_stream_pair()  # send_all blocks until the peer reads
    conn = Connection(left_stream, ("peer", 1), ("me", 2))
    big = request(1, body=b"x" * (1024 * 1024), oneway=True)
    sent = 0

    async def sender() -> None:
        nonlocal sent
        for _ in range(8):
            await conn.send(big)
            sent += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run, _Silent().on_request)
        nursery.start_soon(sender)
        await trio.testing.wait_all_tasks_blocked()
        assert 3 <= sent < 8  # about SEND_HIGH_WATER (4 MiB) queued or in flight, then the sender waits
        decoder = FrameDecoder()
        received = 0
        while received < 8:
            decoder.receive_data(await right_stream.receive_some())
            while decoder.next_command() is not None:
                received += 1
        await trio.testing.wait_all_tasks_blocked()
        assert sent == 8
        nursery.cancel_scope.cancel()


async def test_invoke_and_a_timed_oneway_give_up_on_their_timeout_behind_a_backlog_the_peer_does_not_read(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The invocation's timeout covers the wait behind the backlog (a call to a peer that stopped reading used to
    wait for the backlog to drain before its timeout started, so it never returned); a oneway given a timeout waits
    for the backlog at most that long and leaves its frame queued."""
    left_stream, _right_stream = trio.testing.lockstep_stream_pair()  # the peer never reads
    conn = Connection(left_stream, ("peer", 1), ("me", 2))
    backlog = request(1, body=b"x" * SEND_HIGH_WATER, oneway=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run, _Silent().on_request)
        await trio.testing.wait_all_tasks_blocked()
        conn.send_nowait(backlog)  # the writer takes it and blocks in send_all
        await trio.testing.wait_all_tasks_blocked()
        conn.send_nowait(backlog)  # queued behind it
        assert conn.congested
        start = trio.current_time()
        with trio.fail_after(60), pytest.raises(RemotingTimeoutError):  # virtual seconds
            await conn.invoke(request(2), timeout=3.0)
        assert trio.current_time() == start + 3.0
        with trio.fail_after(60):
            await conn.invoke_oneway(request(3), timeout=2.0)
        assert trio.current_time() == start + 5.0
        assert conn.congested and not conn.closed and conn.pending_invocations == 0
        nursery.cancel_scope.cancel()


async def test_invoke_on_a_connection_that_never_runs_times_out(autojump_clock: trio.testing.MockClock) -> None:
    """Without :meth:`Connection.run` there is no sweeper (a stand-in such as a 5.x client's channel, whose
    writes go nowhere): invoke and invoke_frame still give up at their deadline and leave nothing pending."""
    left_stream, _right_stream = trio.testing.lockstep_stream_pair()
    conn = Connection(left_stream, ("peer", 1), ("me", 2))
    start = trio.current_time()
    with trio.fail_after(60), pytest.raises(RemotingTimeoutError):  # virtual seconds
        await conn.invoke(request(2), timeout=3.0)
    assert trio.current_time() == start + 3.0
    encoded = request(3)
    with trio.fail_after(60), pytest.raises(RemotingTimeoutError):
        await conn.invoke_frame(encoded.opaque, 3, encode_command(encoded), 2.0, lambda fields, body: None)
    assert trio.current_time() == start + 5.0
    assert not conn.closed and conn.pending_invocations == 0


async def test_direct_write_that_fills_the_socket_leaves_the_rest_to_the_writer():
    conn, raw, peer, _ = _socketpair_connection(sndbuf=4096)
    body = bytes(range(256)) * 4096  # 1 MiB: far more than the socket takes at once
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run, _Silent().on_request)
        await trio.testing.wait_all_tasks_blocked()
        await conn.send(request(7, body=body, oneway=True))
        await conn.send(request(8, body=b"after", oneway=True))
        decoder = FrameDecoder()
        got = []
        while len(got) < 2:
            decoder.receive_data(await peer.receive_some())
            while (cmd := decoder.next_command()) is not None:
                got.append(cmd)
        assert [c.code for c in got] == [7, 8]
        assert bytes(got[0].body) == body and got[1].body == b"after"
        conn.close()
    assert raw.fileno() == -1  # the duplicate descriptor is closed with the connection


async def test_send_on_a_closed_connection_raises_closed_error():
    left_stream, _ = trio.testing.memory_stream_pair()
    conn = Connection(left_stream, ("peer", 1), ("me", 2))
    conn.close()
    with pytest.raises(RemotingClosedError):
        await conn.send(request(1))
    with pytest.raises(RemotingClosedError):
        await conn.invoke(request(1), 1.0)
    await conn.run(_Silent().on_request)  # returns at once and closes the stream


async def test_frames_queued_in_one_pass_arrive_in_order_through_direct_and_writer_flushes():
    conn, _, peer, _ = _socketpair_connection()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run, _Silent().on_request)
        await trio.testing.wait_all_tasks_blocked()
        # No checkpoint in between: direct first write, direct batches of 8, 16, 32, 64, 64..., the writer's rest.
        for i in range(300):
            await conn.send(request(1, {"i": str(i)}, oneway=True))
        decoder = FrameDecoder()
        got: list[str] = []
        while len(got) < 300:
            decoder.receive_data(await peer.receive_some())
            while (cmd := decoder.next_command()) is not None:
                got.append(cmd.ext_fields["i"])
        assert got == [str(i) for i in range(300)]
        conn.close()


async def test_held_frames_leave_in_one_write_on_release_and_later_frames_queue_behind_them():
    a, b = tcp_pair()
    raw = CountingSocket.twin_of(a)
    conn = Connection(trio.SocketStream(trio.socket.from_stdlib_socket(a)), ("peer", 1), ("me", 2), raw_socket=raw)
    peer = trio.SocketStream(trio.socket.from_stdlib_socket(b))
    frames = [encode_command(request(1, {"i": str(i)}, oneway=True)) for i in range(21)]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run, _Silent().on_request)
        await trio.testing.wait_all_tasks_blocked()
        assert [conn.hold_frame(frame) for frame in frames[:20]] == [True] + [False] * 19
        conn.send_frame_nowait(frames[20])  # not before the held ones
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(BlockingIOError):
            b.recv(1, socket.MSG_DONTWAIT)  # nothing written while held
        assert raw.sends == 0
        conn.release_held()
        assert raw.sends == 1
        decoder = FrameDecoder()
        got: list[str] = []
        while len(got) < 21:
            decoder.receive_data(await peer.receive_some())
            while (cmd := decoder.next_command()) is not None:
                got.append(cmd.ext_fields["i"])
        assert got == [str(i) for i in range(21)]
        assert conn.hold_frame(frames[0])  # a new pass starts holding afresh
        conn.release_held()
        sends = raw.sends
        conn.hold()  # every frame written until the release leaves in one write
        for frame in frames[:5]:
            conn.send_frame_nowait(frame)
        await trio.testing.wait_all_tasks_blocked()
        assert raw.sends == sends
        conn.release_held()
        assert raw.sends == sends + 1
        got = []
        while len(got) < 6:
            decoder.receive_data(await peer.receive_some())
            while (cmd := decoder.next_command()) is not None:
                got.append(cmd.ext_fields["i"])
        assert got == ["0", "0", "1", "2", "3", "4"]
        conn.close()
    with pytest.raises(RemotingClosedError):
        conn.hold_frame(frames[0])


async def test_held_answers_released_while_the_writer_is_stuck_mid_frame_arrive_whole_and_in_order():
    # The two writers of one connection: the Trio-side writer task, stuck in a partial write of a large frame (the
    # peer does not read yet, the send buffer is small), and a group commit's release pass that holds and releases
    # answers meanwhile. No byte of the answers may land inside the large frame, and none may be lost or reordered.
    conn, _, peer, b = _socketpair_connection(sndbuf=4096)
    body = bytes(range(256)) * 2048  # 512 KiB: the first write takes a part of it, the writer task the rest
    answers = [encode_command(request(2, {"i": str(i)}, oneway=True)) for i in range(40)]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run, _Silent().on_request)
        await trio.testing.wait_all_tasks_blocked()
        await conn.send(request(1, body=body, oneway=True))
        await trio.testing.wait_all_tasks_blocked()  # the writer task now waits for the socket, mid frame
        decoder = FrameDecoder()
        for round_ in range(4):  # four release passes, each with a frame written between hold and release
            # The peer reads a part: the socket takes bytes again before the writer task has run.
            decoder.receive_data(b.recv(16384, socket.MSG_DONTWAIT))
            chunk = answers[round_ * 10 : round_ * 10 + 10]
            for frame in chunk[:5]:
                conn.hold_frame(frame)
            conn.send_frame_nowait(chunk[5])
            for frame in chunk[6:]:
                conn.hold_frame(frame)
            conn.release_held()
            await trio.testing.wait_all_tasks_blocked()
        got = []
        while len(got) < 41:
            decoder.receive_data(await peer.receive_some())
            while (cmd := decoder.next_command()) is not None:
                got.append(cmd)
        assert got[0].code == 1 and bytes(got[0].body) == body
        assert [c.ext_fields["i"] for c in got[1:]] == [str(i) for i in range(40)]
        conn.close()


async def test_releasing_held_frames_wakes_a_reader_paused_on_the_byte_budget():
    """The reader stops while the bytes held for the connection exceed ``max_buffered_bytes``; once they are written
    (here by :meth:`Connection.release_held`, which writes them straight to the socket), it must read again."""
    left, right = socket.socketpair()
    raw = left.dup()
    raw.setblocking(False)
    conn = Connection(
        trio.SocketStream(trio.socket.from_stdlib_socket(left)), ("peer", 1), ("me", 2),
        raw_socket=raw, max_buffered_bytes=4096,
    )  # fmt: skip
    peer = trio.SocketStream(trio.socket.from_stdlib_socket(right))
    seen: list[RemotingCommand] = []

    async def answer(ctx: RequestContext, cmd: RemotingCommand) -> None:
        seen.append(cmd)
        ctx.connection.hold()  # as a group commit's release pass holds its answers
        ctx.connection.send_nowait(cmd.response(ResponseCode.SUCCESS, body=b"x" * 8192))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run, answer)
        await trio.testing.wait_all_tasks_blocked()  # the writer is idle
        await peer.send_all(encode_command(request(1, opaque=1)))
        await trio.testing.wait_all_tasks_blocked()
        assert len(seen) == 1 and conn.buffered_bytes > 4096  # paused: the held answer is over the budget
        conn.release_held()  # written now, straight to the socket
        assert conn.buffered_bytes == 0
        await peer.send_all(encode_command(request(1, opaque=2)))
        await trio.testing.wait_all_tasks_blocked()
        assert len(seen) == 2, "the reader never resumed although nothing is held any more"
        nursery.cancel_scope.cancel()


async def test_a_sender_waiting_for_the_drain_goes_on_when_released_frames_leave_straight_to_the_socket(
    monkeypatch: pytest.MonkeyPatch,
):
    """:meth:`Connection.send` waits while more than SEND_HIGH_WATER bytes are queued; when
    :meth:`Connection.release_held` writes all of them straight to the socket, the writer has nothing left to write,
    so the release itself must let the sender go on. The mark is lowered to 64 KiB here so that the whole backlog
    fits a socket's send buffer on any kernel (stock ones cap it at 208 KiB, below the real 4 MiB mark)."""
    high_water = 64 * 1024
    monkeypatch.setattr(connection, "SEND_HIGH_WATER", high_water)
    backlog = request(1, body=b"x" * (high_water + 1), oneway=True)
    conn, _, _, _ = _socketpair_connection(sndbuf=2 * high_water)  # the kernel doubles it: the backlog fits
    sent: list[int] = []

    async def sender() -> None:
        await conn.send(request(2, oneway=True))
        sent.append(2)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run, _Silent().on_request)
        await trio.testing.wait_all_tasks_blocked()  # the writer is idle
        conn.hold()
        conn.send_nowait(backlog)
        nursery.start_soon(sender)
        await trio.testing.wait_all_tasks_blocked()
        assert not sent  # held behind the backlog: waits for the drain
        conn.release_held()
        assert conn.buffered_bytes == 0  # all of it went straight to the socket
        await trio.testing.wait_all_tasks_blocked()
        assert sent == [2], "the sender still waits although nothing is queued any more"
        nursery.cancel_scope.cancel()
