"""Bad input over a real socket: each request gets its code and remark, the offending connection keeps working (or,
for a broken frame, only it closes), and another client on the same broker never notices."""

from __future__ import annotations

import trio

from processors.hold import HoldService
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.frame import encode_command
from remoting.codec.record_decode import iter_records
from remoting.server import RemotingServer
from tests.processors.conftest import (
    TOPIC,
    MakeBroker,
    RawPeer,
    ServedBroker,
    pull_request,
    send_request,
    tags_props,
)


async def start(make_broker: MakeBroker, nursery: trio.Nursery) -> tuple[str, int]:
    broker = make_broker(
        auto_create_topic_enable=False,
        auto_create_subscription_group=False,
        store_overrides={"max_message_size": 1024},
    )
    served = ServedBroker(broker, HoldService())
    await nursery.start(served.hold.run)
    await nursery.start(served.dispatcher.run)
    address: tuple[str, int] = await nursery.start(RemotingServer(served.dispatcher).serve, "127.0.0.1", 0)
    return address


def bad_requests() -> list[tuple[RemotingCommand, int]]:
    no_group = pull_request(group="nobody")
    return [
        (send_request("NoSuchTopic"), ResponseCode.TOPIC_NOT_EXIST),
        (send_request(queue_id=99), ResponseCode.SYSTEM_ERROR),
        (send_request(body=b"x" * 2048), ResponseCode.MESSAGE_ILLEGAL),
        (send_request("bad/topic"), ResponseCode.SYSTEM_ERROR),
        (send_request("SCHEDULE_TOPIC_XXXX"), ResponseCode.NO_PERMISSION),
        (no_group, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST),
    ]


async def test_bad_requests_get_their_codes_and_do_not_disturb_other_clients(
    make_broker: MakeBroker, nursery: trio.Nursery
) -> None:
    address = await start(make_broker, nursery)
    bad = await RawPeer.connect(address)
    good = await RawPeer.connect(address)
    cases = bad_requests()
    await bad.send(*(req for req, _ in cases))
    answers = {}
    for _ in cases:
        answer = await bad.receive()
        assert answer is not None
        answers[answer.opaque] = answer
    for req, code in cases:
        assert answers[req.opaque].code == code, answers[req.opaque].remark
        assert answers[req.opaque].remark
    # The same connection still serves good requests.
    await bad.send(send_request())
    ok = await bad.receive()
    assert ok is not None and ok.code == ResponseCode.SUCCESS
    # A broken frame closes only the offending connection.
    await bad.stream.send_all(b"\x00\x00\x00\x08\xff\xff\xff\xff\x00\x00\x00\x00")
    assert await bad.receive() is None
    for i in range(20):
        await good.send(send_request(body=f"good-{i}".encode()))
        answer = await good.receive()
        assert answer is not None and answer.code == ResponseCode.SUCCESS
    assert answer.ext_fields["queueOffset"] == "20"  # one from the bad client, then twenty
    await good.aclose()
    await bad.aclose()


async def test_malformed_subscription_is_answered_and_the_connection_keeps_pulling(
    make_broker: MakeBroker, nursery: trio.Nursery
) -> None:
    address = await start(make_broker, nursery)
    client = await RawPeer.connect(address)
    broker_group = "CID_RMQ_SYS_TEST"  # system groups are created even with auto-create off
    malformed = pull_request(group=broker_group, subscription="||")
    fine = pull_request(group=broker_group, sys_flag=0x4)
    get_max = RemotingCommand(
        code=RequestCode.GET_MAX_OFFSET, opaque=424242, ext_fields={"topic": TOPIC, "queueId": "0"}
    )
    await client.send(malformed, fine, get_max)
    codes = {}
    for _ in range(3):
        answer = await client.receive()
        assert answer is not None
        codes[answer.opaque] = answer.code
    assert codes == {
        malformed.opaque: ResponseCode.SUBSCRIPTION_PARSE_FAILED,
        fine.opaque: ResponseCode.PULL_NOT_FOUND,
        get_max.opaque: ResponseCode.SUCCESS,
    }
    await client.aclose()


async def test_an_illegal_queue_id_is_refused_with_the_topic_config_as_java_prints_it(
    make_broker: MakeBroker, nursery: trio.Nursery
) -> None:
    """AbstractSendMessageProcessor.msgCheck formats the TopicConfig with its toString(), as operators see it in the
    producer's exception; not a Python repr."""
    address = await start(make_broker, nursery)
    client = await RawPeer.connect(address)
    await client.send(send_request(queue_id=99))
    answer = await client.receive()
    assert answer is not None and answer.code == ResponseCode.SYSTEM_ERROR
    host, port = client.stream.socket.getsockname()[:2]
    assert answer.remark == (
        "request queueId[99] is illegal, TopicConfig [topicName=TopicTest, readQueueNums=4, writeQueueNums=4, "
        f"perm=RW-, topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false] Producer: {host}:{port}"
    )
    await client.aclose()


def with_lone_surrogate(command: RemotingCommand, marker: str) -> bytes:
    """``command``'s JSON frame with ``marker`` written as the escape ``\\ud83d``: the first half of an emoji that
    Node's JSON.stringify (or Python's json.dumps) writes for a string cut between the two halves of the pair."""
    frame = encode_command(command)
    header_length = int.from_bytes(frame[4:8], "big")
    header = frame[8 : 8 + header_length].replace(marker.encode(), b"\\ud83d")
    body = frame[8 + header_length :]
    return (4 + len(header) + len(body)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header + body


async def test_a_lone_surrogate_escape_in_a_header_is_stored_as_java_stores_it(
    make_broker: MakeBroker, nursery: trio.Nursery
) -> None:
    """fastjson reads ``\\ud83d`` without its low half into the String as it is (RemotingSerializable.decode), and
    the stored properties have it as Java's UTF-8 encoder writes an unpaired surrogate, ``?``; the connection, a
    well-formed frame, stays open."""
    address = await start(make_broker, nursery)
    client = await RawPeer.connect(address)
    for code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_MESSAGE):
        await client.stream.send_all(
            with_lone_surrogate(send_request(properties=tags_props("t", "key-MARK"), code=code), "MARK")
        )
        answer = await client.receive()
        assert answer is not None and answer.code == ResponseCode.SUCCESS, answer
    await client.send(pull_request(group="CID_RMQ_SYS_TEST", sys_flag=0x4))
    pulled = await client.receive()
    assert pulled is not None and pulled.code == ResponseCode.SUCCESS
    assert [m.properties.get("KEYS") for m in iter_records(pulled.body)] == ["key-?", "key-?"]
    await client.aclose()
