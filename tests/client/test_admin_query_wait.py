"""How long the admin's QUERY_MESSAGE waits for the brokers of a topic, as RocketMQ 4.9.8's MQAdminImpl.queryMessage
(client/src/main/java/org/apache/rocketmq/client/impl/MQAdminImpl.java): every broker is asked at once (invokeAsync),
each call with ``timeoutMillis * 3`` (MQAdminImpl's timeoutMillis is 6000: 18 s), and the answers are awaited
together for at most ``timeoutMillis * 4`` (24 s); a broker that has not answered by then is passed over. Virtual time
against a real name server; the brokers are TCP listeners registered with it: one answers after 10 s (a big answer, a
busy disk, a long index chain), one never does (a paused broker)."""

from __future__ import annotations

import functools
import json
import zlib

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.frame import FrameDecoder, encode_command
from remoting.codec.message import SYSFLAG_COMPRESSED, MessageRecord, encode_record

TOPIC = "QueriedSlowly"
SLOW_ANSWER_S = 10


async def _slow_broker(nursery: trio.Nursery, body: bytes) -> str:
    """A TCP listener answering every QUERY_MESSAGE after :data:`SLOW_ANSWER_S` seconds with ``body``, any other
    request (the admin instance's heartbeat, 1 s after its start, as Java's) at once."""

    async def serve(stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        async with trio.open_nursery() as answers:
            while data := await stream.receive_some():
                decoder.receive_data(data)
                while (command := decoder.next_command()) is not None:
                    answers.start_soon(answer, stream, command)

    async def answer(stream: trio.SocketStream, command: RemotingCommand) -> None:
        if command.code != RequestCode.QUERY_MESSAGE:  # the admin's heartbeats (and its unregistering at the end)
            await stream.send_all(encode_command(command.response(ResponseCode.SUCCESS)))
            return
        await trio.sleep(SLOW_ANSWER_S)
        fields = {"indexLastUpdateTimestamp": "0", "indexLastUpdatePhyoffset": "0"}
        await stream.send_all(encode_command(command.response(ResponseCode.SUCCESS, None, fields, body)))

    listeners = await nursery.start(functools.partial(trio.serve_tcp, serve, 0, host="127.0.0.1"))
    return f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"


async def _silent_broker(nursery: trio.Nursery) -> str:
    """A TCP listener that reads every request and answers none."""

    async def swallow(stream: trio.SocketStream) -> None:
        while await stream.receive_some():
            pass

    listeners = await nursery.start(functools.partial(trio.serve_tcp, swallow, 0, host="127.0.0.1"))
    return f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"


async def _register(client: RemotingClient, namesrv: str, name: str, addr: str) -> None:
    """Register ``addr`` as the master of broker ``name`` holding :data:`TOPIC`."""
    config = {"order": False, "perm": 6, "readQueueNums": 1, "topicFilterType": "SINGLE_TAG", "topicName": TOPIC,
              "topicSysFlag": 0, "writeQueueNums": 1}  # fmt: skip
    body = json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": 1, "timestamp": 1}, "topicConfigTable": {TOPIC: config}}}).encode()  # fmt: skip
    fields = {"brokerAddr": addr, "brokerId": "0", "brokerName": name, "clusterName": "DefaultCluster",
              "compressed": "false", "haServerAddr": addr, "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}  # fmt: skip
    answer = await client.invoke(namesrv, request(RequestCode.REGISTER_BROKER, fields, body), 3)
    assert answer.code == ResponseCode.SUCCESS


async def test_a_key_query_waits_for_a_slow_broker_and_passes_over_a_silent_one_together(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The slow broker's message is found, and the silent broker costs one wait, not one after the other: ours asked
    the brokers one by one with the 3 s rpc timeout, so the slow broker's answer was never waited for and the query
    failed with the silent broker's timeout."""
    record = encode_record(MessageRecord(TOPIC, b"found slowly", properties="KEYS\x01needle"), store_timestamp=1)
    async with trio.open_nursery() as nursery, RemotingClient() as registrar:
        namesrv = embedded_cluster.namesrv_addr
        await _register(registrar, namesrv, "broker-slow", await _slow_broker(nursery, record))
        await _register(registrar, namesrv, "broker-silent", await _silent_broker(nursery))
        async with Admin(namesrv) as admin:
            started = trio.current_time()
            found = await admin.query_msg_by_key(TOPIC, "needle")
            waited = trio.current_time() - started
        nursery.cancel_scope.cancel()
    assert [m.body for m in found] == [b"found slowly"]
    assert waited <= 24 + 1, f"the query took {waited:.0f} s of virtual time"


async def test_a_key_query_passes_over_a_record_whose_compressed_body_does_not_inflate(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """MQAdminImpl.queryMessage decodes each broker's answer with MessageDecoder.decodes, whose ``decode`` catches the
    failed inflate of a COMPRESSED body and answers null, ending that broker's list
    (common/src/main/java/org/apache/rocketmq/common/message/MessageDecoder.java): the other brokers' messages are
    still found. Ours let ``zlib.error`` out of the brokers' task group, failing the query as an ExceptionGroup."""
    corrupt = MessageRecord(TOPIC, b"not zlib", properties="KEYS\x01needle", sys_flag=SYSFLAG_COMPRESSED)
    good = MessageRecord(TOPIC, b"found", properties="KEYS\x01needle")
    async with trio.open_nursery() as nursery, RemotingClient() as registrar:
        namesrv = embedded_cluster.namesrv_addr
        body = encode_record(corrupt, store_timestamp=1) + encode_record(good, store_timestamp=2)
        await _register(registrar, namesrv, "broker-corrupt", await _slow_broker(nursery, body))
        await _register(registrar, namesrv, "broker-good", await _slow_broker(nursery, encode_record(good)))
        async with Admin(namesrv) as admin:
            found = await admin.query_msg_by_key(TOPIC, "needle")
        nursery.cancel_scope.cancel()
    assert [m.body for m in found] == [b"found"]
