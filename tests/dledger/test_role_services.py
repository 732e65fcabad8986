"""The master's services in DLedger mode (broker/role_services.py), three brokers on real sockets under virtual time:
only the leader checks transactions back, delivers delay levels and fires timers; a member that steps down stops
them, and the member that takes over resumes from the progress the slave sync copied, so after a leader change a
half message is still checked and resolved, and no delayed or timer message is lost (the repeated ones are counted
and bounded)."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import attrs
import orjson
import pytest
import trio
import trio.testing

from broker.dledger_mode import dledger_config_of
from broker.embedded_dledger import EmbeddedDLedgerGroup
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from client.transaction import LocalTransactionState, TransactionProducer
from dledger.codes import RequestCode as DLedgerCode
from dledger.codes import ResponseCode as DLedgerResult
from dledger.codes import Role
from dledger.effects import RoleChanged
from dledger.messages import LeadershipTransferRequest, encode
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumeFromWhere
from remoting.codec.bodies.timer_checkpoint import TimerCheckpointBody
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.java_properties import parse_properties
from remoting.codec.message import decode_record
from tests.broker.helpers import create_topic_request
from tests.conftest import SMALL_STORE
from tests.processors.conftest import send_request

TOPIC = "DLedgerServices"


def virtual_store_clock(group: EmbeddedDLedgerGroup) -> float:
    """Every member's store time follows Trio's (virtual) clock; returns the store time of Trio time 0, in ms."""
    base = time.time() - trio.current_time()

    def clock() -> int:
        return int((base + trio.current_time()) * 1000)

    for controller in group.controllers.values():
        store = controller.context.store
        store.config = attrs.evolve(store.config, now_ms=clock)
    return base * 1000


def stored(group: EmbeddedDLedgerGroup, member: str, topic: str = TOPIC, queues: int = 2) -> list[MessageExt]:
    msgs: list[MessageExt] = []
    store = group.store(member)
    for queue_id in range(queues):
        offset = 0
        while result := store.get(topic, queue_id, offset, 32).messages:
            msgs.extend(decode_record(view) for view in result)
            offset += len(result)
    return msgs


async def start_group(tmp_path: Path, **overrides: object) -> tuple[EmbeddedDLedgerGroup, str]:
    group = EmbeddedDLedgerGroup(tmp_path, **{**SMALL_STORE, **overrides})
    await group.__aenter__()
    leader = await group.leader()
    async with RemotingClient() as client:
        answer = await client.invoke(group.addr(leader), create_topic_request(TOPIC, queues=2), 5)
    assert answer.code == ResponseCode.SUCCESS
    return group, leader


def services_running(group: EmbeddedDLedgerGroup) -> dict[str, bool]:
    return {m: c.role_services.running for m, c in group.controllers.items()}


async def wait_services_on(group: EmbeddedDLedgerGroup, leader: str) -> None:
    """Until the master's services run on ``leader`` and on no other member (they start just after the role; their
    files load in worker threads, during which the virtual clock may jump from one timer to the next)."""
    with trio.fail_after(60):
        while services_running(group) != {m: m == leader for m in group.controllers}:
            await trio.sleep(0.01)


async def test_only_the_leader_checks_half_messages_back_and_the_next_leader_takes_over(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    group, leader = await start_group(tmp_path)
    asked: list[tuple[str, float]] = []
    answer_unknown = {"late"}

    async def execute(msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.UNKNOWN  # the producer "dies" before deciding

    async def check(msg: MessageExt) -> LocalTransactionState:
        body = msg.body.decode()
        asked.append((body, trio.current_time()))
        if body in answer_unknown:
            return LocalTransactionState.UNKNOWN
        return LocalTransactionState.COMMIT_MESSAGE

    try:
        virtual_store_clock(group)  # the check service ages half messages on the store clock
        await wait_services_on(group, leader)
        async with TransactionProducer(
            "pg-dledger-tx", group.namesrv_addr, execute_local_transaction=execute, check_local_transaction=check
        ) as producer:
            sent = await producer.send_message_in_transaction(Message(TOPIC, b"early"))
            assert sent.local_transaction_state is LocalTransactionState.UNKNOWN
            # transactionTimeOut (6 s) after its birth the first 60 s round asks the producer, which commits.
            with trio.fail_after(130):
                while [m.body for m in stored(group, leader)] != [b"early"]:
                    await trio.sleep(1)
            assert [body for body, _ in asked] == ["early"]
            for member in group.ids:
                expected = 1 if member == leader else 0
                assert (group.controllers[member].transaction_check.rounds > 0) == bool(expected), member

            # A second half message the producer does not resolve, then the leader goes away.
            await producer.send_message_in_transaction(Message(TOPIC, b"late"))
            with trio.fail_after(130):
                while "late" not in [body for body, _ in asked]:
                    await trio.sleep(1)
            await group.stop(leader)
            stopped_at = trio.current_time()
            new_leader = await group.leader()
            await wait_services_on(group, new_leader)
            answer_unknown.clear()  # from now on the producer knows: commit
            with trio.fail_after(300):
                while b"late" not in [m.body for m in stored(group, new_leader)]:
                    await trio.sleep(1)
        after = [(body, at) for body, at in asked if at > stopped_at]
        assert after and {body for body, _ in after} == {"late"}, asked  # "early" is resolved: never asked again
        bodies = Counter(m.body for m in stored(group, new_leader))
        assert bodies == Counter({b"early": 1, b"late": 1})
    finally:
        await group.__aexit__(None, None, None)


async def test_a_leader_that_steps_down_stops_the_services_and_the_next_one_starts_them(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """``preferredLeaderId=n0``: whoever leads first (or next, when n0 led first and is stopped) hands the leadership
    over to n0 once it has caught up, and stays running as a follower: its services stop, n0's start."""
    group, leader = await start_group(tmp_path, preferred_leader_id="n0")
    try:
        if leader == "n0":
            await wait_services_on(group, "n0")
            await group.stop("n0")
            await wait_services_on(group, await group.leader())
            await group.start("n0")
        with trio.fail_after(60):
            while await group.leader() != "n0":
                await trio.sleep(0.5)
        await wait_services_on(group, "n0")
        stepped_down = {m: c for m, c in group.controllers.items() if m != "n0" and c.role_services.starts}
        assert stepped_down, services_running(group)  # one that led and stepped down (an election may add another)
        for controller in stepped_down.values():
            assert controller.context.config.broker_role == "SLAVE"
            assert not controller.role_services.running  # it may have led more than once: started >= 1
        assert group.controllers["n0"].role_services.starts >= 1
    finally:
        await group.__aexit__(None, None, None)


