"""Property-based fuzz of every request code, over real sockets, against a real embedded broker and name server.

Hypothesis (derandomized, a fixed number of examples) picks a request code and builds its extFields from the code's
header class with fields left out, of the wrong type or out of Java's range (negative queue ids and offsets, numbers
past int/long, empty and very long strings, bytes that are not UTF-8), and a body that is empty, malformed or
truncated JSON, JSON of the wrong shape, a valid body with values swapped for wrong ones, or random bytes. Each
request goes on a fresh connection, followed by a probe on the same connection. After each:

- the request is answered (a oneway one is not), with a response for its opaque, and the probe's answer follows: the
  connection stays open (RocketMQ 4.9.8 closes a connection only on a frame that does not decode);
- a missing or unparsable required header field is SYSTEM_ERROR, as ``RemotingCommand.decodeCommandCustomHeader``'s
  RemotingCommandException ends;
- no remark is a Python traceback or repr;
- meanwhile another client's sends and pulls keep succeeding;
- afterwards the broker restarts from its files (topics.json, subscriptionGroup.json, consumerOffset.json), the name
  server's kvConfig.json loads, and a normal send and pull work.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.embedded import EmbeddedCluster
from namesrv.kv_config import KVConfigManager
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.frame import FrameDecoder, encode_command
from remoting.codec.headers.registry import request_header_class
from tests.broker.helpers import create_topic_request
from tests.conftest import SMALL_STORE
from tests.processors.conftest import RawPeer, pull_request, send_request

pytestmark = pytest.mark.timeout(240)

TOPIC = "FuzzTopic"
#: The well-behaved client's topic, a name the fuzz never sends (so no fuzzed admin request deletes or resizes it).
GOOD_TOPIC = "GoodTopic"
GROUP = "FuzzGroup"
#: Codes no 4.9.8 broker or name server serves, and a negative one.
UNKNOWN_CODES = (9999, 12345, -7)
#: Where the header does not come first, in Java as here: the ACL codes answer their own failure codes when ACL is
#: off (AdminBrokerProcessor), RECALL_MESSAGE (a RocketMQ 5 code) is refused before its header is read.
HEADER_NOT_FIRST = frozenset({50, 51, 52, 53, 54, RequestCode.RECALL_MESSAGE})

INT_VALUES = ["0", "1", "3", "-1", "-2147483648", "2147483647", "2147483648", "-2147483649",
              "9223372036854775807", "-9223372036854775808", "9223372036854775808", "99999999999999999999999",
              "", "abc", "1.5", " 7 ", "0x10"]  # fmt: skip
STR_VALUES = ["", " ", TOPIC, GROUP, "TBW102", "%RETRY%" + GROUP, "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC",
              "x" * 5000, "a@b", "a/b", "..", "日本", "\ufffd", "a\nb", "*", "127.0.0.1:1",
              "DefaultCluster"]  # fmt: skip
BOOL_VALUES = ["true", "false", "", "TRUE", "maybe", "1"]
PLAUSIBLE: dict[type, list[str]] = {int: ["0", "1", "3"], bool: ["true", "false"], str: [TOPIC, GROUP, "fuzz@1"]}
#: Placeholders replaced once the header is encoded: by bytes that are not UTF-8 (a C++ client's GBK), and by the
#: escape of an unpaired surrogate (what Node's JSON.stringify writes for a string cut inside a surrogate pair).
NOT_UTF8 = "\u2603NOT-UTF8\u2603"
LONE_SURROGATE = "\u2603LONE\u2603"
PLACEHOLDERS = {NOT_UTF8.encode(): b"\xc4\xe3\xba\xc3\xff", LONE_SURROGATE.encode(): b"x\\ud800"}

SUB = {"topic": TOPIC, "subString": "a||b", "tagsSet": ["a", "b"], "codeSet": [97, 98], "subVersion": 1,
       "expressionType": "TAG", "classFilterMode": False}  # fmt: skip
MQ = {"topic": TOPIC, "brokerName": "broker-a", "queueId": 0}
VALID_BODIES: dict[int, Any] = {
    RequestCode.HEART_BEAT: {"clientID": "fuzz@1", "producerDataSet": [{"groupName": "PG"}], "consumerDataSet": [
        {"groupName": GROUP, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
         "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": [SUB], "unitMode": False}]},
    RequestCode.LOCK_BATCH_MQ: {"consumerGroup": GROUP, "clientId": "fuzz@1", "mqSet": [MQ], "onlyThisBroker": False},
    RequestCode.UNLOCK_BATCH_MQ: {"consumerGroup": GROUP, "clientId": "fuzz@1", "mqSet": [MQ]},
    RequestCode.CHECK_CLIENT_CONFIG: {"clientId": "fuzz@1", "group": GROUP, "subscriptionData": SUB},
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: {"groupName": GROUP, "consumeEnable": True, "retryQueueNums": 1,
        "retryMaxTimes": 16, "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1, "consumeBroadcastEnable": True},
    RequestCode.REGISTER_BROKER: {"filterServerList": [], "topicConfigSerializeWrapper": {
        "topicConfigTable": {"FuzzNs": {"topicName": "FuzzNs", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                                        "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}},
        "dataVersion": {"timestamp": 1, "counter": {"value": 1}}}},
    RequestCode.QUERY_DATA_VERSION: {"timestamp": 1, "counter": {"value": 1}},
}  # fmt: skip
WRONG_JSON: list[Any] = [None, -1, 2**63 - 1, -(2**63), 1.5, "x", "", [], {}, [None], {"a": None}, True, "-1"]
MALFORMED = [b"{", b"[", b'{"a":', b"{,}", b"\xff\xfe{}", b'{"a":1}}', b"nul", b'"\\ud800"']
WRONG_SHAPE = [b"[]", b"5", b'"x"', b"null", b"true", b'{"a":1}', b"[{}]"]


def broker_codes() -> list[int]:
    return sorted({int(c) for c in RequestCode} | set(UNKNOWN_CODES))


@st.composite
def fields_for(draw: st.DrawFn, code: int) -> tuple[dict[str, str], bool]:
    """extFields for ``code`` and whether a required field is missing or does not parse as its type."""
    header = request_header_class(code)
    wire_fields = header.wire_fields() if header is not None else ()
    fields: dict[str, str] = {}
    broken = False
    # Half the time one field is bad and the others plausible, so requests get past the header into the processor.
    only = draw(st.integers(0, len(wire_fields))) if draw(st.booleans()) else None
    for index, field in enumerate(wire_fields):
        if only is not None and index != only:
            fields[field.key] = draw(st.sampled_from(PLAUSIBLE[field.kind]))
            continue
        choice = draw(st.integers(0, 9))
        if choice == 0:  # left out
            # 5.3.3's PopMessageProcessor and NotificationProcessor add a missing bornTime (now) before decoding
            broken |= field.required and field.key != "bornTime"
            continue
        if field.kind is int:
            value = draw(st.sampled_from(INT_VALUES))
            bits = 32 if field.int32 else 64
            try:
                parsed = int(value)
                fits = -(1 << (bits - 1)) <= parsed < 1 << (bits - 1) and "_" not in value
            except ValueError:
                fits = False
            broken |= field.required and not fits
        elif field.kind is bool:
            value = draw(st.sampled_from(BOOL_VALUES))
        else:
            value = draw(st.sampled_from([*STR_VALUES, NOT_UTF8, LONE_SURROGATE]))
        fields[field.key] = value
    extra = draw(st.sampled_from(["x", "topic", "queueId", "bname", "", None]))
    if extra is not None and (header is None or extra not in header.wire_keys()):  # unknown keys are ignored
        fields[extra] = draw(st.sampled_from(STR_VALUES))
    if code == RequestCode.PULL_MESSAGE and "sysFlag" in fields:
        fields["sysFlag"] = "0"  # no long polling: a held pull answers only when its suspend time ends
    return fields, broken


def mutated(value: Any, draw: st.DrawFn) -> Any:
    """``value`` (a JSON document) with one nested value swapped for a wrong one, or a key dropped."""
    paths: list[tuple[Any, ...]] = []

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        if path:
            paths.append(path)
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in items:
            walk(child, (*path, key))

    copy = orjson.loads(orjson.dumps(value))
    walk(copy, ())
    if not paths:
        return draw(st.sampled_from(WRONG_JSON))
    path = draw(st.sampled_from(paths))
    parent = copy
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = orjson.loads(orjson.dumps(draw(st.sampled_from(WRONG_JSON))))
    return copy


@st.composite
def body_for(draw: st.DrawFn, code: int) -> bytes:
    valid = VALID_BODIES.get(code)
    kind = draw(st.sampled_from(["empty", "malformed", "shape", "random", "valid", "mutated", "truncated"]))
    if kind == "malformed":
        return draw(st.sampled_from(MALFORMED))
    if kind == "shape":
        return draw(st.sampled_from(WRONG_SHAPE))
    if kind == "random":
        return draw(st.binary(max_size=300))
    if valid is not None and kind == "valid":
        return orjson.dumps(valid)
    if valid is not None and kind == "mutated":
        return orjson.dumps(mutated(valid, draw))
    if valid is not None and kind == "truncated":
        whole = orjson.dumps(valid)
        return whole[: draw(st.integers(1, len(whole) - 1))]
    return b""


@st.composite
def fuzzed_requests(draw: st.DrawFn) -> tuple[str, RemotingCommand, bool]:
    """(``"broker"`` or ``"namesrv"``, request, a required field broken)."""
    target = draw(st.sampled_from(["broker", "broker", "namesrv"]))
    code = draw(st.sampled_from(broker_codes()))
    fields, broken = draw(fields_for(code))
    body = draw(body_for(code))
    oneway = draw(st.integers(0, 9)) == 0
    return target, request(code, fields, body, oneway=oneway), broken


def encoded(command: RemotingCommand) -> bytes:
    """The frame, with the :data:`PLACEHOLDERS` in its header replaced."""
    frame = encode_command(command)
    header_length = int.from_bytes(frame[4:8], "big")
    header, rest = frame[8 : 8 + header_length], frame[8 + header_length :]
    for marker, raw in PLACEHOLDERS.items():
        header = header.replace(marker, raw)
    return (4 + len(header) + len(rest)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header + rest


class BlockingPeer:
    """A frame-level client on a blocking socket (the fuzz runs in a worker thread)."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=20)
        self.decoder = FrameDecoder()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def answer(self) -> RemotingCommand | None:
        """The next response (requests the server sends us, such as NOTIFY_CONSUMER_IDS_CHANGED, are skipped), or
        ``None`` when the server closed the connection."""
        while True:
            command = self.decoder.next_command()
            if command is not None:
                if command.is_response:
                    return command
                continue
            data = self.sock.recv(65536)
            if not data:
                return None
            self.decoder.receive_data(data)

    def close(self) -> None:
        self.sock.close()


