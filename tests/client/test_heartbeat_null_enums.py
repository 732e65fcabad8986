"""A consumer whose heartbeat leaves ``consumeType``, ``messageModel`` or ``consumeFromWhere`` out, sends them null or
names no member: 4.9.8's ``ConsumerData`` (common/src/main/java/org/apache/rocketmq/common/protocol/heartbeat/
ConsumerData.java) has no initial values and fastjson 1.2.69 reads such a name as null, so ConsumerManager registers
the group with nulls, GET_CONSUMER_CONNECTION_LIST leaves them out (fastjson writes no null field), and the tools show
what Java's do with them. Against the threaded embedded cluster over real sockets, through mqadmin's entry point."""

from __future__ import annotations

import json
from typing import Any

import anyio
import orjson
from click.testing import CliRunner

from client.mqadmin import main as mqadmin
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from tests.client.helpers import create_topic
from tests.threaded_cluster import ThreadedCluster

ENUMS = ("consumeType", "messageModel", "consumeFromWhere")
#: group -> the enum fields its heartbeat carries
CASES: dict[str, dict[str, Any]] = {
    "null-enums-absent": {},
    "null-enums-null": dict.fromkeys(ENUMS),
    "null-enums-odd": {"consumeType": "PUSH", "messageModel": "CLUSTER", "consumeFromWhere": "FROM_NOWHERE"},
    "null-enums-model": {"consumeType": "CONSUME_PASSIVELY", "messageModel": None},
}


def _cli(*args: str) -> Any:
    result = CliRunner().invoke(mqadmin, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_a_consumer_whose_heartbeat_enums_java_reads_as_null_is_listed_with_nulls(cluster: ThreadedCluster) -> None:
    """GET_CONSUMER_CONNECTION_LIST's body has no ``consumeType``, ``messageModel``, ``consumeFromWhere`` for such a
    group (AdminBrokerProcessor.getConsumerConnectionList copies ConsumerGroupInfo's nulls); ``mqadmin
    consumerConnection`` prints them ``null`` (ConsumerConnectionSubCommand's printf); ``consumerProgress`` prints a
    null type as PUSH with no model, and no line for a push group whose model is null (ConsumerProgressSubCommand's
    GroupConsumeInfo.messageModelDesc throws, which its loop catches). Ours registered each field's default
    (CONSUME_PASSIVELY, CLUSTERING, CONSUME_FROM_LAST_OFFSET)."""
    ns, addr = cluster.namesrv_addr, cluster.broker_addr

    async def job() -> None:
        await create_topic(ns, "NullEnums", 1)
        async with RemotingClient() as client:
            for group, enums in CASES.items():
                consumer = {"groupName": group, **enums, "subscriptionDataSet": [{"topic": "NullEnums"}]}
                body = {"clientID": f"127.0.0.1@{group}", "consumerDataSet": [consumer]}
                answer = await client.invoke(addr, request(RequestCode.HEART_BEAT, body=orjson.dumps(body)), 5)
                assert answer.code == ResponseCode.SUCCESS, answer
                await create_topic(ns, f"%RETRY%{group}", 1)  # consumerProgress lists the groups of the name server
            for group in CASES:
                header = {"consumerGroup": group}
                answer = await client.invoke(addr, request(RequestCode.GET_CONSUMER_CONNECTION_LIST, header), 5)
                assert answer.code == ResponseCode.SUCCESS, answer
                listed = orjson.loads(answer.body)
                expected = {"consumeType": "CONSUME_PASSIVELY"} if group == "null-enums-model" else {}
                assert {k: listed[k] for k in ENUMS if k in listed} == expected, listed
            text = await anyio.to_thread.run_sync(_cli, "consumerConnection", "-n", ns, "-g", "null-enums-odd")
            assert "\nConsumeType: null\nMessageModel: null\nConsumeFromWhere: null\n" in text, text
            progress = await anyio.to_thread.run_sync(_cli, "consumerProgress", "-n", ns, "--json")
            rows = {r["Group"]: (r["Type"], r["Model"]) for r in json.loads(progress)["rows"]}
            assert {g: rows[g] for g in rows if g.startswith("null-enums")} == {
                "null-enums-absent": ("PUSH", ""),
                "null-enums-null": ("PUSH", ""),
                "null-enums-odd": ("PUSH", ""),
            }

    anyio.run(job, backend="trio")


def test_query_msg_by_id_prints_no_track_when_a_group_s_consume_type_is_null(cluster: ThreadedCluster) -> None:
    """4.9.8's messageTrackDetail switches on each group's ``ConsumerConnection.getConsumeType()``: a null one throws
    NullPointerException out of it, so QueryMsgByIdSubCommand prints the message, then the stack trace
    (``e.printStackTrace()``) and no track at all (tools/src/main/java/org/apache/rocketmq/tools/admin/
    DefaultMQAdminExtImpl.java). Ours printed an UNKNOWN track for that group."""
    ns, addr = cluster.namesrv_addr, cluster.broker_addr

    async def job() -> None:
        await create_topic(ns, "NullTrack", 1)
        async with RemotingClient() as client:
            send = {"producerGroup": "pg", "topic": "NullTrack", "defaultTopic": "TBW102",
                    "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "bornTimestamp": "0",
                    "flag": "0", "reconsumeTimes": "0"}  # fmt: skip
            sent = await client.invoke(addr, request(RequestCode.SEND_MESSAGE, send, b"tracked"), 5)
            assert sent.code == ResponseCode.SUCCESS, sent
            consumer = {"groupName": "null-track-cg", "subscriptionDataSet": [{"topic": "NullTrack", "subString": "*"}]}
            body = {"clientID": "127.0.0.1@null-track", "consumerDataSet": [consumer]}
            answer = await client.invoke(addr, request(RequestCode.HEART_BEAT, body=orjson.dumps(body)), 5)
            assert answer.code == ResponseCode.SUCCESS, answer
            result = await anyio.to_thread.run_sync(
                lambda: CliRunner().invoke(mqadmin, ["queryMsgById", "-n", ns, "-i", sent.ext_fields["msgId"]])
            )
        assert result.exit_code == 0, result.output
        assert "Message Body Path:" in result.stdout, result.stdout
        assert "MessageTrack [" not in result.stdout, result.stdout
        assert result.stderr.splitlines()[0] == "java.lang.NullPointerException", result.stderr

    anyio.run(job, backend="trio")