async def test_no_delayed_or_timer_message_is_lost_across_a_leader_change(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Delay-level and timer messages due before, around and after the leader stops: each is delivered at least
    once by the group; the repeated ones are only those the old leader delivered after the new one's last copy of
    its progress (the slave sync's rounds come every 10 s)."""
    group, leader = await start_group(tmp_path)
    try:
        base_ms = virtual_store_clock(group)
        bodies: list[bytes] = []
        async with Producer("pg-dledger-delay", group.namesrv_addr) as producer:
            for i in range(40):  # one every 2 s for 80 s, due 10 s (level 3) or 1 min (level 5) later
                level = 3 if i % 2 else 5
                body = b"delay-%d" % i
                await producer.send(Message(TOPIC, body, delay_level=level))
                body_t = b"timer-%d" % i
                timer = Message(TOPIC, body_t, properties={"TIMER_DELAY_SEC": str(7 + (i % 3) * 20)})
                await producer.send(timer)
                bodies += [body, body_t]
                await trio.sleep(2)
        old = stored(group, leader)
        delivered_before = {m.body: m.store_timestamp for m in old}
        assert 0 < len(delivered_before) < len(bodies)  # the stop falls in the middle of the deliveries
        stop_ms = group.store(leader).config.now_ms()
        synced = {m: c.replication.slave_sync for m, c in group.controllers.items() if m != leader}
        last_sync = {m: s.last_round_started for m, s in synced.items() if s is not None}
        await group.stop(leader)
        new_leader = await group.leader()
        await trio.sleep(5 * 60)  # everything is due by now
        got = Counter(m.body for m in stored(group, new_leader))
        missing = [b for b in bodies if not got[b]]
        assert not missing, missing
        repeated = {b: n for b, n in got.items() if n > 1}
        assert all(n == 2 for n in repeated.values()), repeated
        # Only what the old leader delivered after the new leader's last copy of its progress began is repeated (the
        # copy counts only deliveries a majority held: allow 1 s for the commit).
        synced_at = last_sync[new_leader]
        assert synced_at is not None
        window_ms = stop_ms - (base_ms + synced_at * 1000)
        for body in repeated:
            assert delivered_before[body] >= base_ms + synced_at * 1000 - 1000, (body, window_ms)
        print(
            f"{len(bodies)} delayed/timer messages, {len(delivered_before)} delivered by the old leader, "
            f"{len(repeated)} delivered twice, all within the last {window_ms / 1000:.1f} s before the stop"
        )
    finally:
        await group.__aexit__(None, None, None)


async def test_a_consumer_reads_from_a_follower_when_the_leaders_backlog_is_beyond_memory(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """``slaveReadEnable`` with ``accessMessageInMemoryMaxRatio=0`` (nothing but the newest message counts as in
    memory): the leader suggests ``whichBrokerWhenConsumeSlowly`` (1); the client finds id 1, or id 2 when the leader
    n0 left that gap (followers are the id's number + 1), and reads the backlog from a follower."""
    group, leader = await start_group(tmp_path, slave_read_enable=True, access_message_in_memory_max_ratio=0)
    try:
        sent = {b"m%d" % i for i in range(100)}
        async with Producer("pg-dledger-read", group.namesrv_addr) as producer:
            for body in sorted(sent):
                await producer.send(Message(TOPIC, body))
        await trio.sleep(60)  # the followers learn the topic from their slave sync (registration, then 10 s rounds)
        got: list[bytes] = []

        async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            got.extend(m.body for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            "cg-dledger-read", group.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        )
        consumer.subscribe(TOPIC)
        consumer.register_message_listener(listener)
        async with consumer:
            with trio.fail_after(120):
                while set(got) != sent:
                    await trio.sleep(1)
        served = {m: c.context.stats.store_stats.get_transferred for m, c in group.controllers.items()}
        assert served[leader] > 0  # the first pulls, before the suggestion
        assert sum(n for m, n in served.items() if m != leader) > 0, served
    finally:
        await group.__aexit__(None, None, None)


async def test_the_leader_serves_its_timer_checkpoint_and_a_follower_answers_it_has_none(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """GET_TIMER_CHECK_POINT (60), which the followers' slave sync asks: the leader's confirmed timer progress;
    SYSTEM_ERROR "The checkpoint is null" where the timer does not run."""
    group, leader = await start_group(tmp_path)
    try:
        await wait_services_on(group, leader)
        follower = next(m for m in group.ids if m != leader)
        async with RemotingClient() as client:
            on_leader = await client.invoke(group.addr(leader), request(RequestCode.GET_TIMER_CHECK_POINT), 5)
            on_follower = await client.invoke(group.addr(follower), request(RequestCode.GET_TIMER_CHECK_POINT), 5)
        assert on_leader.code == ResponseCode.SUCCESS
        body = TimerCheckpointBody.decode(bytes(on_leader.body or b""))
        assert (body.master_timer_queue_offset, body.last_read_time_ms) == group.controllers[
            leader
        ].timer.export_checkpoint()
        assert (on_follower.code, on_follower.remark) == (ResponseCode.SYSTEM_ERROR, "The checkpoint is null")
    finally:
        await group.__aexit__(None, None, None)


async def test_get_broker_config_shows_the_dledger_settings_and_the_live_role(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """GET_BROKER_CONFIG (``mqadmin getBrokerConfig``) lists ``enableDLegerCommitLog``, ``dLegerGroup``,
    ``dLegerPeers``, ``dLegerSelfId`` as RocketMQ's configuration does, with the role the member has now: the leader
    as brokerId 0 / SYNC_MASTER, a follower as its id's number + 1 / SLAVE."""
    group, leader = await start_group(tmp_path)
    try:
        await wait_services_on(group, leader)
        async with RemotingClient() as client:
            for member in group.ids:
                answer = await client.invoke(group.addr(member), request(RequestCode.GET_BROKER_CONFIG), 5)
                assert answer.code == ResponseCode.SUCCESS
                props = parse_properties(bytes(answer.body or b"").decode())
                assert props["enableDLegerCommitLog"] == "true" and props["dLegerSelfId"] == member
                assert props["dLegerPeers"] == group.peers and props["dLegerGroup"] == "broker-a"
                expected = ("0", "SYNC_MASTER") if member == leader else (str(int(member[1:]) + 1), "SLAVE")
                assert (props["brokerId"], props["brokerRole"]) == expected, member
    finally:
        await group.__aexit__(None, None, None)


async def test_a_member_that_leads_from_its_start_copies_the_leaders_offsets_once_it_follows(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A member whose log wins the election while its broker is still starting is master before the broker decides
    on its metadata sync; it still needs one, for when it follows. Without it, that member, handed leadership away
    (DLedger's LEADERSHIP_TRANSFER), never copied the new leader's consumer offsets (nor topics, groups, delay
    offsets), and would have served stale ones when leading again."""
    async with EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE) as group, RemotingClient() as client:
        x = await group.leader()
        assert (await client.invoke(group.addr(x), create_topic_request(TOPIC, queues=1), 5)).code == 0
        y, z = [m for m in group.ids if m != x]
        await group.stop(y)
        # x and z commit a message y does not have: z's log is then longer than y's, and z wins as soon as it is up.
        assert (await client.invoke(group.addr(x), send_request(TOPIC, b"m", queue_id=0), 10)).code == 0
        await group.stop(z)
        await group.stop(x)
        await group.start(y)
        await group.start(z)
        assert await group.leader() == z
        await group.start(x)
        peers = dledger_config_of(group.config(z)).peer_map
        while group.store(x).ledger.end_index != group.store(z).ledger.end_index:
            await trio.sleep(0.1)
        term = group.store(z).server.node.member.curr_term
        transfer = LeadershipTransferRequest(group="broker-a", remote_id=z, term=term, transfer_id=z, transferee_id=x)
        answer = await client.invoke(peers[z], request(DLedgerCode.LEADERSHIP_TRANSFER, body=encode(transfer)), 10)
        assert orjson.loads(answer.body)["code"] == DLedgerResult.SUCCESS
        assert await group.leader() == x
        group.controllers[x].context.offsets.commit("cg-after-transfer", TOPIC, 0, 1)
        await trio.sleep(70)  # a few metadata sync rounds
        assert group.controllers[z].context.offsets.query("cg-after-transfer", TOPIC, 0) == 1


async def test_a_lone_delayed_and_timer_message_on_an_idle_leader_are_delivered_on_time(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A delayed or timer message reaches its queue only when its entry commits, after the wake-up its rewrite gave
    the delay level or the timer: an idle one found nothing then and slept a minute (both came 60 s late)."""
    group, leader = await start_group(tmp_path)
    try:
        virtual_store_clock(group)
        await wait_services_on(group, leader)
        await trio.sleep(120)  # nothing pending: the services sleep
        async with Producer("pg-dledger-idle", group.namesrv_addr) as producer:
            await producer.send(Message(TOPIC, b"level-1", delay_level=1))  # 1 s
            await producer.send(Message(TOPIC, b"timer-2s", properties={"TIMER_DELAY_SEC": "2"}))
            sent_ms = group.store(leader).config.now_ms()
        await trio.sleep(5)
        late = {m.body: m.store_timestamp - sent_ms for m in stored(group, leader)}
        assert late.keys() == {b"level-1", b"timer-2s"}
        assert late[b"level-1"] < 2000 and late[b"timer-2s"] < 3000, late
    finally:
        await group.__aexit__(None, None, None)


async def transfer_leadership(group: EmbeddedDLedgerGroup, client: RemotingClient, frm: str, to: str) -> None:
    """DLedger's LEADERSHIP_TRANSFER from ``frm`` to ``to``, once ``to`` holds ``frm``'s log."""
    peers = dledger_config_of(group.config(frm)).peer_map
    with trio.fail_after(60):
        while group.store(to).ledger.end_index != group.store(frm).ledger.end_index:
            await trio.sleep(0.1)
    term = group.store(frm).server.node.member.curr_term
    transfer = LeadershipTransferRequest(group="broker-a", remote_id=frm, term=term, transfer_id=frm, transferee_id=to)
    answer = await client.invoke(peers[frm], request(DLedgerCode.LEADERSHIP_TRANSFER, body=encode(transfer)), 10)
    assert orjson.loads(answer.body)["code"] == DLedgerResult.SUCCESS
    assert await group.leader() == to


async def test_a_member_that_steps_down_copies_from_no_master_until_the_name_server_names_one(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A role change forgets the master address the metadata sync copies from (4.9.8's BrokerController
    ``handleSlaveSynchronize`` sets it to null in ``changeToSlave`` and ``changeToMaster``); the registration's answer
    names the current master. Found by a review: a leader that stepped down while the name server was unreachable kept
    copying from the member it had followed before it led, a follower by then, and lost a topic created while it led
    to that follower's older table."""
    async with EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE) as group, RemotingClient() as client:
        y = await group.leader()
        assert (await client.invoke(group.addr(y), create_topic_request(TOPIC, queues=1), 5)).code == 0
        x, z = [m for m in group.ids if m != y]
        sync_x = group.controllers[x].replication.slave_sync
        assert sync_x is not None
        with trio.fail_after(120):  # the next registration round names y as x's master
            while sync_x.master_addr != group.addr(y):
                await trio.sleep(1)
        await transfer_leadership(group, client, y, x)
        for controller in group.controllers.values():  # the name server becomes unreachable
            controller.context.config = attrs.evolve(controller.context.config, namesrv_addr="127.0.0.1:1")
        answer = await client.invoke(group.addr(x), create_topic_request("CreatedWhileLeading", queues=1), 5)
        assert answer.code == ResponseCode.SUCCESS
        await transfer_leadership(group, client, x, z)
        await trio.sleep(25)  # two metadata sync rounds of x's
        assert group.controllers[x].context.config.broker_role == "SLAVE"
        assert group.controllers[x].context.topics.get("CreatedWhileLeading") is not None


async def test_a_follower_of_a_new_leader_forgets_the_old_master_and_syncs_three_seconds_later(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """DLedgerRoleChangeHandler calls ``changeToSlave`` on every FOLLOWER change, a follower of the new term's leader
    included, and its ``handleSlaveSynchronize`` forgets the master's address and schedules the metadata sync again:
    first round 3 s later, then every 10 s (4.9.8's broker/src/main/java/org/apache/rocketmq/broker/
    BrokerController.java). Found by a review: a member that followed one leader, then the next, kept the first as its
    master, and its rounds kept the phase they had since the broker started."""
    async with EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE) as group, RemotingClient() as client:
        y = await group.leader()
        x, z = [m for m in group.ids if m != y]
        sync_x = group.controllers[x].replication.slave_sync
        assert sync_x is not None
        with trio.fail_after(120):  # a registration round names y as x's master, and x copies from it once
            while sync_x.master_addr != group.addr(y) or sync_x.rounds == 0:
                await trio.sleep(0.1)
        for controller in group.controllers.values():  # no registration answer names a master from here on
            controller.context.config = attrs.evolve(controller.context.config, namesrv_addr="127.0.0.1:1")
        changes: list[tuple[float, str | None]] = []

        def on_role(change: RoleChanged) -> None:  # after the broker's own listener
            if change.role is Role.FOLLOWER:
                changes.append((trio.current_time(), sync_x.master_addr))
                sync_x.master_addr = group.addr(z)  # what the registration's answer would name

        group.store(x).server.role_listeners.append(on_role)
        await transfer_leadership(group, client, y, z)
        assert changes and all(addr is None for _, addr in changes)
        changed_at = changes[-1][0]
        begun: list[float] = []
        with trio.fail_after(60):
            while len(begun) < 2:
                await trio.sleep(0.01)
                started = sync_x.last_round_started
                if started is not None and started > changed_at and started not in begun:
                    begun.append(started)
        assert [t - changed_at for t in begun] == pytest.approx([3.0, 13.0], abs=0.05)


NO_HA_SERVICE = "Can not get HARuntimeInfo, may be duplicationEnable is true"


async def test_ha_status_in_dledger_mode_answers_there_is_no_ha_service(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """GET_BROKER_HA_STATUS (907, ``mqadmin haStatus``): RocketMQ 5.3.3's DLedger store has no HA service, and every
    member answers SYSTEM_ERROR with its remark (AdminBrokerProcessor's ``getBrokerHaStatus``)."""
    group, leader = await start_group(tmp_path)
    try:
        await wait_services_on(group, leader)
        async with RemotingClient() as client:
            for member in group.ids:
                answer = await client.invoke(group.addr(member), request(RequestCode.GET_BROKER_HA_STATUS), 5)
                assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, NO_HA_SERVICE), member
    finally:
        await group.__aexit__(None, None, None)
