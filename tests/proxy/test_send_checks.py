"""SendMessage and EndTransaction checks as RocketMQ 5.3.3's proxy makes them
(proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/producer/SendMessageActivity.java,
grpc/v2/common/GrpcValidator.java, grpc/v2/transaction/EndTransactionActivity.java): system topics are ILLEGAL_TOPIC;
control characters in tags, keys and properties are refused; group and property limits count UTF-8 bytes; a blank
message id, DUP_INFO / __CRC32# user properties, a recovery duration over an hour and a blank transaction id are
refused; an out-of-range born timestamp falls back to now; a batch refused by any message stores none of it; a body
size or delay limit of 0 or less checks nothing. Found by reviews; each failed before. Requests go over a real gRPC
socket to the in-process front door."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from broker.cli import build_proxy_config
from proxy.common import Code
from proxy.config import ProxyConfig
from proxy.pb import definition, service
from remoting.codec.bodies.broker_metadata import PERM_READ, PERM_WRITE, TopicConfig
from remoting.codec.message import decode_record
from tests.proxy.grpc_front import Front, front, message

pytestmark = pytest.mark.timeout(120)

#: What RocketMQ 5.3.3's proxy answers before a refusal raised as a ProxyException: GrpcProxyException takes it as its
#: cause, so its message is the cause's toString (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/common/
#: GrpcProxyException.java, ResponseBuilder.buildStatus). Found by a third review: ours answered the bare message.
PROXY = "org.apache.rocketmq.proxy.common.ProxyException: "


async def sent_to_rt(f: Front, *msgs: Any) -> tuple[str, int, str]:
    """``msgs`` sent to topic RT (made if missing): the answer's code name, the messages RT holds, its message."""
    f.ctx.topics.create_topic_in_send_back_process("RT", 1)
    answer = await f.send(*msgs)
    return Code.Name(answer.status.code), f.stored("RT"), answer.status.message


async def test_send_to_a_system_topic_is_illegal_topic_and_stores_nothing(tmp_path: Path) -> None:
    # GrpcValidator.validateTopic: TopicValidator.isSystemTopic -> ILLEGAL_TOPIC "cannot access system topic".
    async with front(tmp_path) as f:
        assert f.ctx.topics.get("TBW102") is not None
        before = f.stored("TBW102")
        answer = await f.send(message("TBW102"))
        got = (Code.Name(answer.status.code), f.stored("TBW102") - before, answer.status.message)
        assert got[:2] == ("ILLEGAL_TOPIC", 0), got


async def test_a_tag_with_a_control_character_is_illegal_message_tag(tmp_path: Path) -> None:
    # GrpcValidator.validateTag: containControlCharacter -> ILLEGAL_MESSAGE_TAG.
    async with front(tmp_path) as f:
        got = await sent_to_rt(f, message("RT", tag="Tag\tA"))
        assert got[:2] == ("ILLEGAL_MESSAGE_TAG", 0), got


async def test_a_tag_with_the_property_separator_is_illegal_message_tag_not_internal_error(tmp_path: Path) -> None:
    async with front(tmp_path) as f:
        f.ctx.topics.create_topic_in_send_back_process("RT", 1)
        answer = await f.send(message("RT", tag="A\x02B"))
        got = (Code.Name(answer.status.code), answer.status.message)
        assert got[0] == "ILLEGAL_MESSAGE_TAG", got


async def test_a_batch_refused_by_a_later_message_stores_none_of_it(tmp_path: Path) -> None:
    # RocketMQ builds (and validates) every message of the request before sending any.
    async with front(tmp_path) as f:
        got = await sent_to_rt(f, message("RT", b"first"), message("RT", b"second", tag="A\x02B"))
        assert got[:2] == ("ILLEGAL_MESSAGE_TAG", 0), got


async def test_a_key_with_a_control_character_is_illegal_message_key(tmp_path: Path) -> None:
    async with front(tmp_path) as f:
        got = await sent_to_rt(f, message("RT", keys=["k\x07ey"]))
        assert got[:2] == ("ILLEGAL_MESSAGE_KEY", 0), got


