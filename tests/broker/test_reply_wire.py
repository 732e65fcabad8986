"""Request-reply on the broker over real sockets: SEND_REPLY_MESSAGE_V2 (325) and SEND_REPLY_MESSAGE (324) as golden
frames from a bare socket (the replier), PUSH_REPLY_MESSAGE_TO_CLIENT (326) received by a requester that registered
itself with a HEART_BEAT, and Java's answers when the requester is unknown, gone or says no."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator

import pytest
import trio

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from remoting.client import RemotingClient
from remoting.codec.bodies import HeartbeatData, MessageQueue, ProducerData
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.headers.ops import ReplyMessageRequestHeader
from remoting.codec.message import decode_record
from remoting.codec.message_properties import decode_properties
from remoting.codec.topics import SCHEDULE_TOPIC, TIMER_TOPIC
from remoting.processor import RequestContext
from tests.broker.test_ops_wire import ask, golden

REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"


def reply_v2(
    client_id: bytes | None,
    correlation: bytes = b"cid-1",
    body: bytes = b"pong",
    extra: bytes = b"",
    sys_flag: int = 0,
) -> bytes:
    """A replier's 325 frame: the V2 send header with ``sys_flag``, properties with CORRELATION_ID, REPLY_TO_CLIENT,
    TTL, MSG_TYPE (and ``extra``, escaped pairs, before MSG_TYPE)."""
    props = b"CORRELATION_ID\\u0001" + correlation + b"\\u0002"
    if client_id is not None:
        props += b"REPLY_TO_CLIENT\\u0001" + client_id + b"\\u0002"
    props += b"TTL\\u00013000\\u0002" + extra + b"MSG_TYPE\\u0001reply\\u0002"
    ext = (
        b'{"a":"replier-pg","b":"DefaultCluster_REPLY_TOPIC","c":"TBW102","d":"4","e":"0","f":"'
        + str(sys_flag).encode()
        + b'","g":"1700000000123","h":"0","i":"'
        + props
        + b'","j":"0","k":"false"}'
    )
    return golden(RequestCode.SEND_REPLY_MESSAGE_V2, ext, body)


class Requester:
    """A client connection that heartbeats as producer ``client_id`` and answers pushed replies with ``answer``."""

    def __init__(self, answer: int = ResponseCode.SUCCESS) -> None:
        self.answer = answer
        self.pushed: list[RemotingCommand] = []
        self.arrived = trio.Event()

    async def process(self, ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand | None:
        self.pushed.append(cmd)
        self.arrived.set()
        return cmd.response(self.answer)


@pytest.fixture
async def requester(embedded_cluster: EmbeddedCluster) -> AsyncIterator[Requester]:
    handler = Requester()
    async with RemotingClient(request_handler=handler) as client:
        beat = HeartbeatData("10.1.1.1@req", producer_data_set=(ProducerData("req-pg"),))
        answer = await client.invoke(
            embedded_cluster.broker_addr, request(RequestCode.HEART_BEAT, body=beat.encode()), 5
        )
        assert answer.code == ResponseCode.SUCCESS
        yield handler


def _stored_replies(cluster: EmbeddedCluster) -> list[dict[str, str]]:
    store = cluster.controller.context.store
    return [decode_record(v).properties for v in store.get(REPLY_TOPIC, 0, 0, 32).messages]


async def test_a_reply_is_pushed_to_the_requester_and_stored(
    embedded_cluster: EmbeddedCluster, requester: Requester
) -> None:
    answer = await ask(embedded_cluster.broker_addr, reply_v2(b"10.1.1.1@req"))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert (answer.ext_fields["MSG_REGION"], answer.ext_fields["TRACE_ON"]) == ("DefaultRegion", "true")
    assert answer.ext_fields["queueId"] == "0" and answer.ext_fields["msgId"] != "0"
    (pushed,) = requester.pushed
    assert pushed.code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT and bytes(pushed.body) == b"pong"
    header = ReplyMessageRequestHeader.from_ext_fields(pushed.ext_fields)
    assert (header.producer_group, header.topic, header.born_timestamp) == ("replier-pg", REPLY_TOPIC, 1700000000123)
    assert header.store_host == embedded_cluster.broker_addr and header.born_host.startswith("127.0.0.1:")
    props = decode_properties(header.properties or "")
    assert props["CORRELATION_ID"] == "cid-1" and int(props["PUSH_REPLY_TIME"]) > 0
    (stored,) = _stored_replies(embedded_cluster)
    assert stored["CORRELATION_ID"] == "cid-1" and "PUSH_REPLY_TIME" not in stored


@pytest.mark.parametrize("sys_flag", [0x1, 0x4, 0x5])
async def test_a_reply_is_stored_with_sys_flag_0_and_pushed_with_the_request_s(
    embedded_cluster: EmbeddedCluster, requester: Requester, sys_flag: int
) -> None:
    """4.9.8's ReplyMessageProcessor.processReplyMessageRequest builds the stored MessageExtBrokerInner without
    setSysFlag (0), while pushReplyMessage puts the request's sysFlag in the pushed header. So a compressed reply
    (0x1) is stored as its compressed bytes with no compressed flag (a consumer of the reply topic gets those bytes
    as they are), and a prepared one (0x4) is stored as a normal message, in the reply topic's queue. Ours stored
    the request's sysFlag."""
    body = zlib.compress(b"pong")
    answer = await ask(embedded_cluster.broker_addr, reply_v2(b"10.1.1.1@req", body=body, sys_flag=sys_flag))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    (pushed,) = requester.pushed
    assert ReplyMessageRequestHeader.from_ext_fields(pushed.ext_fields).sys_flag == sys_flag
    assert bytes(pushed.body) == body
    store = embedded_cluster.controller.context.store
    (stored,) = [decode_record(v) for v in store.get(REPLY_TOPIC, 0, 0, 32).messages]
    assert (stored.sys_flag, bytes(stored.body)) == (0, body)
    mq = MessageQueue(topic=REPLY_TOPIC, broker_name=embedded_cluster.broker_config().broker_name, queue_id=0)
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        (pulled,) = (await admin.pull(mq, 0, 32)).messages
    assert bytes(pulled.body) == body


