"""Three brokers in DLedger mode and a name server in one process (broker/embedded_dledger.py), on real sockets under
virtual time: the leader
registers as brokerId 0, sends are acknowledged once a majority has them and land in every member's ConsumeQueue,
a follower refuses sends with SERVICE_NOT_AVAILABLE, and when the leader stops another member takes over with
every acknowledged message in place and queue offsets that go on from where they were."""

from __future__ import annotations

import base64
import contextlib
import math
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import trio
import trio.testing

from broker.context import config_dir_of
from broker.controller import BrokerController
from broker.embedded_dledger import EmbeddedDLedgerGroup
from client.errors import MQClientError
from client.message import Message, SendStatus
from client.producer import Producer
from dledger.codes import RequestCode as DLedgerCode
from dledger.commitlog_store import DLedgerMessageStore
from processors.send import SendMessageProcessor
from remoting.client import RemotingClient
from remoting.codec.batch_body import BatchEntry, encode_batch_body
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.headers import ConsumerSendMsgBackRequestHeader
from remoting.codec.message import MessageRecord, decode_record
from remoting.errors import RemotingError
from store.metadata_files import ConfigFileError
from store.results import PutStatus
from tests.broker.helpers import create_topic_request
from tests.conftest import SMALL_STORE
from tests.processors.conftest import answers_to_fast_sends, send_request

TOPIC = "DLedgerTopic"
# A lease of 100 s instead of 6: stopping the followers waits on worker threads, during which the virtual clock runs
# ahead, and a 6 s lease could end the leadership before the waits after it are set up.
LONG_LEASE = {"max_heart_beat_leak": 50}


async def send(client: RemotingClient, addr: str, body: bytes, queue_id: int = 0) -> tuple[int, dict[str, str]]:
    answer = await client.invoke(addr, send_request(TOPIC, body, queue_id=queue_id), 10)
    return answer.code, answer.ext_fields


async def leader_alone(group: EmbeddedDLedgerGroup, client: RemotingClient) -> str:
    """The group's leader, holding the topic and one committed message, once its followers stopped: no quorum."""
    leader = await group.leader()
    answer = await client.invoke(group.addr(leader), create_topic_request(TOPIC, queues=2), 5)
    assert answer.code == ResponseCode.SUCCESS
    assert (await send(client, group.addr(leader), b"before"))[0] == ResponseCode.SUCCESS
    with virtual_time_still():
        for member in [m for m in group.ids if m != leader]:
            await group.stop(member)
    return leader


@contextlib.contextmanager
def virtual_time_still() -> Iterator[None]:
    """No autojump while members stop or start: their files close and load in worker threads, and autojump would
    run the other members' timers (leases, the minute's statistics) on for as long as that takes in real time."""
    clock = trio.lowlevel.current_clock()
    assert isinstance(clock, trio.testing.MockClock)
    threshold, clock.autojump_threshold = clock.autojump_threshold, math.inf
    try:
        yield
    finally:
        clock.autojump_threshold = threshold


