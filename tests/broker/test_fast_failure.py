"""Broker fast failure (broker/src/main/java/org/apache/rocketmq/broker/latency/BrokerFastFailure.java): a send that
waited in the send pool's queue ``waitTimeMillsInSendQueue`` (200 ms) or longer is answered SYSTEM_BUSY
``[TIMEOUT_CLEAN_QUEUE]...`` instead of being stored, on by default (``brokerFastFailureEnable``); the settings come
from ``broker.conf`` and UPDATE_BROKER_CONFIG changes them in the running broker. While the store is page-cache busy
(an append held its put lock past ``osPageCacheBusyTimeOutMills``) sends are refused ``[REJECTREQUEST]`` and queued
ones drained ``[PCBUSY_CLEAN_QUEUE]``.

A real broker over real sockets, in virtual time. What holds the send pool's only worker is a gate processor
registered on that pool: it stands in for a slow send (a disk that stalls), which virtual time cannot make."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio
import trio.testing

from broker.controller import BrokerController
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.message import MessageRecord
from remoting.errors import RemotingError
from tests.broker.helpers import broker_from_conf
from tests.processors.conftest import send_request
from tests.remoting.helpers import GateProcessor

#: A request code no broker serves: the gate's, on the send pool.
HOLD = 9_901
TOPIC = "FastFailure"


@asynccontextmanager
async def held_send_pool(
    tmp_path: Path, clock: trio.testing.MockClock, settings: str = ""
) -> AsyncIterator[tuple[BrokerController, str, RemotingClient, GateProcessor]]:
    """A broker from a ``broker.conf`` with one send worker (plus ``settings``), the topic created, that worker held
    by a gate; virtual time jumps from then on."""
    conf = tmp_path / "broker.conf"
    conf.write_text(f"listenPort=0\nlistenHost=127.0.0.1\nsendMessageThreadPoolNums=1\n{settings}")
    async with broker_from_conf(conf, tmp_path / "store") as (controller, addr), RemotingClient() as client:
        gate = GateProcessor()
        controller.dispatcher.register(HOLD, gate, controller.pools["send"])
        client.invoke_callback(addr, request(HOLD), 60, lambda _outcome: None)
        while gate.entered == 0:
            await trio.sleep(0)
        clock.autojump_threshold = 0
        yield controller, addr, client, gate


async def send_behind_the_gate(
    client: RemotingClient, addr: str, gate: GateProcessor, queued_for: float
) -> RemotingCommand:
    """A send queued behind the held worker for ``queued_for`` seconds (virtual), then the worker let go; its answer."""
    answers: list[RemotingCommand | RemotingError] = []
    client.invoke_callback(addr, send_request(TOPIC, b"late"), 60, answers.append)
    await trio.sleep(queued_for)
    gate.gate.set()
    while not answers:
        await trio.sleep(0.01)
    assert isinstance(answers[0], RemotingCommand), answers
    return answers[0]


def stored(controller: BrokerController) -> int:
    return controller.context.store.max_offset_in_queue(TOPIC, 0)


def busy_remark(waited_ms: int) -> str:
    return (
        "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, "
        f"period in queue: {waited_ms}ms, size of queue: 0"
    )


async def test_a_send_that_waited_past_the_send_queue_wait_is_answered_busy_by_default(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """brokerFastFailureEnable and waitTimeMillsInSendQueue=200 are Java's defaults: a send queued behind a held
    worker is answered SYSTEM_BUSY with BrokerFastFailure's remark once it waited 200 ms (the worker still held) and
    is not stored; a fresh send is. Before, the broker never turned fast failure on: the stale send was stored a
    second late."""
    async with held_send_pool(tmp_path, mock_clock) as (controller, addr, client, gate):
        answer = await send_behind_the_gate(client, addr, gate, 1.0)
        assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_BUSY, busy_remark(200))
        assert stored(controller) == 0
        fresh = await client.invoke(addr, send_request(TOPIC, b"fresh"), 5)
        assert fresh.code == ResponseCode.SUCCESS
        assert stored(controller) == 1


async def test_with_broker_fast_failure_off_a_late_send_is_stored(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """brokerFastFailureEnable=false: no queue is swept; the send waits as long as it must and is stored."""
    async with held_send_pool(tmp_path, mock_clock, "brokerFastFailureEnable=false\n") as (
        controller,
        addr,
        client,
        gate,
    ):
        assert all(pool.max_wait is None for pool in controller.pools.values())
        answer = await send_behind_the_gate(client, addr, gate, 1.0)
        assert answer.code == ResponseCode.SUCCESS
        assert stored(controller) == 1


async def test_the_queue_waits_come_from_broker_conf_and_change_live(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """The five waits are broker.conf settings (pools without one, such as query, are never swept), shown by
    GET_BROKER_CONFIG; UPDATE_BROKER_CONFIG applies a new one to the running broker at once, requests already queued
    included, as Java's sweep reads BrokerConfig every 10 ms."""
    settings = "waitTimeMillsInSendQueue=1500\nwaitTimeMillsInPullQueue=7000\nwaitTimeMillsInHeartbeatQueue=9000\n"
    async with held_send_pool(tmp_path, mock_clock, settings) as (controller, addr, client, gate):
        waits = {name: pool.max_wait for name, pool in controller.pools.items() if pool.max_wait is not None}
        assert waits == {"send": 1.5, "pull": 7.0, "heartbeat": 9.0, "end_transaction": 3.0, "ack": 3.0}
        text = bytes((await client.invoke(addr, request(RequestCode.GET_BROKER_CONFIG), 5)).body).decode()
        for line in (
            "brokerFastFailureEnable=true",
            "waitTimeMillsInSendQueue=1500",
            "waitTimeMillsInTransactionQueue=3000",
        ):
            assert f"{line}\n" in text
        answers: list[RemotingCommand | RemotingError] = []
        client.invoke_callback(addr, send_request(TOPIC, b"queued"), 60, answers.append)
        await trio.sleep(1.0)  # queued for a second: within 1500 ms
        update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"waitTimeMillsInSendQueue=500\n")
        mock_clock.autojump_threshold = math.inf  # the update writes broker.conf in a thread: real time for it
        assert (await client.invoke(addr, update, 5)).code == ResponseCode.SUCCESS
        mock_clock.autojump_threshold = 0
        assert controller.pools["send"].max_wait == 0.5
        gate.gate.set()
        while not answers:
            await trio.sleep(0.01)
        assert isinstance(answers[0], RemotingCommand) and answers[0].code == ResponseCode.SYSTEM_BUSY
        off = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerFastFailureEnable=false\n")
        mock_clock.autojump_threshold = math.inf
        assert (await client.invoke(addr, off, 5)).code == ResponseCode.SUCCESS
        assert all(pool.max_wait is None for pool in controller.pools.values())
    assert "waitTimeMillsInSendQueue=500" in (tmp_path / "broker.conf").read_text()


