"""The admin's message queries against RocketMQ 4.9.8's MQAdminImpl
(client/src/main/java/org/apache/rocketmq/client/impl/MQAdminImpl.java): which of the brokers' answers a key query
and a unique-key query keep, and how long VIEW_MESSAGE_BY_ID waits. Virtual time against a real name server; the
brokers are TCP listeners registered with it (see test_admin_query_wait)."""

from __future__ import annotations

import datetime
import functools
import socket
import struct
import time

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.errors import MQClientError
from client.message import Message, MessageExt
from client.mqadmin_messages import _view_message
from client.producer import Producer
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.frame import FrameDecoder, encode_command
from remoting.codec.message import MessageRecord, encode_record
from remoting.codec.msgid import offset_msg_id
from tests.client.test_admin_query_wait import TOPIC, _register, _silent_broker, _slow_broker

UNIQ = "7F00000100002A9F0000000000000001"


async def test_a_unique_key_query_keeps_only_the_earliest_copy_across_brokers(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """MQAdminImpl.queryMessage with isUniqKey keeps one message, the one stored first, whatever the brokers answer
    (a resent message stored on two brokers); ``queryMsgByUniqueKey -a`` prints that list. Ours kept every copy."""
    props = f"UNIQ_KEY\x01{UNIQ}"
    late = encode_record(MessageRecord(TOPIC, b"copy stored later", properties=props), store_timestamp=5000)
    early = encode_record(MessageRecord(TOPIC, b"copy stored first", properties=props), store_timestamp=3000)
    async with trio.open_nursery() as nursery, RemotingClient() as registrar:
        namesrv = embedded_cluster.namesrv_addr
        await _register(registrar, namesrv, "broker-late", await _slow_broker(nursery, late))
        await _register(registrar, namesrv, "broker-early", await _slow_broker(nursery, early))
        async with Admin(namesrv) as admin:
            found = await admin.query_msg_by_unique_key(TOPIC, UNIQ)
        nursery.cancel_scope.cancel()
    assert [m.body for m in found] == [b"copy stored first"]


async def test_a_key_query_matches_keys_tokens_only_not_the_unique_key(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The broker indexes a message's UNIQ_KEY and its KEYS tokens under the same ``topic#key`` hash
    (store/src/main/java/org/apache/rocketmq/store/index/IndexService.java buildIndex), and MQAdminImpl.queryMessage
    without isUniqKey keeps only the messages one of whose KEYS equals the key. Ours kept a UNIQ_KEY match too."""
    by_keys = MessageRecord(TOPIC, b"keyed", properties="KEYS\x01other needle")
    by_uniq = MessageRecord(TOPIC, b"uniq only", properties="UNIQ_KEY\x01needle")
    body = encode_record(by_keys, store_timestamp=1) + encode_record(by_uniq, store_timestamp=2)
    async with trio.open_nursery() as nursery, RemotingClient() as registrar:
        namesrv = embedded_cluster.namesrv_addr
        await _register(registrar, namesrv, "broker-a", await _slow_broker(nursery, body))
        async with Admin(namesrv) as admin:
            found = await admin.query_msg_by_key(TOPIC, "needle")
        nursery.cancel_scope.cancel()
    assert [m.body for m in found] == [b"keyed"]


async def test_view_message_by_id_waits_six_seconds_as_mqadminimpl(autojump_clock: trio.testing.MockClock) -> None:
    """MQAdminImpl.viewMessage passes its own ``timeoutMillis`` (6000, whatever the client's settings) to
    MQClientAPIImpl.viewMessage; ours waited the 3 s rpc timeout."""
    async with trio.open_nursery() as nursery:
        addr = await _silent_broker(nursery)
        host, port = addr.rsplit(":", 1)
        msg_id = offset_msg_id(socket.inet_aton(host) + struct.pack(">i", int(port)), 0)
        async with Admin("127.0.0.1:1") as admin:
            started = trio.current_time()
            with pytest.raises(Exception) as raised:
                await admin.query_msg_by_id(msg_id)
            waited = trio.current_time() - started
        nursery.cancel_scope.cancel()
    assert not isinstance(raised.value, MQClientError), raised.value
    assert 6 <= waited < 7, f"VIEW_MESSAGE_BY_ID gave up after {waited:.1f} s of virtual time"


async def test_a_message_indexed_twice_under_a_key_is_found_twice(embedded_cluster: EmbeddedCluster) -> None:
    """IndexService.buildIndex indexes each KEYS token, so ``KEYS=dup dup`` puts two entries under ``topic#dup``;
    IndexFile.selectPhyOffset collects both and DefaultMessageStore.queryMessage reads the record at each offset
    (store/src/main/java/org/apache/rocketmq/store/, 4.9.8): MQAdminImpl.queryMessage keeps both, and
    ``queryMsgByKey`` prints the message twice. Ours answered each record once."""
    namesrv = embedded_cluster.namesrv_addr
    async with Admin(namesrv) as admin:
        await admin.create_topic("KeyedTwice", read_queue_nums=1, write_queue_nums=1)
        async with Producer("pg-keyed-twice", namesrv) as producer:
            await producer.send(Message("KeyedTwice", b"twice", keys="dup dup"))
        found: list[MessageExt] = []
        with trio.fail_after(30):
            while not found:  # the index is built after the send's answer
                await trio.sleep(0.05)
                found = await admin.query_msg_by_key("KeyedTwice", "dup")
    assert [m.body for m in found] == [b"twice", b"twice"]


async def _capturing_broker(nursery: trio.Nursery, body: bytes, begins: list[int]) -> str:
    """A TCP listener answering every QUERY_MESSAGE at once with ``body``, noting its ``beginTimestamp``; a
    VIEW_MESSAGE_BY_ID with SYSTEM_ERROR; anything else with SUCCESS."""

    async def serve(stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        while data := await stream.receive_some():
            decoder.receive_data(data)
            while (command := decoder.next_command()) is not None:
                await stream.send_all(encode_command(answer(command)))

    def answer(command: RemotingCommand) -> RemotingCommand:
        if command.code == RequestCode.QUERY_MESSAGE:
            begins.append(int(command.ext_fields["beginTimestamp"]))
            fields = {"indexLastUpdateTimestamp": "0", "indexLastUpdatePhyoffset": "0"}
            return command.response(ResponseCode.SUCCESS, None, fields, body)
        if command.code == RequestCode.VIEW_MESSAGE_BY_ID:
            return command.response(ResponseCode.SYSTEM_ERROR, "no message at that offset")
        return command.response(ResponseCode.SUCCESS)

    listeners = await nursery.start(functools.partial(trio.serve_tcp, serve, 0, host="127.0.0.1"))
    return f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"


def _uniq_key_made_at(epoch_ms: int) -> str:
    """A producer's UNIQ_KEY (IPv4 127.0.0.1, pid 1) made at ``epoch_ms``: its time is the milliseconds since the start
    of that local month."""
    made = datetime.datetime.fromtimestamp(epoch_ms / 1000).astimezone()
    month_start = made.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    since = epoch_ms - int(month_start.timestamp() * 1000)
    return (socket.inet_aton("127.0.0.1") + struct.pack(">HIiH", 1, 0xABCDEF01, since, 7)).hex().upper()


async def test_a_unique_key_viewed_for_a_consumer_is_looked_up_from_a_second_before_its_time(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """``queryMsgByUniqueKey -g -d`` reads the message with DefaultMQAdminExtImpl.viewMessage(topic, msgId): a msgId
    that is no offset id is looked up with MQAdminImpl.queryMessageByUniqKey(topic, uniqKey), from
    MessageClientIDSetter.getNearlyTimeFromID(uniqKey) less 1000 ms (client/src/main/java/org/apache/rocketmq/client/
    impl/MQAdminImpl.java, 4.9.8). Ours looked it up from 0."""
    made = int(time.time() * 1000) - 3_600_000  # an hour ago
    uniq = _uniq_key_made_at(made)
    record = encode_record(MessageRecord(TOPIC, b"viewed", properties=f"UNIQ_KEY\x01{uniq}"), store_timestamp=made)
    begins: list[int] = []
    async with trio.open_nursery() as nursery, RemotingClient() as registrar:
        namesrv = embedded_cluster.namesrv_addr
        await _register(registrar, namesrv, "broker-viewed", await _capturing_broker(nursery, record, begins))
        async with Admin(namesrv) as admin:
            msg = await _view_message(admin, TOPIC, uniq)
        nursery.cancel_scope.cancel()
    assert msg.body == b"viewed"
    assert begins == [made - 1000]


async def test_a_key_query_keeps_the_records_before_one_that_does_not_decode(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """MessageDecoder.decodes stops at a record it cannot decode (decode catches the error and answers null) and keeps
    the ones before it (common/src/main/java/org/apache/rocketmq/common/message/MessageDecoder.java), so
    MQAdminImpl.queryMessage still finds them. Ours passed the whole broker answer over: nothing was found."""
    good = encode_record(MessageRecord(TOPIC, b"readable", properties="KEYS\x01needle"), store_timestamp=1)
    torn = encode_record(MessageRecord(TOPIC, b"torn", properties="KEYS\x01needle"), store_timestamp=2)[:40]
    async with trio.open_nursery() as nursery, RemotingClient() as registrar:
        namesrv = embedded_cluster.namesrv_addr
        await _register(registrar, namesrv, "broker-a", await _slow_broker(nursery, good + torn))
        async with Admin(namesrv) as admin:
            found = await admin.query_msg_by_key(TOPIC, "needle")
        nursery.cancel_scope.cancel()
    assert [m.body for m in found] == [b"readable"]
