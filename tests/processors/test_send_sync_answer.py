"""SYNC_FLUSH sends answered by the group commit's callback (no task per put): the same responses as the awaited
path, none for a oneway send (still timed), and a response for a connection that closed meanwhile dropped quietly."""

from __future__ import annotations

import logging

import attrs
import pytest
import trio
import trio.testing

from processors.hold import HoldService
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import FLAG_ONEWAY, RemotingCommand
from remoting.connection import Connection
from store.store_config import FlushDiskType
from tests.processors.conftest import PEER, MakeBroker, RawPeer, ServedBroker, send_request

SYNC = {"flush_disk_type": FlushDiskType.SYNC_FLUSH, "flush_interval_commit_log": 600_000}


async def _serve(make_broker: MakeBroker, nursery: trio.Nursery, *, store_running: bool) -> ServedBroker:
    served = ServedBroker(make_broker(store_overrides=SYNC), HoldService())
    await nursery.start(served.hold.run)
    await nursery.start(served.dispatcher.run)
    if store_running:
        await nursery.start(served.broker.store.run)
    return served


def _requests() -> list[RemotingCommand]:
    out = []
    for i in range(12):
        code = RequestCode.SEND_MESSAGE if i % 3 == 0 else RequestCode.SEND_MESSAGE_V2
        cmd = send_request(body=b"m%d" % i, queue_id=i % 4, code=code, properties="WAIT\x01true" if i % 2 else "")
        out.append(attrs.evolve(cmd, flag=FLAG_ONEWAY) if i == 5 else cmd)
    return out


Answer = tuple[int, int, str | None, dict[str, str]]


async def _exchange(peer: RawPeer, requests: list[RemotingCommand]) -> list[Answer]:
    await peer.send(*requests)
    answered = [r for r in requests if not r.is_oneway]
    got: dict[int, RemotingCommand] = {}
    with trio.fail_after(10):
        while len(got) < len(answered):
            response = await peer.receive()
            assert response is not None
            got[response.opaque] = response
    # Positions, not opaques (fresh per request): the same sends in the same order must get the same answers.
    index = {r.opaque: i for i, r in enumerate(requests)}
    return sorted((index[o], c.code, c.remark, c.ext_fields) for o, c in got.items())


async def test_callback_answers_equal_the_awaited_answers(make_broker: MakeBroker, nursery: trio.Nursery) -> None:
    results = []
    for running in (False, True):  # without the group commit running, the send awaits flush_status inline
        served = await _serve(make_broker, nursery, store_running=running)
        peer = await served.connect_memory(nursery)
        requests = _requests()
        results.append(await _exchange(peer, requests))
        assert served.broker.store.flush_watermark >= served.broker.store.max_phy_offset
    awaited, called_back = results
    assert called_back == awaited
    assert len(called_back) == 11 and all(code == ResponseCode.SUCCESS for _, code, _, _ in called_back)
    assert 5 not in [i for i, _, _, _ in called_back]  # the oneway send


async def test_every_put_is_timed_the_oneway_one_too(make_broker: MakeBroker, nursery: trio.Nursery) -> None:
    """As RocketMQ 4.9.8's (store/.../DefaultMessageStore.java ``asyncPutMessage``, whose future times every put
    whatever the RPC type), the oneway send of a SYNC_FLUSH broker reaches the put latency statistics (the runtime
    info's distribution and percentiles, ``rocketmq_storage_put_latency``) once flushed, with or without the group
    commit running: the 12 puts are timed 12 times."""
    for running in (False, True):
        served = await _serve(make_broker, nursery, store_running=running)
        peer = await served.connect_memory(nursery)
        await _exchange(peer, _requests())
        latency = served.broker.stats.put_latency
        with trio.fail_after(10):  # the oneway one needs no answer: its timing may come after the last answer
            while latency.count < 12:
                await trio.sleep(0.001)
        assert latency.count == 12


async def test_a_closed_connection_drops_the_answer_quietly(
    make_broker: MakeBroker, nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="processors.send_answer")
    served = await _serve(make_broker, nursery, store_running=True)
    store = served.broker.store
    client_end, server_end = trio.testing.memory_stream_pair()
    connection = Connection(server_end, PEER, ("127.0.0.1", 10911))
    nursery.start_soon(connection.run, served.dispatcher.dispatch)
    peer = RawPeer(client_end)
    async with store.disk_lock:  # the sync waits until the producer has gone
        before = store.max_phy_offset
        await peer.send(send_request(body=b"gone"))
        with trio.fail_after(10):
            while store.max_phy_offset == before:
                await trio.sleep(0.001)
        await peer.aclose()
        with trio.fail_after(10):
            while not connection.closed:
                await trio.sleep(0.001)
    with trio.fail_after(10):
        while "dropped: connection closed" not in caplog.text:
            await trio.sleep(0.001)
    assert store.flush_watermark >= store.max_phy_offset
    # The broker still answers others.
    other = await served.connect_memory(nursery)
    answers = await _exchange(other, [send_request(body=b"next")])
    assert answers[0][1] == ResponseCode.SUCCESS