async def test_a_property_value_with_a_control_character_is_illegal_message_property_key(tmp_path: Path) -> None:
    async with front(tmp_path) as f:
        got = await sent_to_rt(f, message("RT", user={"k": "v\nw"}))
        assert got[:2] == ("ILLEGAL_MESSAGE_PROPERTY_KEY", 0), got


async def test_the_message_group_limit_counts_utf8_bytes(tmp_path: Path) -> None:
    # validateMessageGroup: messageGroup.getBytes(UTF_8).length >= maxMessageGroupSize (64) -> ILLEGAL_MESSAGE_GROUP.
    async with front(tmp_path) as f:
        group = "é" * 32  # 32 characters, 64 UTF-8 bytes
        got = await sent_to_rt(f, message("RT", message_group=group, message_type=definition.MessageType.FIFO))
        assert got[:2] == ("ILLEGAL_MESSAGE_GROUP", 0), got


async def test_the_property_size_limit_counts_utf8_bytes(tmp_path: Path) -> None:
    # buildMessageProperty: key/value/tag/keys getBytes(UTF_8) summed > maxUserPropertySize (16 KiB).
    async with front(tmp_path) as f:
        got = await sent_to_rt(f, message("RT", user={"k": "€" * 6000}))  # 6001 characters, 18001 bytes
        assert got[:2] == ("MESSAGE_PROPERTIES_TOO_LARGE", 0), got


async def test_a_blank_message_id_is_illegal_message_id(tmp_path: Path) -> None:
    # StringUtils.isBlank(messageId) -> ILLEGAL_MESSAGE_ID.
    async with front(tmp_path) as f:
        got = await sent_to_rt(f, message("RT", message_id="   "))
        assert got[:2] == ("ILLEGAL_MESSAGE_ID", 0), got


async def test_a_transaction_recovery_duration_over_an_hour_is_bad_request(tmp_path: Path) -> None:
    # validateTransactionRecoverySecond: > maxTransactionRecoverySecond (3600) -> BAD_REQUEST.
    async with front(tmp_path) as f:
        f.ctx.topics.create_topic_in_send_back_process("RT", 1)
        msg = message("RT", message_type=definition.MessageType.TRANSACTION)
        msg.system_properties.orphaned_transaction_recovery_duration.FromSeconds(7200)
        answer = await f.send(msg)
        got = (Code.Name(answer.status.code), answer.status.message)
        assert got[0] == "BAD_REQUEST", got


async def test_a_born_timestamp_out_of_range_does_not_fail_the_send(tmp_path: Path) -> None:
    # buildMessageProperty only uses a valid born timestamp (Timestamps.isValid); the header's is the proxy's now.
    async with front(tmp_path) as f:
        msg = message("RT")
        msg.system_properties.born_timestamp.seconds = 1 << 61
        got = await sent_to_rt(f, msg)
        assert got[:2] == ("OK", 1), got


@pytest.mark.parametrize("key", ["DUP_INFO", "__CRC32#"])
async def test_a_user_property_named_as_a_rocketmq_5_system_property_is_refused(tmp_path: Path, key: str) -> None:
    # buildMessageProperty: MessageConst.STRING_HASH_SET (5.3.3 has DUP_INFO and __CRC32#)
    # -> ILLEGAL_MESSAGE_PROPERTY_KEY.
    async with front(tmp_path) as f:
        got = await sent_to_rt(f, message("RT", user={key: "1"}))
        assert got[:2] == ("ILLEGAL_MESSAGE_PROPERTY_KEY", 0), got


#: MessageConst names outside RocketMQ 5.3.3's STRING_HASH_SET (common/src/main/java/org/apache/rocketmq/common/
#: message/MessageConst.java), and "bname" (a request header's field, no property name at all).
NOT_IN_STRING_HASH_SET = [
    "bname",
    "CHECK_IMMUNITY_TIME_IN_SECONDS",
    "INNER_BASE",
    "INNER_MULTI_DISPATCH",
    "INNER_NUM",
    "PROPERTY_FORWARD_QUEUE_ID",
    "REDIRECT",
    "TRACE_CONTEXT",
    "TRANSACTION_CHECK_TIMES",
    "__SHARDINGKEY",
    "__transactionId__",
]


