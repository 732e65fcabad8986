"""Where the ACL check stands among the broker's flow-control answers. RocketMQ 4.9.8 runs its RPC hooks (the ACL's
PlainAccessValidator) inside the request's task on the processor's executor
(remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingAbstract.java ``processRequestCommand``):
a processor's ``rejectRequest``, a full queue and BrokerFastFailure's sweep of the queue answer first, so an
unauthenticated request the broker is too busy for is answered SYSTEM_BUSY, and one it serves is refused by the ACL.

A real broker from a ``broker.conf`` with ACL on, over real sockets, in virtual time; a gate processor holds the
send pool's only worker (virtual time cannot make a disk stall)."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from broker.acl.admission import AclAdmission
from broker.controller import BrokerController
from remoting.client import InvokeCallback, RemotingClient
from remoting.codec.acl_signing import SessionCredentials, sign
from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.message import MessageRecord
from remoting.dispatch import OVERLOAD_REMARK
from remoting.errors import RemotingError
from tests.broker.helpers import broker_from_conf
from tests.processors.conftest import send_request
from tests.remoting.helpers import GateProcessor

#: An account of tests/acl/conftest.py's PLAIN_ACL that may publish to :data:`TOPIC`.
USER = SessionCredentials("RocketMQ", "12345678")
TOPIC = "topicB"
#: A request code no broker serves: the gate's, on the send pool.
HOLD = 9_901


def _conf(tmp_path: Path, acl_home: Path, settings: str = "") -> Path:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"listenPort=0\nlistenHost=127.0.0.1\nsendMessageThreadPoolNums=1\naclEnable=true\n"
        f"rocketmqHome={acl_home}\n{settings}"
    )
    return conf


async def _answer(outcomes: list[RemotingCommand | RemotingError]) -> RemotingCommand:
    while not outcomes:
        await trio.sleep(0.01)
    assert isinstance(outcomes[0], RemotingCommand), outcomes
    return outcomes[0]


def _is_acl_refusal(answer: RemotingCommand) -> bool:
    return answer.code == ResponseCode.SYSTEM_ERROR and "AclException" in (answer.remark or "")


async def _hold_send_worker(
    controller: BrokerController, client: RemotingClient, addr: str, on_answer: InvokeCallback
) -> tuple[GateProcessor, AclAdmission]:
    """Hold the send pool's only worker with a signed :data:`HOLD` request (``on_answer`` gets its answer once the
    gate opens); the gate and the broker's ACL check."""
    admission = controller.dispatcher.admission
    assert isinstance(admission, AclAdmission)
    gate = GateProcessor()
    controller.dispatcher.register(HOLD, gate, controller.pools["send"])
    client.invoke_callback(addr, sign(request(HOLD), USER), 60, on_answer)
    while gate.entered == 0:
        await trio.sleep(0)
    return gate, admission


async def test_an_unsigned_send_that_waited_past_the_queue_wait_is_answered_busy(
    tmp_path: Path, acl_home: Path, mock_clock: trio.testing.MockClock
) -> None:
    """An unsigned send queued behind a held worker for longer than ``waitTimeMillsInSendQueue`` is answered
    ``[TIMEOUT_CLEAN_QUEUE]``, as BrokerFastFailure cleans it before the ACL hook would run; once the worker is free
    an unsigned send is refused by the ACL and a signed one stored (found by a review: ours checked the ACL first)."""
    conf = _conf(tmp_path, acl_home)
    async with broker_from_conf(conf, tmp_path / "store") as (controller, addr), RemotingClient() as client:
        gate, _ = await _hold_send_worker(controller, client, addr, lambda _outcome: None)
        mock_clock.autojump_threshold = 0
        queued: list[RemotingCommand | RemotingError] = []
        client.invoke_callback(addr, send_request(TOPIC, b"late"), 60, queued.append)
        await trio.sleep(1.0)
        gate.gate.set()
        late = await _answer(queued)
        assert late.code == ResponseCode.SYSTEM_BUSY, late
        assert (late.remark or "").startswith("[TIMEOUT_CLEAN_QUEUE]"), late
        unsigned = await client.invoke(addr, send_request(TOPIC, b"unsigned"), 5)
        assert _is_acl_refusal(unsigned), unsigned
        signed = await client.invoke(addr, sign(send_request(TOPIC, b"signed"), USER), 5)
        assert signed.code == ResponseCode.SUCCESS, signed


