"""The transaction check round in DLedger mode, three brokers on real sockets under virtual time: a leader's appends
(the renewed half copies, the op messages) reach the ConsumeQueues only once a majority holds them, and the round
waits for that before it commits its progress. Whatever END_TRANSACTION arrives before, during or after that wait,
one transaction is committed exactly once."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import orjson
import pytest
import trio
import trio.testing

from broker.dledger_mode import dledger_config_of
from broker.embedded_dledger import EmbeddedDLedgerGroup
from client.message import Message, MessageExt
from client.transaction import LocalTransactionState, TransactionProducer
from dledger.codes import RequestCode as DLedgerCode
from dledger.codes import ResponseCode as DLedgerResult
from dledger.messages import LeadershipTransferRequest, encode
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.headers.transaction import EndTransactionRequestHeader
from remoting.codec.msgid import decode_offset_msg_id
from remoting.codec.topics import TRANS_OP_HALF_TOPIC
from tests.dledger.test_role_services import TOPIC, start_group, stored, virtual_store_clock, wait_services_on

#: Rounds only when the test runs one; the leader keeps its lease while both followers are away for a while.
_SETTINGS = {"transaction_check_interval": 3_600_000, "heart_beat_time_interval_ms": 5_000}


def _producer(group: EmbeddedDLedgerGroup, decide: dict[bytes, LocalTransactionState]) -> TransactionProducer:
    async def execute(msg: Message, arg: object) -> LocalTransactionState:
        return decide[msg.body]

    async def check(msg: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.UNKNOWN

    return TransactionProducer(
        "pg-dledger-tx", group.namesrv_addr, execute_local_transaction=execute, check_local_transaction=check
    )


async def _start_in_no_time(group: EmbeddedDLedgerGroup, member: str, clock: trio.testing.MockClock) -> None:
    """Start ``member`` again while virtual time stands (nearly) still: its files load in worker threads, and each
    wait for one would otherwise let the clock jump, past the round's wait for a majority or the leader's lease."""
    clock.autojump_threshold = 0.5
    try:
        await group.start(member)
    finally:
        clock.autojump_threshold = 0


async def _past_transaction_timeout(group: EmbeddedDLedgerGroup, member: str) -> None:
    """Sleep until every half message sent so far is older than ``transactionTimeOut`` (and a second more) on
    ``member``'s store clock. Producers stamp born times on the wall clock; the store's clock follows virtual time from
    :func:`virtual_store_clock` on. Real time the test spends working (a loaded CPU, files loading in threads) moves
    the wall clock but barely the virtual one, so on a loaded machine a fixed 7 s sleep could leave a half message
    too young for the round: it then renewed nothing and committed its progress past the ended transaction."""
    store, timeout_ms = group.store(member), group.config(member).transaction_time_out
    due_ms = time.time_ns() // 1_000_000 + timeout_ms + 1_000  # born times are no later than this wall clock read
    while store.config.now_ms() < due_ms:
        await trio.sleep(0.1)


async def _all_confirmed(group: EmbeddedDLedgerGroup, member: str) -> None:
    """Until a majority holds everything ``member`` appended."""
    store = group.store(member)
    with trio.fail_after(60):
        while store.confirmed_offset < store.commitlog.write_end:
            await trio.sleep(0.1)


async def _commit(group: EmbeddedDLedgerGroup, member: str, queue_offset: int, offset_msg_id: str) -> int:
    """END_TRANSACTION COMMIT (answered: not oneway) of the half message at ``queue_offset`` / ``offset_msg_id``."""
    return (await _commit_answer(group, member, queue_offset, offset_msg_id)).code


async def _commit_answer(
    group: EmbeddedDLedgerGroup, member: str, queue_offset: int, offset_msg_id: str
) -> RemotingCommand:
    header = EndTransactionRequestHeader(
        producer_group="pg-dledger-tx",
        tran_state_table_offset=queue_offset,
        commit_log_offset=decode_offset_msg_id(offset_msg_id).phy_offset,
        commit_or_rollback=8,
        msg_id="X",
    )
    command = request(RequestCode.END_TRANSACTION, header.to_ext_fields())
    async with RemotingClient() as client:
        return await client.invoke(group.addr(member), command, 10)


@pytest.mark.parametrize("quorum_back", ["during the wait", "after the round gave up"])
async def test_a_repeated_commit_while_the_round_waits_for_the_quorum_is_not_stored_twice(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, quorum_back: str
) -> None:
    """The round scans past a committed transaction (its op message leaves the round's window) and then waits for a
    majority to hold the copy it renewed of another one. A repeated COMMIT of the first arriving meanwhile, before the
    round's progress is committed, or after the round gave up waiting and left its progress where it was, must be
    acknowledged, not stored a second time."""
    group, leader = await start_group(tmp_path, **_SETTINGS)
    try:
        virtual_store_clock(group)  # the check service ages half messages on the store clock
        await wait_services_on(group, leader)
        controller = group.controllers[leader]
        store = group.store(leader)
        decide = {b"committed": LocalTransactionState.COMMIT_MESSAGE, b"pending": LocalTransactionState.UNKNOWN}
        async with _producer(group, decide) as producer:
            done = await producer.send_message_in_transaction(Message(TOPIC, b"committed"))
            await producer.send_message_in_transaction(Message(TOPIC, b"pending"))
            with trio.fail_after(30):
                while store.max_offset_in_queue(TRANS_OP_HALF_TOPIC, 0) < 1:
                    await trio.sleep(0.1)
            assert [m.body for m in stored(group, leader)] == [b"committed"]
            await _past_transaction_timeout(group, leader)  # the round renews "pending"
            followers = [m for m in group.ids if m != leader]
            autojump_clock.autojump_threshold = 0.5  # files close in threads: keep virtual time still
            for member in followers:
                await group.stop(member)
            autojump_clock.autojump_threshold = 0
            send, bridge = done.send_result, controller.transaction_bridge
            if quorum_back == "during the wait":
                write_end = store.commitlog.write_end
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(controller.transaction_check.check_once)
                    while store.commitlog.write_end == write_end:  # the round renewed "pending": it waits
                        await trio.sleep(0)
                    assert await _commit(group, leader, send.queue_offset, send.offset_msg_id) == ResponseCode.SUCCESS
                    await _start_in_no_time(group, followers[0], autojump_clock)  # a majority: the wait ends
                assert bridge.half_progress() == 2  # the round committed its progress past both
            else:
                await controller.transaction_check.check_once()
                assert bridge.half_progress() == 0  # not confirmed: the next round scans the same again
                assert await _commit(group, leader, send.queue_offset, send.offset_msg_id) == ResponseCode.SUCCESS
                await _start_in_no_time(group, followers[0], autojump_clock)
        await _all_confirmed(group, leader)
        assert Counter(m.body for m in stored(group, leader)) == Counter({b"committed": 1})
    finally:
        await group.__aexit__(None, None, None)


async def test_a_commit_is_answered_once_a_majority_holds_its_message_not_before(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's EndTransactionProcessor.sendFinalMessage stores the committed message through the store's synchronous
    putMessage, which in DLedger mode returns once a majority holds it (DLedgerCommitLog): a leader whose followers
    are away answers SYSTEM_ERROR after maxWaitAckTimeMs, never SUCCESS for a commit the next leader may not hold.
    Once a follower is back the message is kept, once, and a repeated COMMIT is acknowledged."""
    group, leader = await start_group(tmp_path, **_SETTINGS)
    try:
        await wait_services_on(group, leader)
        async with _producer(group, {b"held": LocalTransactionState.UNKNOWN}) as producer:
            sent = await producer.send_message_in_transaction(Message(TOPIC, b"held"))
        followers = [m for m in group.ids if m != leader]
        autojump_clock.autojump_threshold = 0.5  # files close in threads: keep virtual time still
        for member in followers:
            await group.stop(member)
        autojump_clock.autojump_threshold = 0
        send = sent.send_result
        start = trio.current_time()
        answer = await _commit_answer(group, leader, send.queue_offset, send.offset_msg_id)
        assert (answer.code, answer.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "OS page cache busy, please try another machine",
        )
        assert trio.current_time() - start == pytest.approx(2.5, abs=0.1)  # maxWaitAckTimeMs
        assert stored(group, leader) == []
        await _start_in_no_time(group, followers[0], autojump_clock)
        await _all_confirmed(group, leader)
        assert await _commit(group, leader, send.queue_offset, send.offset_msg_id) == ResponseCode.SUCCESS
        await _all_confirmed(group, leader)
        assert [m.body for m in stored(group, leader)] == [b"held"]
    finally:
        await group.__aexit__(None, None, None)


async def test_a_late_commit_of_a_half_message_the_round_renewed_is_stored(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The producer's own COMMIT names the half message it sent; a round that renewed it meanwhile (its copy held by a
    majority only after the round's scan) must not make that COMMIT count as a transaction already ended: 4.9.8's
    EndTransactionProcessor commits it."""
    group, leader = await start_group(tmp_path, **_SETTINGS)
    try:
        virtual_store_clock(group)  # the check service ages half messages on the store clock
        await wait_services_on(group, leader)
        async with _producer(group, {b"slow": LocalTransactionState.UNKNOWN}) as producer:
            sent = await producer.send_message_in_transaction(Message(TOPIC, b"slow"))
            await _past_transaction_timeout(group, leader)
            outcome = await group.controllers[leader].transaction_check.check_once()
            assert outcome.checked == 1
            send = sent.send_result
            assert await _commit(group, leader, send.queue_offset, send.offset_msg_id) == ResponseCode.SUCCESS
        await _all_confirmed(group, leader)
        assert [m.body for m in stored(group, leader)] == [b"slow"]
    finally:
        await group.__aexit__(None, None, None)


async def _hand_over(group: EmbeddedDLedgerGroup, leader: str, to: str) -> None:
    """DLedger's LEADERSHIP_TRANSFER from ``leader`` to ``to`` once its log has caught up; returns once the
    master's services run on ``to``."""
    with trio.fail_after(60):
        while group.store(to).ledger.end_index != group.store(leader).ledger.end_index:
            await trio.sleep(0.1)
    term = group.store(leader).server.node.member.curr_term
    transfer = LeadershipTransferRequest(
        group="broker-a", remote_id=leader, term=term, transfer_id=leader, transferee_id=to
    )
    peers = dledger_config_of(group.config(leader)).peer_map
    async with RemotingClient() as client:
        answer = await client.invoke(peers[leader], request(DLedgerCode.LEADERSHIP_TRANSFER, body=encode(transfer)), 10)
    assert orjson.loads(answer.body)["code"] == DLedgerResult.SUCCESS
    assert await group.leader() == to
    await wait_services_on(group, to)


async def test_a_member_that_leads_again_does_not_commit_a_transaction_another_leader_ended(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A member that led, followed while another leader ended a transaction and checked past it, and leads again
    resumes from the progress it copied: what it remembered of its own last round (which transactions had a copy left
    to scan) must not make a repeated COMMIT of that transaction a second commit."""
    group, first = await start_group(tmp_path, **_SETTINGS)
    second = next(m for m in group.ids if m != first)
    try:
        virtual_store_clock(group)  # the check service ages half messages on the store clock
        await wait_services_on(group, first)
        async with _producer(group, {b"handed": LocalTransactionState.UNKNOWN}) as producer:
            sent = await producer.send_message_in_transaction(Message(TOPIC, b"handed"))
            await _past_transaction_timeout(group, first)
            assert (await group.controllers[first].transaction_check.check_once()).checked == 1
        await trio.sleep(30)  # the followers copy the round's progress
        await _hand_over(group, first, second)
        send = sent.send_result
        assert await _commit(group, second, send.queue_offset, send.offset_msg_id) == ResponseCode.SUCCESS
        await _all_confirmed(group, second)
        assert (await group.controllers[second].transaction_check.check_once()).resolved == 1
        await trio.sleep(30)  # the followers copy the round's progress
        await _hand_over(group, second, first)
        assert await _commit(group, first, send.queue_offset, send.offset_msg_id) == ResponseCode.SUCCESS
        await _all_confirmed(group, first)
        assert [m.body for m in stored(group, first)] == [b"handed"]
    finally:
        await group.__aexit__(None, None, None)


async def test_a_commit_the_moment_a_member_leads_again_is_stored_not_only_acknowledged(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A member that led (its last round found no transaction left to scan), followed while another leader renewed a
    transaction's half message and checked past its first copy, and leads again: a COMMIT naming that first copy,
    arriving the moment the member takes writes (before its check service has started again), must publish the
    message. What the member remembered of its own last round (no transaction live) is stale: the half queue has
    since gained the other leader's renewed copy; acknowledged from it, the COMMIT stored nothing."""
    group, first = await start_group(tmp_path, **_SETTINGS)
    second = next(m for m in group.ids if m != first)
    try:
        virtual_store_clock(group)  # the check service ages half messages on the store clock
        await wait_services_on(group, first)
        assert (await group.controllers[first].transaction_check.check_once()).checked == 0  # nothing live
        await _hand_over(group, first, second)
        async with _producer(group, {b"late": LocalTransactionState.UNKNOWN}) as producer:
            sent = await producer.send_message_in_transaction(Message(TOPIC, b"late"))
            await _past_transaction_timeout(group, second)
            assert (await group.controllers[second].transaction_check.check_once()).checked == 1
        await trio.sleep(30)  # the followers copy the round's progress
        send = sent.send_result
        answers: list[int] = []
        async with trio.open_nursery() as nursery:

            async def commit_now() -> None:
                answers.append(await _commit(group, first, send.queue_offset, send.offset_msg_id))

            def on_role(role: str, term: int) -> None:  # right after the member takes writes
                if role == "SYNC_MASTER" and not answers:
                    nursery.start_soon(commit_now)

            group.store(first).role_listeners.append(on_role)
            await _hand_over(group, second, first)
        assert answers == [ResponseCode.SUCCESS]
        await _all_confirmed(group, first)
        assert [m.body for m in stored(group, first)] == [b"late"]
    finally:
        await group.__aexit__(None, None, None)


async def test_a_new_leader_serves_end_transaction_before_its_timer_has_loaded(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's changeToMaster starts the transaction check service's thread and END_TRANSACTION waits for nothing
    (broker/src/main/java/org/apache/rocketmq/broker/BrokerController.java, EndTransactionProcessor.java). Ours waits
    after a role change until the check service has rebuilt its view, and that service was started last, after the
    schedule's and the timer's loads: a big timer backlog (a crash rebuild of the wheel) held every END_TRANSACTION
    of the new leader for as long. The view must be current while the timer is still loading."""
    group, first = await start_group(tmp_path, **_SETTINGS)
    second = next(m for m in group.ids if m != first)
    try:
        await wait_services_on(group, first)
        controller = group.controllers[second]
        bridge, timer = controller.transaction_bridge, controller.timer
        timer_loaded_at_view: list[bool] = []

        async def watch_view() -> None:
            while not bridge.view_current:
                await bridge.view_changed()
            timer_loaded_at_view.append(timer.export_checkpoint() is not None)

        async with trio.open_nursery() as nursery:

            def on_role(role: str, term: int) -> None:
                if role == "SYNC_MASTER" and not timer_loaded_at_view:
                    nursery.start_soon(watch_view)

            group.store(second).role_listeners.append(on_role)
            await _hand_over(group, first, second)
        assert timer_loaded_at_view == [False]
        assert timer.export_checkpoint() is not None  # it loads all the same
    finally:
        await group.__aexit__(None, None, None)