PYTHON_LEAKS = re.compile(
    r"Traceback \(most recent call last\)|File \"|\b(KeyError|TypeError|AttributeError|IndexError|AssertionError|"
    r"UnboundLocalError|NameError|ZeroDivisionError|RecursionError|UnicodeError|UnicodeDecodeError|"
    r"UnicodeEncodeError|OverflowError|StopIteration|NotImplementedError)\b|\b[A-Z]\w+\(\w+=|<\w+\.\w+: "
)


def check_one(addresses: dict[str, tuple[str, int]], target: str, req: RemotingCommand, broken: bool) -> None:
    peer = BlockingPeer(addresses[target])
    try:
        probe = request(
            RequestCode.GET_BROKER_CLUSTER_INFO if target == "namesrv" else RequestCode.GET_ALL_TOPIC_CONFIG
        )
        peer.send(encoded(req) + encode_command(probe))
        answers: dict[int, RemotingCommand] = {}
        # EndTransactionProcessor answers nothing (null) to a type neither commit nor rollback: wait for the probe
        silent = req.is_oneway or req.code == RequestCode.END_TRANSACTION
        while probe.opaque not in answers or not (silent or req.opaque in answers):
            answer = peer.answer()  # the two may be answered in either order, as from different Java pools
            assert answer is not None, f"connection closed on {req}"
            assert answer.opaque not in answers and answer.opaque in (req.opaque, probe.opaque), (answer, req)
            answers[answer.opaque] = answer
        assert answers[probe.opaque].code == ResponseCode.SUCCESS
        if req.is_oneway:
            assert req.opaque not in answers
            return
        if req.opaque not in answers:  # END_TRANSACTION's answer may come after the probe's, or never
            return
        answer = answers[req.opaque]
        remark = answer.remark or ""
        assert not PYTHON_LEAKS.search(remark), (req.code, remark, req.ext_fields)
        if answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            assert remark == f" request type {req.code} not supported"
        elif broken and request_header_class(req.code) is not None and req.code not in HEADER_NOT_FIRST:
            assert answer.code == ResponseCode.SYSTEM_ERROR, (req.code, answer.code, remark, req.ext_fields)
    finally:
        peer.close()