async def test_the_v1_reply_code_is_served_too(embedded_cluster: EmbeddedCluster, requester: Requester) -> None:
    ext = (
        b'{"bornTimestamp":"1700000000123","defaultTopic":"TBW102","defaultTopicQueueNums":"4","flag":"0",'
        b'"producerGroup":"replier-pg","properties":"CORRELATION_ID\\u0001c2\\u0002REPLY_TO_CLIENT\\u000110.1.1.1@req'
        b'\\u0002MSG_TYPE\\u0001reply\\u0002","queueId":"-1","sysFlag":"0","topic":"DefaultCluster_REPLY_TOPIC"}'
    )
    answer = await ask(embedded_cluster.broker_addr, golden(RequestCode.SEND_REPLY_MESSAGE, ext, b"v1"))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert [bytes(p.body) for p in requester.pushed] == [b"v1"]


@pytest.mark.parametrize(
    ("client_id", "remark"),
    [
        (b"ghost@1", "push reply message fail, channel of <ghost@1> not found."),
        (None, "reply message properties[REPLY_TO_CLIENT] is null"),
    ],
)
async def test_a_reply_nobody_waits_for_answers_java_s_remark_and_is_still_stored(
    embedded_cluster: EmbeddedCluster, client_id: bytes | None, remark: str
) -> None:
    answer = await ask(embedded_cluster.broker_addr, reply_v2(client_id))
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, remark)
    assert answer.ext_fields["TRACE_ON"] == "true"
    assert len(_stored_replies(embedded_cluster)) == 1