@pytest.mark.parametrize("key", NOT_IN_STRING_HASH_SET)
async def test_a_user_property_outside_string_hash_set_is_stored(tmp_path: Path, key: str) -> None:
    """SendMessageActivity.buildMessageProperty refuses only the names of MessageConst.STRING_HASH_SET; these are
    not in it, so RocketMQ 5.3.3's proxy stores a message carrying one as a user property. Ours refused them with
    ILLEGAL_MESSAGE_PROPERTY_KEY (found by a review)."""
    async with front(tmp_path) as f:
        got = await sent_to_rt(f, message("RT", user={key: "1"}))
        assert got[:2] == ("OK", 1), got


def _end(tx_id: str, msg_id: str, resolution: int) -> object:
    return service.EndTransactionRequest(
        topic=definition.Resource(name="RT"),
        transaction_id=tx_id,
        message_id=msg_id,
        resolution=resolution,
        source=definition.TransactionSource.SOURCE_CLIENT,
    )


async def test_end_transaction_without_a_transaction_id_is_invalid_transaction_id(tmp_path: Path) -> None:
    # EndTransactionActivity: StringUtils.isBlank(request.getTransactionId()) -> INVALID_TRANSACTION_ID.
    async with front(tmp_path) as f:
        f.ctx.topics.create_topic_in_send_back_process("RT", 1)
        half = message("RT", message_type=definition.MessageType.TRANSACTION)
        sent = await f.send(half)
        assert sent.status.code == Code.OK
        answer = await f.call(
            "EndTransaction",
            _end("", sent.entries[0].message_id, definition.TransactionResolution.COMMIT),
            service.EndTransactionResponse,
        )
        got = (Code.Name(answer.status.code), f.stored("RT"), answer.status.message)
        assert got[:2] == ("INVALID_TRANSACTION_ID", 0), got


async def test_a_no_break_space_is_not_blank_as_for_java(tmp_path: Path) -> None:
    """StringUtils.isBlank uses Character.isWhitespace, for which U+00A0 is no whitespace: a message id of one is
    stored by Java's proxy (found by a second review: ``str.strip`` refused it)."""
    async with front(tmp_path) as f:
        f.ctx.topics.update_topic(TopicConfig("RevBlank", read_queue_nums=1, write_queue_nums=1))
        answer = await f.send(message("RevBlank", message_id="\u00a0"))
        assert Code.Name(answer.status.code) == "OK", answer.status.message


@pytest.mark.parametrize("setting", ["max_message_size", "max_delay_time_mills"])
async def test_a_limit_of_zero_or_less_disables_its_send_check(tmp_path: Path, setting: str) -> None:
    """SendMessageActivity.validateMessageBodySize (``if (max <= 0) return;``) and validateDelayTime (``if (maxDelay
    <= 0) return;``): a limit of 0 or less means none, not a refusal of every body or every delay message."""
    config = ProxyConfig(enable_proxy=True, grpc_server_port=0, tls_test_mode_enable=False, **{setting: 0})
    async with front(tmp_path, config) as f:
        msg = message("RT", b"some body")
        if setting == "max_delay_time_mills":
            msg.system_properties.delivery_timestamp.FromMilliseconds(int(time.time() * 1000) + 60_000)
        got = await sent_to_rt(f, msg)
        assert got[0] == "OK", got


@pytest.mark.parametrize("group", ["", "G1"], ids=["round-robin", "message-group"])
async def test_a_topic_without_write_queues_refuses_sends_with_forbidden(tmp_path: Path, group: str) -> None:
    """ProducerProcessor.sendMessage: the queue comes from the topic's write queues (MessageQueueSelector.buildWrite:
    ``writeQueueNums`` of each writable queue data); none (``mqadmin updateTopic -w 0``, which drains a topic) is
    FORBIDDEN "no writable queue" and nothing is stored. Queue 0 took the message before (found by a review)."""
    async with front(tmp_path) as f:
        f.ctx.topics.update_topic(TopicConfig("Drained", read_queue_nums=4, write_queue_nums=0))
        answer = await f.send(message("Drained", message_group=group))
        got = (Code.Name(answer.status.code), answer.status.message, f.ctx.store.max_offset_in_queue("Drained", 0))
        assert got == ("FORBIDDEN", PROXY + "no writable queue", 0), got