async def _answer(outcomes: list[RemotingCommand | RemotingError]) -> RemotingCommand:
    while not outcomes:
        await trio.sleep(0)
    assert isinstance(outcomes[0], RemotingCommand), outcomes
    return outcomes[0]


async def test_after_an_append_held_the_put_lock_too_long_sends_are_rejected_and_queued_ones_drained(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """SendMessageProcessor.rejectRequest and BrokerFastFailure's PCBUSY sweep: an append that held the store's put
    lock (our Trio thread) longer than ``osPageCacheBusyTimeOutMills`` makes the store page-cache busy for the hold
    past the limit; sends are then answered SYSTEM_BUSY ``[REJECTREQUEST]``, a send queued behind a held worker
    ``[PCBUSY_CLEAN_QUEUE]``, and none is stored; once that time has passed sends are stored again. A limit of 0 ms
    makes every append too long (it holds the thread some microseconds) and the virtual clock, moved only by the
    test, keeps the store busy until it moves."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\nsendMessageThreadPoolNums=1\nosPageCacheBusyTimeOutMills=0\n")
    async with broker_from_conf(conf, tmp_path / "store") as (controller, addr), RemotingClient() as client:
        store = controller.context.store
        assert not store.is_os_page_cache_busy()
        first = await client.invoke(addr, send_request(TOPIC, b"first"), 5)
        assert first.code == ResponseCode.SUCCESS
        assert store.is_os_page_cache_busy()
        rejected = await client.invoke(addr, send_request(TOPIC, b"rejected"), 5)
        assert (rejected.code, rejected.remark) == (
            ResponseCode.SYSTEM_BUSY,
            "[REJECTREQUEST]system busy, start flow control for a while",
        )
        mock_clock.jump(1.0)  # past any hold of these appends
        assert not store.is_os_page_cache_busy()
        gate = GateProcessor()
        controller.dispatcher.register(HOLD, gate, controller.pools["send"])
        client.invoke_callback(addr, request(HOLD), 60, lambda _outcome: None)
        while gate.entered == 0:
            await trio.sleep(0)
        queued: list[RemotingCommand | RemotingError] = []
        client.invoke_callback(addr, send_request(TOPIC, b"queued"), 60, queued.append)
        while controller.pools["send"].queued == 0:
            await trio.sleep(0)
        store.append(MessageRecord("Other", b"slow", 0, store_host=controller.context.store_host))
        gate.gate.set()
        drained = await _answer(queued)
        assert (drained.code, drained.remark) == (
            ResponseCode.SYSTEM_BUSY,
            "[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: 0ms, size of queue: 0",
        )
        assert stored(controller) == 1
        mock_clock.jump(1.0)  # past any hold of these appends
        later = await client.invoke(addr, send_request(TOPIC, b"later"), 5)
        assert later.code == ResponseCode.SUCCESS
        assert stored(controller) == 2


async def test_a_batch_send_that_held_the_put_lock_too_long_makes_the_store_busy(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """DefaultMessageStore.putMessages times its lock as putMessage does (CommitLog.asyncPutMessages sets
    beginTimeInLock, which isOSPageCacheBusy reads): a SEND_BATCH_MESSAGE whose append held it past
    ``osPageCacheBusyTimeOutMills`` makes the store page-cache busy, and the next send is rejected. A 0 ms limit
    makes every append too long; the virtual clock keeps the store busy until the test moves it."""
    from remoting.codec.message import BatchEntry, encode_batch_body

    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\nosPageCacheBusyTimeOutMills=0\n")
    async with broker_from_conf(conf, tmp_path / "store") as (controller, addr), RemotingClient() as client:
        store = controller.context.store
        req = send_request(TOPIC, code=RequestCode.SEND_BATCH_MESSAGE, batch="true")
        batch = RemotingCommand(code=req.code, opaque=req.opaque, ext_fields=req.ext_fields,
                                body=encode_batch_body([BatchEntry(b"a"), BatchEntry(b"b")]))  # fmt: skip
        assert not store.is_os_page_cache_busy()
        assert (await client.invoke(addr, batch, 5)).code == ResponseCode.SUCCESS
        assert store.is_os_page_cache_busy()
        rejected = await client.invoke(addr, send_request(TOPIC, b"rejected"), 5)
        assert rejected.code == ResponseCode.SYSTEM_BUSY
        mock_clock.jump(1.0)
        assert (await client.invoke(addr, send_request(TOPIC, b"later"), 5)).code == ResponseCode.SUCCESS