async def test_a_requester_refusing_the_push_fails_the_reply(embedded_cluster: EmbeddedCluster) -> None:
    handler = Requester(answer=ResponseCode.SYSTEM_ERROR)
    async with RemotingClient(request_handler=handler) as client:
        beat = HeartbeatData("10.1.1.1@no", producer_data_set=(ProducerData("req-pg"),))
        await client.invoke(embedded_cluster.broker_addr, request(RequestCode.HEART_BEAT, body=beat.encode()), 5)
        answer = await ask(embedded_cluster.broker_addr, reply_v2(b"10.1.1.1@no"))
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "push reply message to 10.1.1.1@nofail.")


async def test_without_store_reply_message_enable_replies_are_only_pushed(
    embedded_cluster: EmbeddedCluster, requester: Requester
) -> None:
    async with RemotingClient() as client:
        cmd = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"storeReplyMessageEnable=false\n")
        assert (await client.invoke(embedded_cluster.broker_addr, cmd, 5)).code == ResponseCode.SUCCESS
    answer = await ask(embedded_cluster.broker_addr, reply_v2(b"10.1.1.1@req"))
    assert (answer.code, answer.ext_fields["msgId"], answer.ext_fields["queueOffset"]) == (
        ResponseCode.SUCCESS,
        "0",
        "0",
    )
    assert _stored_replies(embedded_cluster) == [] and len(requester.pushed) == 1


async def test_a_reply_to_a_forbidden_topic_gets_the_send_checks_answer(embedded_cluster: EmbeddedCluster) -> None:
    ext = (
        b'{"a":"replier-pg","b":"SCHEDULE_TOPIC_XXXX","c":"TBW102","d":"4","e":"0","f":"0","g":"1","h":"0",'
        b'"i":"MSG_TYPE\\u0001reply\\u0002"}'
    )
    answer = await ask(embedded_cluster.broker_addr, golden(RequestCode.SEND_REPLY_MESSAGE_V2, ext, b"x"))
    assert answer.code == ResponseCode.NO_PERMISSION
    missing = await ask(embedded_cluster.broker_addr, golden(RequestCode.SEND_REPLY_MESSAGE_V2, b'{"a":"pg"}', b"x"))
    assert missing.code == ResponseCode.SYSTEM_ERROR and "'b'" in (missing.remark or "")


async def test_a_reply_the_store_refuses_is_still_pushed_and_counts_as_a_failed_put(
    embedded_cluster: EmbeddedCluster, requester: Requester
) -> None:
    """ReplyMessageProcessor stores a reply with DefaultMessageStore.putMessage, whose asyncPutMessage counts a put the
    CommitLog refuses (here a body over maxMessageSize, MESSAGE_ILLEGAL) in putMessageFailedTimes, as it counts a
    send's (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java); the reply was pushed, so the
    answer is the push's SUCCESS with msgId "0". Before, the refused reply was not counted."""
    body = b"x" * (embedded_cluster.controller.context.store.config.max_message_size + 1)
    answer = await ask(embedded_cluster.broker_addr, reply_v2(b"10.1.1.1@req", body=body))
    assert (answer.code, answer.ext_fields["msgId"]) == (ResponseCode.SUCCESS, "0"), answer.remark
    assert [len(p.body) for p in requester.pushed] == [len(body)]
    assert _stored_replies(embedded_cluster) == []
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        status = await admin.broker_status(embedded_cluster.broker_addr)
    assert status["putMessageFailedTimes"] == "1"


