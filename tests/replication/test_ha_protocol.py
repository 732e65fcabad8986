"""The HA protocol byte for byte (docs/protocol.md#13-masterslave-replication), both directions, against the real
master connection and slave client over in-memory streams in virtual time: the 8-byte reports, the 12-byte frame
headers, a record split across two frames, heartbeats, housekeeping and the offset checks; and over a real socket,
a slave whose master resets the connection."""

from __future__ import annotations

import contextlib
import itertools
import socket
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from store.ha.frames import (
    REPORT_SIZE,
    Frame,
    FrameReader,
    HAProtocolError,
    ReportReader,
    encode_frame,
    encode_header,
    encode_report,
    first_transfer_offset,
    frame_size,
)
from store.ha.service import HAService
from store.ha.slave import HAClient
from store.message_store import MessageStore
from store.store_config import BrokerRole
from tests.replication.ha_helpers import ha_store, read_exactly, wait_until
from tests.store.store_helpers import message


def test_a_report_is_a_big_endian_int64() -> None:
    assert encode_report(0x0102030405060708) == bytes.fromhex("0102030405060708")
    assert encode_report(0) == bytes(8)


def test_a_frame_header_is_an_int64_offset_then_an_int32_size() -> None:
    assert encode_header(2147483648, 32768) == bytes.fromhex("00000000 80000000  00008000")
    assert encode_header(77, 0) == bytes.fromhex("00000000 0000004d  00000000")  # a heartbeat
    assert encode_frame(5, b"abc") == bytes.fromhex("00000000 00000005  00000003") + b"abc"


def test_the_master_takes_the_newest_complete_report_and_keeps_a_partial_one() -> None:
    reader = ReportReader()
    assert reader.feed(encode_report(7)[:3]) is None
    assert reader.feed(encode_report(7)[3:]) == 7
    # Two queued reports and half of a third: the second counts, the third waits.
    assert reader.feed(encode_report(10) + encode_report(20) + encode_report(30)[:4]) == 20
    assert reader.feed(encode_report(30)[4:]) == 30


def test_the_slave_reassembles_frames_split_anywhere() -> None:
    stream = encode_frame(100, b"x" * 40) + encode_header(140, 0) + encode_frame(140, b"yz")
    for cut in range(1, len(stream)):
        reader = FrameReader()
        frames = reader.feed(stream[:cut]) + reader.feed(stream[cut:])
        assert frames == [Frame(100, b"x" * 40), Frame(140, b""), Frame(140, b"yz")]
        assert reader.buffered == 0


@pytest.mark.parametrize("header", [encode_header(0, -1), encode_header(0, (4 << 20) + 1), encode_header(-5, 0)])
def test_a_frame_no_master_sends_is_a_protocol_error(header: bytes) -> None:
    with pytest.raises(HAProtocolError):
        FrameReader().feed(header)


def test_transfer_starts_at_the_report_or_the_current_segment_for_an_empty_slave() -> None:
    assert first_transfer_offset(0, 3 * 4096 + 100, 4096) == 3 * 4096
    assert first_transfer_offset(5000, 3 * 4096 + 100, 4096) == 5000
    assert first_transfer_offset(0, 0, 4096) == 0
    assert frame_size(100, 4096, 32768) == 3996
    assert frame_size(100, 4096, 1000) == 1000
    assert frame_size(4096, 4096, 1000) == 0


async def _read_frame(stream: trio.abc.ReceiveStream) -> tuple[bytes, int, int, bytes]:
    header = await read_exactly(stream, 12)
    offset, size = struct.unpack(">qi", header)
    return header, offset, size, await read_exactly(stream, size)


def _master_with_two_records(root: Path, batch: int, **overrides: Any) -> tuple[MessageStore, int, int]:
    master = ha_store(root, BrokerRole.ASYNC_MASTER, ha_transfer_batch_size=batch, **overrides)
    first = master.append(message(body=b"a" * 150))
    second = master.append(message(body=b"b" * 150))
    return master, first.size, second.size