async def test_enable_message_body_empty_check_false_takes_an_empty_body(tmp_path: Path) -> None:
    """SendMessageActivity.validateMessageBodySize refuses an empty body only with ProxyConfig's
    ``enableMessageBodyEmptyCheck`` (true by default); set false, it is stored. The key was ignored: every empty body
    was MESSAGE_BODY_EMPTY (found by a review)."""
    args = ["--enableMessageBodyEmptyCheck", "false", "--grpcServerPort", "0", "--tlsTestModeEnable", "false"]
    async with front(tmp_path, build_proxy_config(None, args, enable=True)) as f:
        got = await sent_to_rt(f, message("RT", b""))
        assert got[:2] == ("OK", 1), got


async def test_a_request_of_several_messages_is_stored_as_one_batch_in_one_queue(tmp_path: Path) -> None:
    """ProducerProcessor.sendMessage picks one queue for the request (SendMessageQueueSelector: no message group
    when it holds more than one message) and LocalMessageService.sendMessage hands the messages to the broker as one
    MessageBatch: consecutive offsets of one queue, each message keeping its own id and tag. They were sent one by one,
    round-robin over the queues (found by a review). The batch's one SendResult is the answer's one entry
    (SendMessageActivity.convertToSendMessageResponse): the first message's offset and transaction id, and the ids of
    the messages joined by commas, as the cluster mode's MQClientAPIImpl.processSendResponse names a batch (the local
    mode mints an id for the batch that names no stored message). Ours answered one entry per message (found by a
    third review)."""
    async with front(tmp_path) as f:
        f.ctx.topics.update_topic(TopicConfig("RBatch", read_queue_nums=4, write_queue_nums=4))
        msgs = [message("RBatch", f"b{i}".encode(), tag=f"T{i}") for i in range(3)]
        answer = await f.send(*msgs)
        assert Code.Name(answer.status.code) == "OK", answer.status.message
        got = [(e.message_id, e.transaction_id, e.offset, Code.Name(e.status.code)) for e in answer.entries]
        ids = [m.system_properties.message_id for m in msgs]
        assert got == [(",".join(ids), ids[0], 0, "OK")], got
        store = f.ctx.store
        depths = [store.max_offset_in_queue("RBatch", q) for q in range(4)]
        assert sorted(depths) == [0, 0, 0, 3], depths
        stored = [decode_record(raw) for raw in store.get("RBatch", depths.index(3), 0, 32).messages]
        assert [(s.body, s.properties["UNIQ_KEY"], s.properties["TAGS"]) for s in stored] == [
            (m.body, m.system_properties.message_id, m.system_properties.tag) for m in msgs
        ]


async def test_a_batch_the_broker_refuses_stores_none_of_its_messages(tmp_path: Path) -> None:
    """One batch, all or nothing: a broker whose ``maxMessageSize`` the batch exceeds refuses the whole of it
    (MESSAGE_ILLEGAL). Sent one by one, the small first message was stored, the second refused (found by a review)."""
    async with front(tmp_path, max_message_size=1024) as f:
        answer = await f.send(*[message("RT", b"x" * 100), message("RT", b"y" * 2000)])
        got = (f.stored("RT"), [Code.Name(e.status.code) for e in answer.entries if e.status.code == Code.OK])
        assert got == (0, []), (got, answer.status.message)
        assert answer.status.code != Code.OK, answer.status


async def _half(f: Front, topic: str = "RT") -> str:
    """A transactional half message sent to ``topic`` (made if missing); its transaction id."""
    f.ctx.topics.create_topic_in_send_back_process(topic, 1)
    sent = await f.send(message(topic, message_type=definition.MessageType.TRANSACTION))
    assert sent.status.code == Code.OK, sent.status
    return str(sent.entries[0].transaction_id)


async def _end_as(f: Front, tx_id: str, resolution: int, topic: str = "RT") -> tuple[str, str]:
    request = _end(tx_id, tx_id, resolution)
    request.topic.name = topic  # type: ignore[attr-defined]
    answer = await f.call("EndTransaction", request, service.EndTransactionResponse)
    return Code.Name(answer.status.code), answer.status.message