@pytest.mark.parametrize("batch", [False, True], ids=["push", "batch_push"])
async def test_a_dledger_group_acknowledges_on_a_majority_and_fails_over(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, batch: bool
) -> None:
    overrides = {**SMALL_STORE, "enable_batch_push": batch}
    async with EmbeddedDLedgerGroup(tmp_path, **overrides) as group, RemotingClient() as client:
        leader = await group.leader()
        answer = await client.invoke(group.addr(leader), create_topic_request(TOPIC, queues=2), 5)
        assert answer.code == ResponseCode.SUCCESS  # on the master; a follower refuses topic changes
        assert group.controllers[leader].context.config.broker_id == 0
        follower = next(m for m in group.controllers if m != leader)
        assert group.controllers[follower].context.config.broker_role == "SLAVE"
        assert group.controllers[follower].context.config.broker_id == int(follower[1:]) + 1

        acked: list[tuple[int, bytes]] = []

        async def one(body: bytes) -> None:
            code, fields = await send(client, group.addr(leader), body)
            assert code == ResponseCode.SUCCESS, fields
            acked.append((int(fields["queueOffset"]), body))

        async with trio.open_nursery() as senders:  # together, so a batch push carries several
            for i in range(5):
                senders.start_soon(one, b"m%d" % i)
        acked.sort()
        assert [o for o, _ in acked] == list(range(5))
        earliest = group.store(leader).earliest_store_time()  # the first record's, not the entry header's
        assert abs(earliest - group.store(leader).config.now_ms()) < 60_000
        code, _ = await send(client, group.addr(follower), b"refused")
        assert code == ResponseCode.SERVICE_NOT_AVAILABLE
        # The name server routes the topic to the leader as brokerId 0.
        await trio.sleep(2)
        route = await client.invoke(
            group.namesrv_addr, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}), 5
        )
        brokers = orjson.loads(route.body)["brokerDatas"]
        assert brokers[0]["brokerAddrs"]["0"] == group.addr(leader)

        await group.stop(leader)
        new_leader = await group.leader()
        assert new_leader != leader
        code, fields = await send(client, group.addr(new_leader), b"after")
        assert code == ResponseCode.SUCCESS, fields
        acked.append((int(fields["queueOffset"]), b"after"))
        assert acked[-1][0] == 5  # offsets go on from the old leader's
        await trio.sleep(3)
        for member in group.controllers:
            store = group.store(member)
            for offset, body in acked:
                got = store.get(TOPIC, 0, offset, 1)
                assert got.messages, (member, offset)
                assert decode_record(got.messages[0]).body == body
        await group.start(leader)  # the old leader comes back as a follower and catches up
        await trio.sleep(5)
        assert not group.store(leader).writable
        assert group.store(leader).ledger.committed_index == group.store(new_leader).ledger.committed_index
        got = group.store(leader).get(TOPIC, 0, 5, 1)
        assert got.messages and decode_record(got.messages[0]).body == b"after"


async def test_a_leader_without_a_quorum_answers_its_sends_instead_of_hanging(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE, **LONG_LEASE) as group, RemotingClient() as client:
        leader = await leader_alone(group, client)
        store = group.store(leader)
        statuses: list[PutStatus] = []
        record = MessageRecord(
            TOPIC, b"direct", 0, 0, "", 0, 0, b"\x7f\x00\x00\x01\x00\x00\x00\x01", store.store_host, 0
        )
        appended = store.append(record)
        assert store.put_waits.notify(appended.end_offset, True, statuses.append) is None
        with trio.fail_after(15):  # maxWaitAckTimeMs (2.5 s)
            code, _ = await send(client, group.addr(leader), b"no quorum")
        # Never SEND_OK: SYSTEM_ERROR, as DLedgerCommitLog's OS_PAGECACHE_BUSY (WAIT_QUORUM_ACK_TIMEOUT) is answered.
        assert code == ResponseCode.SYSTEM_ERROR
        assert statuses == [PutStatus.OS_PAGECACHE_BUSY]