def run_fuzz(addresses: dict[str, tuple[str, int]]) -> int:
    examples = 0

    @settings(
        max_examples=1000, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck)
    )
    @given(fuzzed_requests())
    def fuzz(case: tuple[str, RemotingCommand, bool]) -> None:
        nonlocal examples
        examples += 1
        check_one(addresses, *case)

    fuzz()
    return examples


def address_of(addr: str) -> tuple[str, int]:
    host, port = addr.rsplit(":", 1)
    return host, int(port)


async def good_client(address: tuple[str, int], stop: trio.Event, results: list[int]) -> None:
    """Sends and pulls on its own connection until ``stop``; every answer must be SUCCESS or FOUND."""
    peer = await RawPeer.connect(address)
    offset = 0
    try:
        while not stop.is_set():
            await peer.send(send_request(GOOD_TOPIC, b"good", queue_id=1))
            sent = await peer.receive()
            assert sent is not None and sent.code == ResponseCode.SUCCESS, sent
            await peer.send(pull_request(GOOD_TOPIC, queue_id=1, offset=offset, group="GoodGroup", sys_flag=0x4))
            pulled = await peer.receive()
            assert pulled is not None and pulled.code == ResponseCode.SUCCESS, pulled
            offset = int(pulled.ext_fields["nextBeginOffset"])
            results.append(offset)
            await trio.sleep(0.05)
    finally:
        await peer.aclose()