async def test_end_transaction_is_sent_oneway_so_a_broker_refusal_still_answers_ok(tmp_path: Path) -> None:
    """TransactionProcessor.endTransaction hands END_TRANSACTION to the broker oneway
    (LocalMessageService.endTransactionOneway ignores the answer) and EndTransactionActivity answers OK: a commit the
    broker refuses (here its store takes no writes) is OK, and the broker's check asks the producer again later. The
    refusal was relayed as INTERNAL_SERVER_ERROR (found by a review)."""
    async with front(tmp_path) as f:
        tx_id = await _half(f)
        f.ctx.store.disk_full_reason = "disk full"
        got = await _end_as(f, tx_id, definition.TransactionResolution.COMMIT)
        f.ctx.store.disk_full_reason = None
        assert (got[0], f.stored("RT")) == ("OK", 0), got


async def test_end_transaction_unknown_forgets_the_transaction_data(tmp_path: Path) -> None:
    """TransactionDataManager.pollNoExpireTransactionData removes the transaction's data whatever the resolution:
    after an UNKNOWN, a COMMIT of the same transaction finds none (INTERNAL_SERVER_ERROR "cannot found transaction
    data"), only the broker's next check can end it. UNKNOWN kept the data (found by a review)."""
    async with front(tmp_path) as f:
        tx_id = await _half(f)
        assert (await _end_as(f, tx_id, definition.TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED))[0] == "OK"
        got = await _end_as(f, tx_id, definition.TransactionResolution.COMMIT)
        assert (got, f.stored("RT")) == (("INTERNAL_SERVER_ERROR", PROXY + "cannot found transaction data"), 0)


async def test_end_transaction_naming_another_topic_leaves_the_transaction_to_its_own(tmp_path: Path) -> None:
    """Transaction data is kept by producer group (the topic, for 5.x producers) and transaction id
    (TransactionDataManager.buildKey): an EndTransaction naming another topic finds none and ends nothing; the
    transaction's own topic still commits it."""
    async with front(tmp_path) as f:
        tx_id = await _half(f)
        f.ctx.topics.create_topic_in_send_back_process("Other", 1)
        got = await _end_as(f, tx_id, definition.TransactionResolution.ROLLBACK, topic="Other")
        assert got == ("INTERNAL_SERVER_ERROR", PROXY + "cannot found transaction data")
        assert (await _end_as(f, tx_id, definition.TransactionResolution.COMMIT))[0] == "OK"
        assert f.stored("RT") == 1


async def test_a_send_the_broker_refuses_is_internal_server_error_with_its_remark(tmp_path: Path) -> None:
    """LocalMessageService.sendMessage turns every broker refusal but FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT and
    SLAVE_NOT_AVAILABLE into ProxyException INTERNAL_SERVER_ERROR with the broker's remark, which is the response's
    status, no entry (the cluster mode's MQBrokerException maps MESSAGE_ILLEGAL the same way, ResponseBuilder.
    buildCode). A body over the broker's maxMessageSize (MESSAGE_ILLEGAL) was BAD_REQUEST (found by a review)."""
    async with front(tmp_path, max_message_size=1024) as f:
        answer = await f.send(message("RT", b"x" * 2000))
        got = (Code.Name(answer.status.code), len(answer.entries), f.stored("RT"))
        assert got == ("INTERNAL_SERVER_ERROR", 0, 0), (got, answer.status.message)
        assert "msg body length limit 1024B" in answer.status.message, answer.status.message  # the broker's remark
        assert answer.status.message.startswith(PROXY), answer.status.message  # a ProxyException's, as all of them


@pytest.mark.parametrize("where", ["topic", "broker"])
async def test_a_send_to_a_topic_not_writable_is_forbidden_no_writable_queue(tmp_path: Path, where: str) -> None:
    """MessageQueueSelector.buildWrite takes only queue data whose perm is writable, so a topic that is not (its own
    perm, or the broker's brokerPermission its route carries) has no queue to send to: ProducerProcessor.sendMessage
    answers FORBIDDEN "no writable queue" and the broker is not asked. The broker's NO_PERMISSION remark was answered
    (found by a review)."""
    overrides = {"broker_permission": PERM_READ} if where == "broker" else {}
    async with front(tmp_path, **overrides) as f:
        perm = PERM_READ if where == "topic" else PERM_READ | PERM_WRITE
        f.ctx.topics.update_topic(TopicConfig("ReadOnly", read_queue_nums=1, write_queue_nums=1, perm=perm))
        answer = await f.send(message("ReadOnly"))
        got = (Code.Name(answer.status.code), answer.status.message, f.stored("ReadOnly"))
        assert got == ("FORBIDDEN", PROXY + "no writable queue", 0), got