@pytest.mark.parametrize(
    ("extra", "parked_in", "queue"),
    [(b"DELAY\\u00012\\u0002", SCHEDULE_TOPIC, 1), (b"TIMER_DELAY_SEC\\u000160\\u0002", TIMER_TOPIC, 0)],
)
async def test_a_delayed_reply_is_pushed_at_once_and_stored_where_it_waits(
    embedded_cluster: EmbeddedCluster, requester: Requester, extra: bytes, parked_in: str, queue: int
) -> None:
    """ReplyMessageProcessor.processReplyMessageRequest pushes the reply first, then stores it with
    DefaultMessageStore.putMessage, whose CommitLog.asyncPutMessage (4.9.8; 5.3.3's HookUtils.handleScheduleMessage)
    moves a put with a delay level to SCHEDULE_TOPIC_XXXX queue level - 1 (a timer one to the timer topic) with
    REAL_TOPIC/REAL_QID. The answer keeps the queue the reply was sent to. Ours stored it in the reply topic at once."""
    answer = await ask(embedded_cluster.broker_addr, reply_v2(b"10.1.1.1@req", extra=extra))
    assert (answer.code, answer.ext_fields["queueId"]) == (ResponseCode.SUCCESS, "0"), answer.remark
    assert [bytes(p.body) for p in requester.pushed] == [b"pong"]
    assert _stored_replies(embedded_cluster) == []
    store = embedded_cluster.controller.context.store
    (parked,) = [decode_record(v) for v in store.get(parked_in, queue, 0, 32).messages]
    assert (parked.properties["REAL_TOPIC"], parked.properties["REAL_QID"]) == (REPLY_TOPIC, "0")
    assert parked.properties["CORRELATION_ID"] == "cid-1"


@pytest.mark.parametrize(
    ("extra", "parked_in", "queue"),
    [(b"DELAY\\u00012\\u0002", SCHEDULE_TOPIC, 1), (b"TIMER_DELAY_SEC\\u000160\\u0002", TIMER_TOPIC, 0)],
)
async def test_a_parked_reply_carries_its_push_time_and_one_stored_at_once_does_not(
    embedded_cluster: EmbeddedCluster, requester: Requester, extra: bytes, parked_in: str, queue: int
) -> None:
    """4.9.8's ReplyMessageProcessor.pushReplyMessage puts PUSH_REPLY_TIME into the message's property map when it
    finds the requester; the stored properties string is the request's, unless CommitLog.asyncPutMessage (5.3.3's
    HookUtils) parks the reply, which writes the string again from that map: the parked copy carries the push time,
    a reply stored at once does not (a review found ours without it)."""
    await ask(embedded_cluster.broker_addr, reply_v2(b"10.1.1.1@req", extra=extra))
    await ask(embedded_cluster.broker_addr, reply_v2(b"10.1.1.1@req"))
    pushed = [decode_properties(p.ext_fields["properties"]) for p in requester.pushed]
    store = embedded_cluster.controller.context.store
    (parked,) = [decode_record(v) for v in store.get(parked_in, queue, 0, 32).messages]
    assert parked.properties["PUSH_REPLY_TIME"] == pushed[0]["PUSH_REPLY_TIME"]
    assert [props.get("PUSH_REPLY_TIME") for props in _stored_replies(embedded_cluster)] == [None]
    assert "PUSH_REPLY_TIME" in pushed[1]


async def test_a_reply_whose_delay_is_no_int_is_pushed_then_answered_with_java_s_exception(
    embedded_cluster: EmbeddedCluster, requester: Requester
) -> None:
    """4.9.8's CommitLog.asyncPutMessage reads DELAY with Integer.parseInt after the push: its NumberFormatException
    escapes ReplyMessageProcessor, and NettyRemotingAbstract answers SYSTEM_ERROR with it; nothing is stored."""
    answer = await ask(embedded_cluster.broker_addr, reply_v2(b"10.1.1.1@req", extra=b"DELAY\\u0001soon\\u0002"))
    assert (answer.code, answer.remark) == (
        ResponseCode.SYSTEM_ERROR,
        'java.lang.NumberFormatException: For input string: "soon"',
    )
    assert len(requester.pushed) == 1 and _stored_replies(embedded_cluster) == []