async def test_every_request_code_with_bad_input_is_answered_and_harms_nothing(tmp_path: Path) -> None:
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE) as cluster:
        broker = address_of(cluster.broker_addr)
        setup = await RawPeer.connect(broker)
        for topic in (TOPIC, GOOD_TOPIC):
            await setup.send(create_topic_request(topic))
            created = await setup.receive()
            assert created is not None and created.code == ResponseCode.SUCCESS
        await setup.aclose()
        addresses = {"broker": broker, "namesrv": address_of(cluster.namesrv_addr)}
        stop = trio.Event()
        progress: list[int] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(good_client, broker, stop, progress)
            examples = await trio.to_thread.run_sync(run_fuzz, addresses)
            stop.set()
        assert examples == 1000
        assert progress and progress[-1] == len(progress)  # each pull got the one message sent before it

        await cluster.restart_broker()
        peer = await RawPeer.connect(broker)
        await peer.send(send_request(GOOD_TOPIC, b"after", queue_id=2))
        sent = await peer.receive()
        assert sent is not None and sent.code == ResponseCode.SUCCESS
        await peer.send(pull_request(GOOD_TOPIC, queue_id=2, group="AfterGroup", sys_flag=0x4))
        pulled = await peer.receive()
        assert pulled is not None and pulled.code == ResponseCode.SUCCESS
        await peer.aclose()
        assert pulled.ext_fields["nextBeginOffset"] == "1"
        assert cluster.controller.context.topics.get(GOOD_TOPIC) is not None
    kv = KVConfigManager(cluster.namesrv_config.kv_config_file)
    kv.load()  # the name server's KV file, written by the fuzzed PUT_KV_CONFIGs, still loads