async def test_a_read_only_topic_refuses_sends_with_no_writable_queue(tmp_path: Path) -> None:
    """MessageQueueSelector.buildWrite keeps only queue data whose perm is writable (``PermName.isWriteable``; the
    local route is the topic config's perm, LocalTopicRouteService.toTopicRouteData): a read-only topic
    (``updateTopicPerm -p 4``) has no writable queue, so ProducerProcessor.sendMessage answers FORBIDDEN "no writable
    queue" before any send, the request's status and no entry. Ours sent and relayed the broker's NO_PERMISSION
    (found by a review)."""
    async with front(tmp_path) as f:
        f.ctx.topics.update_topic(TopicConfig("ReadOnly", read_queue_nums=4, write_queue_nums=4, perm=4))
        answer = await f.send(message("ReadOnly"))
        got = (Code.Name(answer.status.code), answer.status.message, len(answer.entries), f.stored("ReadOnly"))
        assert got == ("FORBIDDEN", PROXY + "no writable queue", 0, 0), got


async def test_a_delivery_time_beyond_max_delay_time_mills_gets_javas_remark(tmp_path: Path) -> None:
    """SendMessageActivity.validateDelayTime: ILLEGAL_DELIVERY_TIME "the max delay time of message is too large, max
    is <maxDelayTimeMills>" (a 5.x client's timer two days ahead, under the default day), nothing stored."""
    async with front(tmp_path) as f:
        msg = message("RT", b"two days")
        msg.system_properties.delivery_timestamp.FromMilliseconds(int(time.time() * 1000) + 2 * 86_400_000)
        got = await sent_to_rt(f, msg)
        assert got == ("ILLEGAL_DELIVERY_TIME", 0, "the max delay time of message is too large, max is 86400000"), got


async def test_refused_sends_carry_the_remarks_of_send_message_activity(tmp_path: Path) -> None:
    """SendMessageActivity.validateMessageBodySize, buildMessageProperty and validateTransactionRecoverySecond
    (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/producer/SendMessageActivity.java) name the limit a
    message broke, the reserved key it used, and whether a property's key or value held a control character; the
    5.x clients raise that message to the application. Ours said less, or something else (found by a review)."""
    tx = message("RT", message_type=definition.MessageType.TRANSACTION)
    tx.system_properties.orphaned_transaction_recovery_duration.FromSeconds(7200)
    cases = [
        (
            message("RT", b"x" * (4 * 1024 * 1024 + 1)),
            "MESSAGE_BODY_TOO_LARGE",
            "message body cannot exceed the max 4194304",
        ),
        (
            message("RT", user={f"k{i}": "v" for i in range(129)}),
            "MESSAGE_PROPERTIES_TOO_LARGE",
            "too many user properties, max is 128",
        ),
        (
            message("RT", user={"k": "v" * 16384}),
            "MESSAGE_PROPERTIES_TOO_LARGE",
            "the total size of user property is too large, max is 16384",
        ),
        (message("RT", user={"UNIQ_KEY": "1"}), "ILLEGAL_MESSAGE_PROPERTY_KEY", "property is used by system: UNIQ_KEY"),
        (
            message("RT", user={"k\n": "v"}),
            "ILLEGAL_MESSAGE_PROPERTY_KEY",
            "the key of property cannot contain control character",
        ),
        (
            message("RT", user={"k": "v\n"}),
            "ILLEGAL_MESSAGE_PROPERTY_KEY",
            "the value of property cannot contain control character",
        ),
        (tx, "BAD_REQUEST", "the max transaction recovery time of message is too large, max is 3600"),
    ]
    async with front(tmp_path) as f:
        f.ctx.topics.create_topic_in_send_back_process("RT", 1)
        got = []
        for msg, _, _ in cases:
            answer = await f.send(msg)
            got.append((Code.Name(answer.status.code), answer.status.message))
        assert got == [(code, remark) for _, code, remark in cases]
        assert f.stored("RT") == 0