Served = tuple[
    HAService, "trio.StapledStream[trio.testing.MemorySendStream, trio.testing.MemoryReceiveStream]", int, int
]


@contextlib.asynccontextmanager
async def _served_master(root: Path, batch: int = 32768, **overrides: Any) -> AsyncIterator[Served]:
    """A master (with ``overrides`` of its settings) with two records serving one connection whose other end (the
    slave's) is yielded, after the slave's first report (0). Leaving the block waits for the connection to end (at
    most 60 s)."""
    master, size1, size2 = _master_with_two_records(root, batch, **overrides)
    service = HAService(master)
    ours, theirs = trio.testing.memory_stream_pair()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(service.serve_connection, theirs, "slave")
            await ours.send_all(encode_report(0))
            yield service, ours, size1, size2
    master.close()


async def _until_closed(stream: trio.abc.ReceiveStream) -> None:
    while await stream.receive_some(4096):
        pass


async def test_master_frames_split_a_record_across_two_chunks_then_heartbeat(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with _served_master(tmp_path, batch=300) as (service, ours, size1, size2):
        commitlog = service.store.commitlog
        assert size1 < 300 < size1 + size2  # the second record straddles the frame boundary
        header, offset, size, body = await _read_frame(ours)
        assert header == bytes.fromhex("00000000 00000000  0000012c")
        assert (offset, size, body) == (0, 300, bytes(commitlog.read(0, 300) or b""))
        header, offset, size, body = await _read_frame(ours)
        rest = size1 + size2 - 300
        assert header == struct.pack(">qi", 300, rest)
        assert body == bytes(commitlog.read(300, rest) or b"")
        start = trio.current_time()
        header, offset, size, body = await _read_frame(ours)  # nothing more: a heartbeat after 5 s idle
        assert (header, body) == (encode_header(size1 + size2, 0), b"")
        assert trio.current_time() - start == pytest.approx(5.0, abs=0.2)
        # The slave acknowledges; SYNC_MASTER bookkeeping moves.
        await ours.send_all(encode_report(size1 + size2))
        await trio.sleep(0.1)
        assert service.push2slave_max_offset == size1 + size2
        assert service.connections[0].ack_offset == size1 + size2
        await ours.aclose()


async def test_a_zero_heartbeat_interval_has_the_master_heartbeat_every_100_ms(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ's WriteSocketService with ``haSendHeartbeatInterval=0`` heartbeats on each pass of its loop, which
    waits 100 ms when there is nothing to send: heartbeats 100 ms apart, not a busy loop."""
    async with _served_master(tmp_path, ha_send_heartbeat_interval=0) as (_service, ours, size1, size2):
        await _read_frame(ours)  # both records
        await _read_frame(ours)  # the first heartbeat
        start = trio.current_time()
        header, _offset, _size, body = await _read_frame(ours)
        assert (header, body) == (encode_header(size1 + size2, 0), b"")
        assert trio.current_time() - start == pytest.approx(0.1, abs=0.01)
        await ours.aclose()


async def test_master_writes_every_frame_that_accumulated_in_one_write(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Frames of at most ``haTransferBatchSize`` each, RocketMQ's bytes, but all the readable ones in one write."""
    master, _size1, _size2 = _master_with_two_records(tmp_path, batch=100)
    for _ in range(3):
        master.append(message(body=b"c" * 150))
    end = master.commitlog.max_offset
    service = HAService(master)
    ours, theirs = trio.testing.memory_stream_pair()
    send, receive = theirs.send_stream, ours.receive_stream
    writes: list[bytes] = []

    async def pump() -> None:  # what memory_stream_pair's hook does, recording each write's bytes
        data = send.get_data_nowait()
        writes.append(data)
        receive.put_data(data)

    send.send_all_hook = pump
    async with trio.open_nursery() as nursery:
        nursery.start_soon(service.serve_connection, theirs, "slave")
        await ours.send_all(encode_report(0))
        await trio.sleep(1)
        assert len(writes) == 1
        frames = FrameReader().feed(writes[0])
        assert len(frames) == -(-end // 100) and all(len(f.body) <= 100 for f in frames)
        assert [f.offset for f in frames] == list(range(0, end, 100))
        assert b"".join(f.body for f in frames) == bytes(master.commitlog.read(0, end) or b"")
        # Nothing more until the next append, which goes out in a write of its own.
        master.append(message(body=b"d" * 10))
        await trio.sleep(1)
        assert len(writes) == 2 and FrameReader().feed(writes[1])[0].offset == end
        nursery.cancel_scope.cancel()
    master.close()


async def test_master_closes_a_silent_slave_after_housekeeping(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with _served_master(tmp_path) as (service, ours, _size1, _size2):
        start = trio.current_time()
        await _read_frame(ours)
        await _until_closed(ours)  # heartbeats until the master gives up on us
        assert trio.current_time() - start == pytest.approx(20.0, abs=0.5)
    assert service.connections == []


async def test_master_drops_a_slave_reporting_beyond_its_end(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with _served_master(tmp_path) as (service, ours, size1, size2):
        await _read_frame(ours)
        start = trio.current_time()
        await ours.send_all(encode_report(size1 + size2 + 1))
        await _until_closed(ours)
        assert trio.current_time() - start < 1
    assert service.connections == []


class _FakeMaster:
    """Plays the master for a slave client: each connect the client makes yields the master's end of a new
    in-memory connection on :attr:`accepted`."""

    def __init__(self) -> None:
        self.streams: trio.MemorySendChannel[trio.abc.Stream]
        self.streams, self.accepted = trio.open_memory_channel[trio.abc.Stream](10)
        self.connects = 0

    async def connect(self, address: str) -> trio.abc.Stream:
        assert address == "127.0.0.1:10912"
        self.connects += 1
        ours, theirs = trio.testing.memory_stream_pair()
        await self.streams.send(ours)
        return theirs


@contextlib.asynccontextmanager
async def _slave_client(
    root: Path, **overrides: Any
) -> AsyncIterator[tuple[MessageStore, _FakeMaster, bytes, int, int]]:
    """A slave store (with ``overrides`` of its settings) whose HA client runs against a :class:`_FakeMaster`, with
    the bytes of a two-record log to feed it and the two record sizes."""
    source, size1, size2 = _master_with_two_records(root / "source", batch=32768)
    data = bytes(source.commitlog.read(0, size1 + size2) or b"")
    source.close()
    slave = ha_store(root / "slave", BrokerRole.SLAVE, ha_master_address="127.0.0.1:10912", **overrides)
    assert slave.replica is not None
    fake = _FakeMaster()
    client = HAClient(lambda: slave.config, slave.replica, connect=fake.connect)
    slave.ha.client = client  # the store's runtime info reads it
    async with trio.open_nursery() as nursery:
        await nursery.start(client.run)
        yield slave, fake, data, size1, size2
        nursery.cancel_scope.cancel()
    slave.close()


async def test_slave_reports_at_once_appends_frames_and_reports_its_new_end(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with _slave_client(tmp_path) as (slave, fake, data, size1, size2):
        stream = await fake.accepted.receive()
        assert await read_exactly(stream, 8) == encode_report(0)
        # The first record and 100 bytes of the second: the slave stores them and reports (before dispatching),
        # then dispatches the one whole record.
        assert slave.ha.runtime_info()["haMasterMaxOffset"] == "-1"
        await stream.send_all(encode_frame(0, data[: size1 + 100]))
        assert await read_exactly(stream, 8) == encode_report(size1 + 100)
        await wait_until(lambda: slave.max_offset_in_queue("TopicTest", 0) == 1, 1, "the first record's dispatch")
        await trio.sleep(0.5)
        assert slave.max_offset_in_queue("TopicTest", 0) == 1  # the partial second record waits
        # The master's end as the frames show it: no lag; the metadata sync may know better.
        info = slave.ha.runtime_info()
        assert (info["haMasterMaxOffset"], info["haSlaveLagBytes"]) == (str(size1 + 100), "0")
        assert 500 <= int(info["haMasterMaxOffsetAgeMs"]) < 600  # learned before the 0.5 s sleep
        slave.ha.note_master_offset(size1 + size2 + 4000)
        assert slave.ha.runtime_info()["haSlaveLagBytes"] == str(size2 - 100 + 4000)
        await stream.send_all(encode_header(size1 + 100, 0) + encode_frame(size1 + 100, data[size1 + 100 :]))
        assert await read_exactly(stream, 8) == encode_report(size1 + size2)
        assert slave.ha.runtime_info()["haSlaveLagBytes"] == "4000"  # a frame's end never lowers what is known
        await wait_until(lambda: slave.max_offset_in_queue("TopicTest", 0) == 2, 1, "the second record's dispatch")
        assert bytes(slave.commitlog.read(0, size1 + size2) or b"") == data
        # Idle: the slave repeats its report every 5 s.
        start = trio.current_time()
        assert await read_exactly(stream, 8) == encode_report(size1 + size2)
        assert trio.current_time() - start == pytest.approx(5.0, abs=0.2)


async def test_slave_drops_a_frame_at_the_wrong_offset_and_reconnects(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with _slave_client(tmp_path) as (_slave, fake, data, size1, _size2):
        stream = await fake.accepted.receive()
        await read_exactly(stream, 8)
        await stream.send_all(encode_frame(0, data[:size1]))
        assert await read_exactly(stream, 8) == encode_report(size1)
        await stream.send_all(encode_header(size1 + 7, 0))  # a heartbeat at an offset the slave is not at
        with trio.fail_after(5):
            await _until_closed(stream)  # the slave ends the session...
        again = await fake.accepted.receive()  # ...and connects again, reporting where it is
        assert await read_exactly(again, 8) == encode_report(size1)
        assert fake.connects == 2


async def test_slave_gives_up_on_a_silent_master_after_housekeeping(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with _slave_client(tmp_path) as (_slave, fake, _data, _size1, _size2):
        stream = await fake.accepted.receive()
        start = trio.current_time()
        await _until_closed(stream)  # reports every 5 s, then the close
        assert trio.current_time() - start == pytest.approx(20.0, abs=0.5)
        await fake.accepted.receive()
        assert fake.connects == 2


async def test_a_zero_heartbeat_interval_has_the_slave_report_once_a_second(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ's HAClient with ``haSendHeartbeatInterval=0`` reports on each pass of its loop, which waits in
    ``selector.select(1000)``: an idle slave reports once a second, it does not spin."""
    async with _slave_client(tmp_path, ha_send_heartbeat_interval=0) as (_slave, fake, _data, _size1, _size2):
        stream = await fake.accepted.receive()
        await read_exactly(stream, 8)
        start = trio.current_time()
        await read_exactly(stream, 8)
        assert trio.current_time() - start == pytest.approx(1.0, abs=0.05)


async def test_a_zero_heartbeat_interval_has_the_slave_back_off_between_failed_connects(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The reconnect back-off grows from a tenth of the heartbeat interval, counted as 1 s at least: with 0 the
    attempts still come 0.1 s, 0.2 s, 0.4 s apart rather than in a busy loop."""
    slave = ha_store(tmp_path, BrokerRole.SLAVE, ha_master_address="127.0.0.1:10912", ha_send_heartbeat_interval=0)
    assert slave.replica is not None
    attempts: list[float] = []

    async def refused(address: str) -> trio.abc.Stream:
        attempts.append(trio.current_time())
        if len(attempts) == 4:
            await trio.sleep_forever()
        raise ConnectionRefusedError(address)

    async with trio.open_nursery() as nursery:
        await nursery.start(HAClient(lambda: slave.config, slave.replica, connect=refused).run)
        await wait_until(lambda: len(attempts) == 4, 10, "four connects")
        nursery.cancel_scope.cancel()
    slave.close()
    gaps = [later - earlier for earlier, later in itertools.pairwise(attempts)]
    assert gaps == pytest.approx([0.1, 0.2, 0.4], abs=0.02)


async def test_a_slave_reconnects_after_its_master_resets_the_connection(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A master that dies with the slave's unread reports in its socket (a SIGKILL, a host reset) answers with a TCP
    RST: the slave's read fails with ECONNRESET. As RocketMQ's HAClient.processReadEvent catches the IOException,
    closes the connection and connects again, the slave's session ends, not its store."""
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    slave = ha_store(tmp_path, BrokerRole.SLAVE, ha_master_address=f"127.0.0.1:{port}")
    crashed: list[BaseException] = []

    async def run_slave(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await slave.run(task_status=task_status)
        except Exception as exc:
            crashed.append(exc)

    reconnected = b""
    async with trio.open_nursery() as nursery:
        await nursery.start(run_slave)
        first = await listener.accept()
        assert await read_exactly(first, REPORT_SIZE) == encode_report(0)
        first.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await first.aclose()  # closed with a linger of 0: the slave gets a RST
        with trio.move_on_after(30):
            second = await listener.accept()
            reconnected = await read_exactly(second, REPORT_SIZE)
        nursery.cancel_scope.cancel()
    slave.close()
    assert not crashed, f"the slave's store ended with {crashed[0]!r}"
    assert reconnected == encode_report(0)


async def test_a_slave_its_master_refuses_reconnects_once_a_heartbeat_interval_at_most(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A master that closes every connection after the slave's report (ours refuses a slave ahead of its log) must
    not have the slave reconnect twice a second for ever, the master logging a refusal each time: RocketMQ's
    HAClient (store/src/main/java/org/apache/rocketmq/store/ha/HAService.java) reports only a heartbeat interval
    after it connected, so a refused slave comes back once per ``haSendHeartbeatInterval`` (5 s)."""
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    slave = ha_store(tmp_path, BrokerRole.SLAVE, ha_master_address=f"127.0.0.1:{port}")
    accepted: list[float] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(slave.run)
        with trio.move_on_after(60):
            while True:
                stream = await listener.accept()
                accepted.append(trio.current_time())
                await read_exactly(stream, REPORT_SIZE)
                await stream.aclose()  # refused
        nursery.cancel_scope.cancel()
    slave.close()
    gaps = [later - earlier for earlier, later in itertools.pairwise(accepted)]
    assert len(accepted) <= 60 / 5 + 4, f"{len(accepted)} connections in 60 s, gaps {gaps[:8]}"
    assert gaps[-1] >= 5 - 0.1


async def test_a_slave_refusing_its_master_s_bytes_reconnects_once_a_heartbeat_interval_at_most(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A diverged slave refuses the bytes its master sends at its end (they do not start a record there) and ends
    the session, every session alike: it must not come back twice a second for ever, taking a frame and logging a
    refusal each time. RocketMQ's HAClient (store/src/main/java/org/apache/rocketmq/store/ha/HAService.java) closes
    the connection on a frame it refuses (``dispatchReadRequest`` false) and, connected again, reports only a
    heartbeat interval later: it comes back once per ``haSendHeartbeatInterval`` (5 s)."""
    source, size1, _size2 = _master_with_two_records(tmp_path / "source", batch=32768)
    first_record = bytes(source.commitlog.read(0, size1) or b"")
    source.close()
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    slave = ha_store(tmp_path / "slave", BrokerRole.SLAVE, ha_master_address=f"127.0.0.1:{port}")
    accepted: list[float] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(slave.run)
        with trio.move_on_after(60):
            while True:
                stream = await listener.accept()
                accepted.append(trio.current_time())
                if await read_exactly(stream, REPORT_SIZE) == encode_report(0):
                    await stream.send_all(encode_frame(0, first_record))  # the slave takes its first record...
                    assert await read_exactly(stream, REPORT_SIZE) == encode_report(size1)
                await stream.send_all(encode_frame(size1, b"x" * 64))  # ...then bytes of a log not its own
                await _until_closed(stream)
                await stream.aclose()
        nursery.cancel_scope.cancel()
    slave.close()
    gaps = [later - earlier for earlier, later in itertools.pairwise(accepted)]
    assert len(accepted) <= 60 / 5 + 4, f"{len(accepted)} connections in 60 s, gaps {gaps[:8]}"
    assert gaps[-1] >= 5 - 0.1