async def test_an_unsigned_send_while_the_page_cache_is_busy_is_rejected_busy(
    tmp_path: Path, acl_home: Path, mock_clock: trio.testing.MockClock
) -> None:
    """SendMessageProcessor.rejectRequest answers ``[REJECTREQUEST]`` before the request is queued, so before the ACL
    hook: an unsigned send while the store is page-cache busy gets that answer, not the ACL's. A limit of 0 ms makes
    every append too long, and the virtual clock, moved only by the test, keeps the store busy until it moves."""
    conf = _conf(tmp_path, acl_home, "osPageCacheBusyTimeOutMills=0\n")
    async with broker_from_conf(conf, tmp_path / "store") as (controller, addr), RemotingClient() as client:
        first = await client.invoke(addr, sign(send_request(TOPIC, b"first"), USER), 5)
        assert first.code == ResponseCode.SUCCESS, first
        assert controller.context.store.is_os_page_cache_busy()
        rejected = await client.invoke(addr, send_request(TOPIC, b"unsigned"), 5)
        assert (rejected.code, rejected.remark) == (
            ResponseCode.SYSTEM_BUSY,
            "[REJECTREQUEST]system busy, start flow control for a while",
        )
        mock_clock.jump(1.0)  # past any hold of these appends
        unsigned = await client.invoke(addr, send_request(TOPIC, b"unsigned"), 5)
        assert _is_acl_refusal(unsigned), unsigned


async def test_an_unsigned_send_into_a_full_send_queue_is_answered_overload(
    tmp_path: Path, acl_home: Path, mock_clock: trio.testing.MockClock
) -> None:
    """A full queue answers ``[OVERLOAD]`` as Java's executor rejects the task before its RPC hooks could run: an
    unsigned send into the full send queue gets that answer and the ACL never sees it (no refusal counted); once the
    queue has room an unsigned send is refused by the ACL. The virtual clock stands still, so nothing queued goes
    stale."""
    conf = _conf(tmp_path, acl_home, "sendThreadPoolQueueCapacity=1\n")
    async with broker_from_conf(conf, tmp_path / "store") as (controller, addr), RemotingClient() as client:
        held: list[RemotingCommand | RemotingError] = []
        gate, admission = await _hold_send_worker(controller, client, addr, held.append)
        client.invoke_callback(addr, sign(request(HOLD), USER), 60, held.append)  # the queue's only slot
        overloaded = await client.invoke(addr, send_request(TOPIC, b"unsigned"), 5)
        assert (overloaded.code, overloaded.remark) == (ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)
        assert admission.refused == 0
        gate.gate.set()
        while len(held) < 2:
            await trio.sleep(0)
        assert [answer.code for answer in held if isinstance(answer, RemotingCommand)] == [ResponseCode.SUCCESS] * 2
        unsigned = await client.invoke(addr, send_request(TOPIC, b"unsigned"), 5)
        assert _is_acl_refusal(unsigned), unsigned
        assert admission.refused == 1


async def test_an_unsigned_send_queued_before_the_page_cache_got_busy_is_answered_busy(
    tmp_path: Path, acl_home: Path, mock_clock: trio.testing.MockClock
) -> None:
    """BrokerFastFailure's first sweep drains the send queue with ``[PCBUSY_CLEAN_QUEUE]`` while the store is page-cache
    busy, before the ACL hook could run: an unsigned send queued behind the held worker, the store turning busy
    meanwhile (an append straight to it: the only send worker is held), gets that answer and the ACL never sees it. A
    limit of 0 ms makes the append too long, and the virtual clock, which stands still, keeps the store busy."""
    conf = _conf(tmp_path, acl_home, "osPageCacheBusyTimeOutMills=0\n")
    async with broker_from_conf(conf, tmp_path / "store") as (controller, addr), RemotingClient() as client:
        gate, admission = await _hold_send_worker(controller, client, addr, lambda _outcome: None)
        queued: list[RemotingCommand | RemotingError] = []
        client.invoke_callback(addr, send_request(TOPIC, b"unsigned"), 60, queued.append)
        while controller.pools["send"].queued == 0 and not queued:
            await trio.sleep(0)
        assert not queued, queued  # queued behind the held worker, not answered
        ctx = controller.context
        ctx.store.append(MessageRecord(TOPIC, b"direct", 0, store_host=ctx.store_host))
        assert ctx.store.is_os_page_cache_busy()
        gate.gate.set()
        while not queued:
            await trio.sleep(0)
        answer = queued[0]
        assert isinstance(answer, RemotingCommand), answer
        assert answer.code == ResponseCode.SYSTEM_BUSY, answer
        assert (answer.remark or "").startswith("[PCBUSY_CLEAN_QUEUE]"), answer
        assert admission.refused == 0