@pytest.mark.parametrize(
    ("setting", "remark"),
    [
        ("user_property_max_num", "too many user properties, max is 0"),
        ("max_user_property_size", "the total size of user property is too large, max is 0"),
    ],
)
async def test_a_property_limit_of_zero_refuses_messages_with_properties(
    tmp_path: Path, setting: str, remark: str
) -> None:
    """SendMessageActivity.buildMessageProperty compares with ``userPropertyMaxNum`` and ``maxUserPropertySize``
    without the ``<= 0`` escape its body, delay, group and recovery checks have: set to 0, a message with a user
    property and a tag is MESSAGE_PROPERTIES_TOO_LARGE, one without any is stored. Ours took 0 as no limit (found by
    a review)."""
    config = ProxyConfig(enable_proxy=True, grpc_server_port=0, tls_test_mode_enable=False, **{setting: 0})
    async with front(tmp_path, config) as f:
        refused = await sent_to_rt(f, message("RT", user={"k": "v"}, tag="A"))
        stored = await sent_to_rt(f, message("RT"))
        assert (refused, stored[:2]) == (("MESSAGE_PROPERTIES_TOO_LARGE", 0, remark), ("OK", 1))


async def test_a_request_mixing_topics_is_refused_as_send_message_activity_refuses_it(tmp_path: Path) -> None:
    """SendMessageActivity.buildMessage checks, message after message, that its topic Resource equals the first's
    (name and namespace) before that message's own checks: MESSAGE_CORRUPTED "topic in message is not same", so a
    first message's own refusal comes first. Ours compared names only, before any message's checks, with a remark
    of ours (found by a review)."""
    other_namespace = message("RT")
    other_namespace.topic.resource_namespace = "ns"
    requests = [
        (message("RT"), message("OtherT")),
        (message("RT"), other_namespace),
        (message("RT", b""), message("OtherT")),
    ]
    async with front(tmp_path) as f:
        got = [await sent_to_rt(f, *msgs) for msgs in requests]
        assert got == [
            ("MESSAGE_CORRUPTED", 0, "topic in message is not same"),
            ("MESSAGE_CORRUPTED", 0, "topic in message is not same"),
            ("MESSAGE_BODY_EMPTY", 0, "message body cannot be empty"),
        ]


async def test_a_request_is_type_checked_by_its_first_message_after_every_message_is_built(tmp_path: Path) -> None:
    """ProducerProcessor.sendMessage (proxy/src/main/java/org/apache/rocketmq/proxy/processor/ProducerProcessor.java)
    checks the topic's ``message.type`` against the first message of the request only, once SendMessageActivity has
    built (and checked) every message: a later message of another type is stored with the batch, and a later
    message's own refusal comes before the first's type conflict. Ours checked each message's type as it was built
    (found by a review)."""
    fifo = message("TypedT", b"fifo", message_group="G", message_type=definition.MessageType.FIFO)
    fifo_first = message("TypedT", b"fifo first", message_group="G", message_type=definition.MessageType.FIFO)
    async with front(tmp_path) as f:
        typed = TopicConfig("TypedT", read_queue_nums=1, write_queue_nums=1, attributes={"message.type": "NORMAL"})
        f.ctx.topics.update_topic(typed)
        got = []
        for msgs in [(message("TypedT"), fifo), (fifo_first, message("TypedT", tag="A\tB"))]:
            answer = await f.send(*msgs)
            got.append((Code.Name(answer.status.code), f.stored("TypedT")))
        assert got == [("OK", 2), ("ILLEGAL_MESSAGE_TAG", 2)]