async def test_the_commit_log_end_a_leader_reports_is_what_a_majority_holds(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """``commitLogMaxOffset`` (GET_BROKER_RUNTIME_INFO, ``mqadmin brokerStatus``) is the committed end, as RocketMQ
    4.9.8's ``DLedgerCommitLog.getMaxOffset()`` returns ``getCommittedPos()``: an entry the leader wrote but no
    follower holds (its send answered SYSTEM_ERROR) is not part of the CommitLog. Everything committed is
    dispatched on a leader: ``dispatchBehindBytes`` 0."""
    async with EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE, **LONG_LEASE) as group, RemotingClient() as client:
        leader = await leader_alone(group, client)
        with trio.fail_after(15):
            code, _ = await send(client, group.addr(leader), b"no quorum")
        assert code == ResponseCode.SYSTEM_ERROR  # never committed
        ledger = group.store(leader).ledger
        assert ledger.end_index > ledger.committed_index and ledger.write_pos > ledger.committed_pos > 0
        info = await client.invoke(group.addr(leader), request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
        table = orjson.loads(info.body)["table"]
        assert int(table["commitLogMaxOffset"]) == ledger.committed_pos
        assert table["dispatchBehindBytes"] == "0"


async def test_our_producer_goes_on_with_the_new_leader_after_a_failover(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The Python client keeps sending through a leader stop: its sends fail until the new leader registers; the
    route, re-read after each failed send (client/master_watch.py), then names it and they succeed there; nothing
    it was told was sent is lost."""
    async with EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE) as group:
        leader = await group.leader()
        async with RemotingClient() as client:
            await client.invoke(group.addr(leader), create_topic_request(TOPIC, queues=2), 5)
        async with Producer("pg-dledger", group.namesrv_addr) as producer:
            sent = [await producer.send(Message(TOPIC, b"first"))]
            await group.stop(leader)
            started = trio.current_time()
            with trio.fail_after(120):
                while True:
                    try:
                        result = await producer.send(Message(TOPIC, b"after"))
                    except (MQClientError, RemotingError):
                        await trio.sleep(1)
                        continue
                    if result.send_status is SendStatus.SEND_OK:
                        sent.append(result)
                        break
            took = trio.current_time() - started
        new_leader = await group.leader()
        # The stopped leader's port refuses connections, so the followers elect at once (one random vote interval,
        # 0.3-1 s, no 6 s heartbeat leak); the new leader registers on its first commit and the producer's route,
        # re-read after its failed sends, names it: no 30 s route poll.
        assert new_leader != leader and took <= 3, took
        store = group.store(new_leader)
        for result in sent:
            got = store.get(TOPIC, result.queue_id, result.queue_offset, 1)
            assert got.messages and decode_record(got.messages[0]).body in (b"first", b"after")


async def test_sends_committed_in_one_round_are_answered_in_one_write(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The SEND_OK answers of the sends one commit releases leave in one write to their connection (the commit's
    effects run as a release pass, as a SYNC_FLUSH group commit's callbacks do), not one for the first and the rest
    after a scheduler pass."""
    sends = 6
    async with EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE, enable_batch_push=True) as group:
        leader = await group.leader()
        async with RemotingClient() as client:
            answer = await client.invoke(group.addr(leader), create_topic_request(TOPIC, queues=2), 5)
            assert answer.code == ResponseCode.SUCCESS
        processor = SendMessageProcessor(group.controllers[leader].context)
        requests = [send_request(TOPIC, b"m%d" % i, queue_id=i % 2) for i in range(sends)]
        # no checkpoint between the sends: one batch push per follower, one commit
        answers, writes = await answers_to_fast_sends(processor, requests, timeout=10)
        assert sorted(answer["opaque"] for answer in answers) == [r.opaque for r in requests]
        assert all(answer["code"] == ResponseCode.SUCCESS for answer in answers)
        assert writes == 1


async def test_leaving_the_group_unregisters_every_member_before_the_name_server_stops(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Leaving the ``async with`` stops every broker and waits for it, then the name server, so each member's
    shutdown still reaches the name server with its UNREGISTER_BROKER. Found by a review: the name server was
    cancelled with the brokers, and their unregistrations failed."""
    async with EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE) as group:
        await group.leader()
    failed = [r.getMessage() for r in caplog.records if "unregister broker" in r.getMessage()]
    assert not failed, failed


async def test_each_member_serves_the_vip_channel_at_its_port_minus_2(tmp_path: Path) -> None:
    """A DLedger broker opens its fast (VIP) listener as any 4.9.8 broker does (BrokerController.initialize), so
    a client with ``vipChannelEnabled`` (rocketmq-dashboard's default) reaches every member there."""
    async with EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE) as group, RemotingClient() as client:
        for member in group.ids:
            host, port = group.addr(member).rsplit(":", 1)
            answer = await client.invoke(f"{host}:{int(port) - 2}", request(RequestCode.GET_BROKER_CONFIG), 10)
            assert answer.code == ResponseCode.SUCCESS, (member, answer.remark)


async def test_a_broker_whose_start_fails_after_its_store_loaded_lets_go_of_the_dledger_files(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A start that fails once the store is loaded (here an unreadable ``topics.json``) closes the store, its DLedger
    entry and index files included, so the broker can start again in this process without the mappings of the failed
    attempt left behind (found by a review: the store's close let the ledger's files be, only a running DLedger
    server closes them)."""
    async with EmbeddedDLedgerGroup(tmp_path, members=1, **SMALL_STORE) as group, RemotingClient() as client:
        member = await group.leader()
        assert (await client.invoke(group.addr(member), create_topic_request(TOPIC, queues=1), 5)).code == 0
        assert (await send(client, group.addr(member), b"kept"))[0] == ResponseCode.SUCCESS
        await group.stop(member)
        config_dir = config_dir_of(group.config(member))
        for name in ("topics.json", "topics.json.bak"):
            (config_dir / name).write_text("{not json")
        controller = BrokerController(group.config(member))
        with pytest.raises(ConfigFileError):
            await controller.serve()
        store = controller.context.store
        assert isinstance(store, DLedgerMessageStore)
        ledger = store.ledger
        assert ledger.data.files and ledger.index.files
        assert all(mf.fd < 0 for mf in ledger.data.files + ledger.index.files)


async def test_a_send_the_dledger_server_refuses_is_answered_as_dledger_commit_logs_busy_page_cache(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """An append the DLedger server refuses at once (here an entry no 64 KiB entry file holds; a leadership transfer
    or a full pending queue alike) is DLedgerCommitLog's OS_PAGECACHE_BUSY, which SendMessageProcessor answers
    SYSTEM_ERROR "[PC_SYNCHRONIZED]broker busy, start flow control for a while" and the store counts as a failed put
    (found by a review: answered SERVICE_NOT_AVAILABLE, uncounted, as if the broker were a slave)."""
    settings = {**SMALL_STORE, "mapped_file_size_commit_log": 64 << 10}
    async with EmbeddedDLedgerGroup(tmp_path, members=1, **settings) as group, RemotingClient() as client:
        member = await group.leader()
        assert (await client.invoke(group.addr(member), create_topic_request(TOPIC, queues=1), 5)).code == 0
        stats = group.controllers[member].context.stats
        failed = stats.put_failed
        answer = await client.invoke(group.addr(member), send_request(TOPIC, bytes(100 << 10)), 10)
        assert (answer.code, answer.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
        )
        assert stats.put_failed == failed + 1
        assert (await send(client, group.addr(member), b"fits"))[0] == ResponseCode.SUCCESS


async def test_a_send_whose_entry_outgrows_dledgers_4_mib_entry_buffer_is_refused_with_nothing_written(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A body within ``maxMessageSize`` whose record with the 48-byte entry header exceeds 4 MiB: DLedger 0.3.1.2
    encodes every entry into its 4 MiB ``localEntryBuffer`` (DLedgerMmapFileStore.appendAsLeader), which overflows
    before anything is written, and 4.9.8's DLedgerCommitLog answers the exception UNKNOWN_ERROR (SYSTEM_ERROR
    "UNKNOWN_ERROR"), the queue offset not taken. Stored, it made an entry no DLedger member takes; with a larger
    ``maxMessageSize`` a push too big for a 16 MiB frame, which stalls the group."""
    settings = {**SMALL_STORE, "max_message_size": 8 << 20}
    async with EmbeddedDLedgerGroup(tmp_path, members=1, **settings) as group, RemotingClient() as client:
        member = await group.leader()
        assert (await client.invoke(group.addr(member), create_topic_request(TOPIC, queues=1), 5)).code == 0
        store = group.controllers[member].context.store
        assert isinstance(store, DLedgerMessageStore)
        stats = group.controllers[member].context.stats
        failed, end = stats.put_failed, store.ledger.end_index
        for size in ((4 << 20) - 64, 6 << 20):
            answer = await client.invoke(group.addr(member), send_request(TOPIC, bytes(size)), 10)
            assert answer.code == ResponseCode.SYSTEM_ERROR
            assert (answer.remark or "").startswith("UNKNOWN_ERROR")
        assert stats.put_failed == failed + 2
        assert store.ledger.end_index == end
        code, fields = await send(client, group.addr(member), bytes((4 << 20) - 200))
        assert (code, fields["queueOffset"]) == (ResponseCode.SUCCESS, "0")


async def test_a_send_the_quorum_does_not_acknowledge_in_time_is_answered_as_a_busy_page_cache(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """DLedgerCommitLog (4.9.8) turns an append's WAIT_QUORUM_ACK_TIMEOUT into OS_PAGECACHE_BUSY ("do not return
    flush_slave_timeout to the client"), as it does an append refused at once: SendMessageProcessor answers a send
    SYSTEM_ERROR "[PC_SYNCHRONIZED]broker busy, start flow control for a while" and a send-back SYSTEM_ERROR
    "OS_PAGECACHE_BUSY" (the status's name). Found by a review: both were answered "UNKNOWN_ERROR", the status of
    a leader that lost its term."""
    async with EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE, **LONG_LEASE) as group, RemotingClient() as client:
        leader = await leader_alone(group, client)
        addr = group.addr(leader)
        [before] = [decode_record(v) for v in group.store(leader).get(TOPIC, 0, 0, 1).messages]
        with trio.fail_after(15):  # maxWaitAckTimeMs (2.5 s)
            answer = await client.invoke(addr, send_request(TOPIC, b"no quorum"), 10)
        assert (answer.code, answer.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
        )
        # Not "sendOK": handlePutMessageResult sets no msgId, queueId or queueOffset (null fields are not sent).
        assert sorted(answer.ext_fields) == ["MSG_REGION", "TRACE_ON"]
        back = ConsumerSendMsgBackRequestHeader(
            offset=before.commit_log_offset, group="GroupOfNoQuorum", delay_level=0, origin_topic=TOPIC
        )
        with trio.fail_after(15):
            answer = await client.invoke(addr, request(RequestCode.CONSUMER_SEND_MSG_BACK, back.to_ext_fields()), 10)
        assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "OS_PAGECACHE_BUSY")


async def test_after_an_append_held_the_dledger_lock_too_long_sends_are_rejected(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """DLedgerCommitLog times its appends too (``beginTimeInDledgerLock``, its ``getBeginTimeInLock``, which
    DefaultMessageStore.isOSPageCacheBusy reads): in DLedger mode an append held past ``osPageCacheBusyTimeOutMills``
    makes the store page-cache busy and the next send is answered SYSTEM_BUSY ``[REJECTREQUEST]``, as on a plain
    master (found by a review: the DLedger store's appends were never timed, so it was never busy). A limit of 0 ms
    makes every append too long; the clock stops once the leader serves, so the store stays busy until it moves."""
    settings = {**SMALL_STORE, "os_page_cache_busy_time_out_mills": 0}
    async with EmbeddedDLedgerGroup(tmp_path, members=1, **settings) as group, RemotingClient() as client:
        member = await group.leader()
        addr = group.addr(member)
        assert (await client.invoke(addr, create_topic_request(TOPIC, queues=1), 5)).code == 0
        autojump_clock.autojump_threshold = math.inf
        store = group.store(member)
        assert (await send(client, addr, b"first"))[0] == ResponseCode.SUCCESS
        assert store.is_os_page_cache_busy()
        answer = await client.invoke(addr, send_request(TOPIC, b"rejected"), 5)
        assert (answer.code, answer.remark) == (
            ResponseCode.SYSTEM_BUSY,
            "[REJECTREQUEST]system busy, start flow control for a while",
        )
        autojump_clock.jump(1.0)  # past any hold of these appends
        autojump_clock.autojump_threshold = 0
        assert (await send(client, addr, b"later"))[0] == ResponseCode.SUCCESS


async def test_a_send_the_quorum_never_acknowledged_counts_in_no_put_statistics(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 4.9.8's DLedgerCommitLog.asyncPutMessage counts a put in the store totals only once the quorum
    acknowledged it (PUT_OK), and SendMessageProcessor ``handlePutMessageResult`` adds to TOPIC_PUT_NUMS /
    BROKER_PUT_NUMS only for a send it answers as sent: an entry the leader wrote that never committed (its send
    answered SYSTEM_ERROR) counts nowhere, while the committed one before it counts with its bytes."""
    async with EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE, **LONG_LEASE) as group, RemotingClient() as client:
        leader = await leader_alone(group, client)
        addr = group.addr(leader)
        with trio.fail_after(15):
            code, _ = await send(client, addr, b"no quorum")
        assert code == ResponseCode.SYSTEM_ERROR  # never committed
        await trio.sleep(11)  # past the put items' next 10-second sample
        info = await client.invoke(addr, request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
        table = orjson.loads(info.body)["table"]
        assert (table["msgPutTotalTodayNow"], table["putMessageTimesTotal"]) == ("1", "1")
        [before] = [decode_record(v) for v in group.store(leader).get(TOPIC, 0, 0, 1).messages]
        assert table["putMessageSizeTotal"] == str(before.store_size)
        fields = {"statsName": "TOPIC_PUT_NUMS", "statsKey": TOPIC}
        view = await client.invoke(addr, request(RequestCode.VIEW_BROKER_STATS_DATA, fields), 5)
        assert view.code == ResponseCode.SUCCESS, view.remark
        assert orjson.loads(view.body)["statsMinute"]["sum"] == 1


async def test_a_batch_the_quorum_never_acknowledged_takes_no_put_call_back(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A batch send counts one call in TOPIC_PUT_NUMS only when it counts at all: 4.9.8's ``handlePutMessageResult``
    adds ``incTopicPutNums(topic, msgNum, 1)`` for a send it answers as sent, never for a DLedger batch answered
    SYSTEM_ERROR for want of a quorum, so the topic's calls stay those of its committed sends."""
    async with EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE, **LONG_LEASE) as group, RemotingClient() as client:
        leader = await leader_alone(group, client)
        addr = group.addr(leader)
        head = send_request(TOPIC, code=RequestCode.SEND_BATCH_MESSAGE, batch="true")
        body = encode_batch_body([BatchEntry(b"b%d" % i) for i in range(4)])
        batch = RemotingCommand(code=head.code, opaque=head.opaque, ext_fields=head.ext_fields, body=body)
        with trio.fail_after(15):
            answer = await client.invoke(addr, batch, 10)
        assert answer.code == ResponseCode.SYSTEM_ERROR  # never committed
        await trio.sleep(11)  # past the put items' next 10-second sample
        fields = {"statsName": "TOPIC_PUT_NUMS", "statsKey": TOPIC}
        view = await client.invoke(addr, request(RequestCode.VIEW_BROKER_STATS_DATA, fields), 5)
        assert view.code == ResponseCode.SUCCESS, view.remark
        minute = orjson.loads(view.body)["statsMinute"]
        assert (minute["sum"], minute["avgpt"]) == (1, 1.0), "the one committed send: 1 message in 1 call"


@pytest.mark.parametrize("batch", [False, True], ids=["send", "batch"])
async def test_a_send_answered_without_a_quorum_counts_no_put_when_it_commits_later(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, batch: bool
) -> None:
    """4.9.8's DLedgerCommitLog.asyncPutMessage counts a put only when the append's own future says PUT_OK; an
    entry whose quorum acknowledgement timed out stays in the leader's log and commits once the followers are back,
    but its send was answered SYSTEM_ERROR and it never counts (the leader's ReputMessageService counts only on a
    SLAVE), so the leader's put totals and TOPIC_PUT_NUMS keep the two acknowledged sends around it, one message in
    one call each."""
    async with EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE, **LONG_LEASE) as group, RemotingClient() as client:
        leader = await leader_alone(group, client)
        addr = group.addr(leader)
        failed = send_request(TOPIC, b"no quorum")
        stored = 2
        if batch:
            head = send_request(TOPIC, code=RequestCode.SEND_BATCH_MESSAGE, batch="true")
            body = encode_batch_body([BatchEntry(b"b%d" % i) for i in range(4)])
            failed = RemotingCommand(code=head.code, opaque=head.opaque, ext_fields=head.ext_fields, body=body)
            stored = 5
        with trio.fail_after(15):
            answer = await client.invoke(addr, failed, 10)
        assert answer.code == ResponseCode.SYSTEM_ERROR
        with virtual_time_still():  # one follower: two restarted at once may elect one of them and truncate it
            await group.start(next(m for m in group.ids if m != leader))
        while len(group.store(leader).get(TOPIC, 0, 0, 8).messages) < stored:  # the failed send commits
            await trio.sleep(0.1)
        with trio.fail_after(30):
            assert (await send(client, addr, b"after"))[0] == ResponseCode.SUCCESS
        assert len(group.store(leader).get(TOPIC, 0, 0, 8).messages) == stored + 1
        assert await group.leader() == leader
        await trio.sleep(11)  # past the put items' next 10-second sample
        info = await client.invoke(addr, request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
        table = orjson.loads(info.body)["table"]
        assert (table["msgPutTotalTodayNow"], table["putMessageTimesTotal"]) == ("2", "2")
        fields = {"statsName": "TOPIC_PUT_NUMS", "statsKey": TOPIC}
        view = await client.invoke(addr, request(RequestCode.VIEW_BROKER_STATS_DATA, fields), 5)
        assert view.code == ResponseCode.SUCCESS, view.remark
        minute = orjson.loads(view.body)["statsMinute"]
        assert (minute["sum"], minute["avgpt"]) == (2, 1.0)


async def test_a_send_back_read_by_the_statistics_before_it_is_answered_counts_as_a_send_back(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's ``asyncConsumerSendMsgBack`` (broker/src/main/java/org/apache/rocketmq/broker/processor/
    SendMessageProcessor.java) counts a DLQ copy in no put item and a send-back in no BROKER_PUT_NUMS. A DLedger
    leader dispatches the copy when the quorum commits it, a scheduler pass before the send-back is answered: the
    statistics read then (a sampling second or a reader such as GET_BROKER_RUNTIME_INFO, here one at the commit)
    must already know the copy is a send-back's, not count it as a sent message."""
    async with EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE, **LONG_LEASE) as group, RemotingClient() as client:
        leader = await group.leader()
        addr = group.addr(leader)
        assert (await client.invoke(addr, create_topic_request(TOPIC, queues=1), 5)).code == ResponseCode.SUCCESS
        assert (await send(client, addr, b"sent"))[0] == ResponseCode.SUCCESS
        [sent] = [decode_record(v) for v in group.store(leader).get(TOPIC, 0, 0, 1).messages]
        stats = group.controllers[leader].context.stats
        group.store(leader).server.commit_listeners.append(lambda _index: stats.count_puts())
        dlq_group = "GroupOfSendBackStats"
        back = ConsumerSendMsgBackRequestHeader(
            offset=sent.commit_log_offset, group=dlq_group, delay_level=-1, origin_topic=TOPIC
        )
        with trio.fail_after(15):
            answer = await client.invoke(addr, request(RequestCode.CONSUMER_SEND_MSG_BACK, back.to_ext_fields()), 10)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert group.store(leader).max_offset_in_queue(f"%DLQ%{dlq_group}", 0) == 1
        await trio.sleep(11)  # past the put items' next 10-second sample
        fields = {"statsName": "TOPIC_PUT_NUMS", "statsKey": f"%DLQ%{dlq_group}"}
        view = await client.invoke(addr, request(RequestCode.VIEW_BROKER_STATS_DATA, fields), 5)
        assert (view.code, view.remark) == (
            ResponseCode.SYSTEM_ERROR,
            f"The stats <TOPIC_PUT_NUMS> <%DLQ%{dlq_group}> not exist",
        )
        fields = {"statsName": "BROKER_PUT_NUMS", "statsKey": group.config(leader).broker_cluster_name}
        view = await client.invoke(addr, request(RequestCode.VIEW_BROKER_STATS_DATA, fields), 5)
        assert view.code == ResponseCode.SUCCESS, view.remark
        assert orjson.loads(view.body)["statsMinute"]["sum"] == 1, "the one send, not the send-back"


async def test_dledger_get_on_a_brokers_dledger_port_answers_the_record_of_a_send(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """DLedger's client ``get(index)`` (GET 50002) on the DLedger port of a broker in DLedger mode: the leader's entry
    at its last index is the CommitLog record of the last send (DLedgerCommitLog stores each message as one entry);
    a follower answers 404 NOT_LEADER naming the leader."""
    async with EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE) as group, RemotingClient() as client:
        leader = await group.leader()
        assert (await client.invoke(group.addr(leader), create_topic_request(TOPIC), 5)).code == ResponseCode.SUCCESS
        assert (await send(client, group.addr(leader), b"read me back"))[0] == ResponseCode.SUCCESS
        ports = dict(peer.split("-", 1) for peer in group.peers.split(";"))
        index = group.store(leader).ledger.end_index
        # A follower names its leader once a heartbeat came (DLedger's handleHeartBeat); the quorum of the send
        # needed only one of them, so the other may not have heard from the leader yet.
        while any(group.store(m).server.node.member.leader_id != leader for m in group.ids if m != leader):
            await trio.sleep(0.1)
        for member in group.ids:
            body = orjson.dumps({"group": group.config(member).dleger_group, "remoteId": member, "beginIndex": index})
            answer = orjson.loads((await client.invoke(ports[member], request(DLedgerCode.GET, body=body), 5)).body)
            if member != leader:
                assert (answer["code"], answer["leaderId"], answer["entries"]) == (404, leader, [])
                continue
            assert answer["code"] == 200
            assert decode_record(base64.b64decode(answer["entries"][0]["body"])).body == b"read me back"