async def test_a_blank_user_property_key_is_taken_as_send_message_activity_takes_it(tmp_path: Path) -> None:
    """SendMessageActivity.buildMessageProperty refuses a user property key for a STRING_HASH_SET name or a control
    character only: a whitespace key is stored (and delivered), an empty one is stored in a pair every reader drops
    (MessageDecoder.string2messageProperties wants a name), and a tab key is refused for its control character, with
    that remark. Ours refused every blank key, with a remark of its own (found by a review)."""
    async with front(tmp_path) as f:
        got = [await sent_to_rt(f, message("RT", user={key: "v"})) for key in (" ", "", "\t")]
        assert got == [
            ("OK", 1, "OK"),
            ("OK", 2, "OK"),
            ("ILLEGAL_MESSAGE_PROPERTY_KEY", 2, "the key of property cannot contain control character"),
        ]
        stored = [decode_record(m).properties for m in f.ctx.store.get("RT", 0, 0, 2).messages]
        assert [(p.get(" "), "" in p) for p in stored] == [("v", False), (None, False)]


@pytest.mark.parametrize("born_host", ["", "  "])
async def test_a_send_stores_the_born_host_and_time_as_send_message_activity_does(
    tmp_path: Path, born_host: str
) -> None:
    """SendMessageActivity.buildMessageProperty stores __BORNHOST, the client's born_host or, when blank, the caller's
    address as HostAndPort writes it (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/interceptor/
    HeaderInterceptor.java), and BORN_TIMESTAMP, the client's born time in ms. Ours stored a blank born host as is, no
    address without one, and no BORN_TIMESTAMP (4.x consumers and queryMsgById see these properties; found by a
    review)."""
    async with front(tmp_path) as f:
        msg = message("RT", born_host=born_host)
        assert (await sent_to_rt(f, msg))[:2] == ("OK", 1)
        props = decode_record(f.ctx.store.get("RT", 0, 0, 1).messages[0]).properties
        host, _, port = props.get("__BORNHOST", "").rpartition(":")
        assert (host, port.isdigit()) == ("127.0.0.1", True), props
        assert props.get("BORN_TIMESTAMP") == str(msg.system_properties.born_timestamp.ToMilliseconds())


async def test_a_send_to_an_unknown_topic_without_auto_creation_is_a_type_conflict(tmp_path: Path) -> None:
    """ProducerProcessor.sendMessage type-checks before it picks a queue, and LocalMetadataService.getTopicMessageType
    gives UNSPECIFIED for a topic the broker does not hold, which DefaultTopicMessageTypeValidator refuses for every
    message: MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, nothing stored (with ``autoCreateTopicEnable``, ours creates the
    topic as its QueryRoute does). The broker's TOPIC_NOT_EXIST was answered as TOPIC_NOT_FOUND (found by a third
    review)."""
    async with front(tmp_path, auto_create_topic_enable=False) as f:
        answer = await f.send(message("Nowhere"))
        got = (Code.Name(answer.status.code), answer.status.message, len(answer.entries), f.ctx.topics.get("Nowhere"))
        remark = PROXY + "TopicMessageType validate failed, the expected type is UNSPECIFIED, but actual type is NORMAL"
        assert got == ("MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", remark, 0, None), got


async def test_use_delay_level_sends_a_timed_message_at_the_next_delay_level(tmp_path: Path) -> None:
    """ProxyConfig ``useDelayLevel``: SendMessageActivity.fillDelayMessageProperty puts ``DELAY`` =
    ``computeDelayLevel(deliveryTimestamp)``, the level (``messageDelayLevel``, by delay) whose delay first exceeds
    the time left, else the longest, besides ``TIMER_DELIVER_MS``; the broker's delay level then wins
    (HookUtils.checkIfTimerMessage): the message waits in SCHEDULE_TOPIC_XXXX. Ours ignored the setting."""
    config = ProxyConfig(enable_proxy=True, grpc_server_port=0, tls_test_mode_enable=False, use_delay_level=True)
    async with front(tmp_path, config) as f:
        soon, later = message("RT", b"soon"), message("RT", b"later")
        now = int(time.time() * 1000)
        soon.system_properties.delivery_timestamp.FromMilliseconds(now + 7_000)
        later.system_properties.delivery_timestamp.FromMilliseconds(now + 3 * 3_600_000)
        for msg in (soon, later):
            got = await sent_to_rt(f, msg)
            assert got[:2] == ("OK", 0), got
        stored = [decode_record(f.ctx.store.get("SCHEDULE_TOPIC_XXXX", q, 0, 1).messages[0]) for q in (2, 17)]
        assert [(m.body, m.properties["DELAY"]) for m in stored] == [(b"soon", "3"), (b"later", "18")]
