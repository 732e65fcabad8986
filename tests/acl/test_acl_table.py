"""Table-driven ACL check over every request code of RocketMQ's resource rules, on a real broker over real sockets:
allowed, denied (with RocketMQ's code 1 and remark), admin-only, white-listed, and nothing stored when refused."""

from __future__ import annotations

from pathlib import Path

import attrs
import yaml

from broker.embedded import EmbeddedCluster
from remoting.client import RemotingClient
from remoting.codec.acl_signing import SessionCredentials, sign
from remoting.codec.bodies import ConsumerData, HeartbeatData, SubscriptionData
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from store.metadata_files import TopicConfig
from tests.broker.helpers import create_topic_request

USER = SessionCredentials("RocketMQ", "12345678")
ADMIN = SessionCredentials("rocketmq2", "12345678")
TRUSTED = SessionCredentials("trusted-host", "wrong-secret")  # white-listed by address: the signature is not checked
MANAGER = "org.apache.rocketmq.acl.plain.PlainPermissionManager"


def _remark(message: str, frame: str) -> str:
    return f"org.apache.rocketmq.acl.common.AclException: {message}, {frame}"


def no_perm(what: str, explicit: bool = True) -> str:
    return _remark(
        f"No default permission for {what}",
        f"{MANAGER}.checkPerm(PlainPermissionManager.java:{611 if explicit else 606})",
    )


def need_admin(code: int, key: str = "RocketMQ") -> str:
    return _remark(
        f"Need admin permission for request code={code}, but accessKey={key} is not",
        f"{MANAGER}.checkPerm(PlainPermissionManager.java:581)",
    )


def heartbeat(group: str, *topics: str) -> bytes:
    consumer = ConsumerData(group, subscription_data_set=tuple(SubscriptionData(t) for t in topics))
    return HeartbeatData("127.0.0.1@acl", consumer_data_set=(consumer,)).encode()


def send_v1(topic: str, **extra: str) -> dict[str, str]:
    return {
        "producerGroup": "PG",
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "0",
        "sysFlag": "0",
        "bornTimestamp": "1700000000000",
        "flag": "0",
        **extra,
    }


def pull(topic: str, group: str) -> dict[str, str]:
    return {
        "consumerGroup": group,
        "topic": topic,
        "queueId": "0",
        "queueOffset": "0",
        "maxMsgNums": "32",
        "sysFlag": "0",
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subscription": "*",
        "subVersion": "0",
    }


def offset(topic: str, group: str) -> dict[str, str]:
    return {"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": "5"}


@attrs.frozen
class Row:
    name: str
    code: int
    fields: dict[str, str]
    creds: SessionCredentials | None
    #: None: allowed (whatever the processor answers, it is not an ACL refusal); else the exact remark.
    refused: str | None = None
    body: bytes = b""


OK = None
ROWS = [
    # SEND_MESSAGE 10: PUB on the topic, or SUB on the group for a retry topic.
    Row("send to a PUB|SUB topic", RequestCode.SEND_MESSAGE, send_v1("topicB"), USER, OK, b"x"),
    Row("send to a PUB topic", RequestCode.SEND_MESSAGE, send_v1("topicP"), USER, OK, b"x"),
    Row("send to a SUB-only topic", RequestCode.SEND_MESSAGE, send_v1("topicC"), USER, no_perm("topic:topicC"), b"x"),
    Row("send to a DENY topic", RequestCode.SEND_MESSAGE, send_v1("topicA"), USER, no_perm("topic:topicA"), b"x"),
    Row(
        "send to an unlisted topic (default DENY)",
        RequestCode.SEND_MESSAGE,
        send_v1("topicZ"),
        USER,
        no_perm("topic:topicZ", explicit=False),
        b"x",
    ),
    Row(
        "send to a retry topic with the group's SUB",
        RequestCode.SEND_MESSAGE,
        send_v1("%RETRY%groupB", group="groupB"),
        USER,
        OK,
        b"x",
    ),
    Row(
        "send to a retry topic of a DENY group",
        RequestCode.SEND_MESSAGE,
        send_v1("%RETRY%groupA", group="groupA"),
        USER,
        no_perm("group:groupA"),
        b"x",
    ),
    Row(
        "trace topic publish skips the checks", RequestCode.SEND_MESSAGE, send_v1("RMQ_SYS_TRACE_TOPIC"), USER, OK, b"x"
    ),
    # SEND_MESSAGE_V2 310: letters b (topic) and a (group).
    Row(
        "V2 send to a PUB topic",
        RequestCode.SEND_MESSAGE_V2,
        {"a": "PG", "b": "topicB", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1700000000000", "h": "0"},
        USER,
        OK,
        b"x",
    ),
    Row(
        "V2 send to a SUB-only topic",
        RequestCode.SEND_MESSAGE_V2,
        {"a": "PG", "b": "topicC"},
        USER,
        no_perm("topic:topicC"),
        b"x",
    ),
    Row(
        "V2 retry send of a DENY group",
        RequestCode.SEND_MESSAGE_V2,
        {"a": "groupA", "b": "%RETRY%groupA"},
        USER,
        no_perm("group:groupA"),
        b"x",
    ),
    # CONSUMER_SEND_MSG_BACK 36: SUB on the group.
    Row(
        "send back for a SUB group",
        RequestCode.CONSUMER_SEND_MSG_BACK,
        {"group": "groupC", "offset": "0", "delayLevel": "0"},
        USER,
        OK,
    ),
    Row(
        "send back for a DENY group",
        RequestCode.CONSUMER_SEND_MSG_BACK,
        {"group": "groupA", "offset": "0"},
        USER,
        no_perm("group:groupA"),
    ),
    Row(
        "send back for an unlisted group (default SUB)",
        RequestCode.CONSUMER_SEND_MSG_BACK,
        {"group": "groupZ", "offset": "0", "delayLevel": "0"},
        USER,
        OK,
    ),
    # PULL_MESSAGE 11: SUB on the topic and on the group.
    Row("pull a SUB topic as a SUB group", RequestCode.PULL_MESSAGE, pull("topicC", "groupC"), USER, OK),
    Row("pull as a DENY group", RequestCode.PULL_MESSAGE, pull("topicB", "groupA"), USER, no_perm("group:groupA")),
    Row("pull a PUB-only topic", RequestCode.PULL_MESSAGE, pull("topicP", "groupB"), USER, no_perm("topic:topicP")),
    # POP_MESSAGE 200050 to POLLING_INFO 200055: SUB on the topic and the group (5.3.3's @RocketMQAction /
    # @RocketMQResource on their headers).
    Row("pop as a DENY group", RequestCode.POP_MESSAGE, pull("topicB", "groupA"), USER, no_perm("group:groupA")),
    Row("pop a PUB-only topic", RequestCode.POP_MESSAGE, pull("topicP", "groupB"), USER, no_perm("topic:topicP")),
    Row("ack as a DENY group", RequestCode.ACK_MESSAGE, pull("topicB", "groupA"), USER, no_perm("group:groupA")),
    Row(
        "notification as a DENY group",
        RequestCode.NOTIFICATION,
        pull("topicB", "groupA"),
        USER,
        no_perm("group:groupA"),
    ),
    Row("peek a PUB-only topic", RequestCode.PEEK_MESSAGE, pull("topicP", "groupB"), USER, no_perm("topic:topicP")),
    Row(
        "polling info as a DENY group",
        RequestCode.POLLING_INFO,
        pull("topicB", "groupA"),
        USER,
        no_perm("group:groupA"),
    ),
    Row(
        "change the invisibility in a PUB-only topic",
        RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
        pull("topicP", "groupB"),
        USER,
        no_perm("topic:topicP"),
    ),
    # QUERY_MESSAGE 12: SUB on the topic.
    Row(
        "query a SUB topic",
        RequestCode.QUERY_MESSAGE,
        {"topic": "topicC", "key": "k", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "1"},
        USER,
        OK,
    ),
    Row(
        "query a DENY topic", RequestCode.QUERY_MESSAGE, {"topic": "topicA", "key": "k"}, USER, no_perm("topic:topicA")
    ),
    # RECALL_MESSAGE 370 (RocketMQ 5.3): PUB on the topic (an allowed one gets the broker's own answer: recall is off).
    Row("recall on a PUB topic", RequestCode.RECALL_MESSAGE, {"topic": "topicP", "recallHandle": "x"}, USER, OK),
    Row(
        "recall on a SUB-only topic",
        RequestCode.RECALL_MESSAGE,
        {"topic": "topicC", "recallHandle": "x"},
        USER,
        no_perm("topic:topicC"),
    ),
    # HEART_BEAT 34: each consumer group and each subscribed topic, SUB.
    Row("heartbeat of an allowed consumer", RequestCode.HEART_BEAT, {}, USER, OK, heartbeat("groupB", "topicB")),
    Row(
        "heartbeat of a DENY group",
        RequestCode.HEART_BEAT,
        {},
        USER,
        no_perm("group:groupA"),
        heartbeat("groupA", "topicB"),
    ),
    Row(
        "heartbeat subscribing a DENY topic",
        RequestCode.HEART_BEAT,
        {},
        USER,
        no_perm("topic:topicA"),
        heartbeat("groupB", "topicA"),
    ),
    # UNREGISTER_CLIENT 35, GET_CONSUMER_LIST_BY_GROUP 38: SUB on the group.
    Row(
        "unregister a SUB group", RequestCode.UNREGISTER_CLIENT, {"clientID": "c", "consumerGroup": "groupB"}, USER, OK
    ),
    Row(
        "unregister a DENY group",
        RequestCode.UNREGISTER_CLIENT,
        {"clientID": "c", "consumerGroup": "groupA"},
        USER,
        no_perm("group:groupA"),
    ),
    # A missing field is left to the processor: 4.9.8's decodeCommandCustomHeader only logs it.
    Row(
        "unregister without its required clientID", RequestCode.UNREGISTER_CLIENT, {"consumerGroup": "groupB"}, USER, OK
    ),
    Row("consumer list of a SUB group", RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "groupC"}, USER, OK),
    Row(
        "consumer list of a DENY group",
        RequestCode.GET_CONSUMER_LIST_BY_GROUP,
        {"consumerGroup": "groupA"},
        USER,
        no_perm("group:groupA"),
    ),
    # UPDATE_CONSUMER_OFFSET 15: SUB on the group and on the topic.
    Row("commit an offset of a SUB topic", RequestCode.UPDATE_CONSUMER_OFFSET, offset("topicC", "groupB"), USER, OK),
    Row(
        "commit an offset of a DENY topic",
        RequestCode.UPDATE_CONSUMER_OFFSET,
        offset("topicA", "groupB"),
        USER,
        no_perm("topic:topicA"),
    ),
    # Codes without resources: only the account and its signature.
    Row(
        "query an offset",
        RequestCode.QUERY_CONSUMER_OFFSET,
        {"consumerGroup": "groupA", "topic": "topicA", "queueId": "0"},
        USER,
        OK,
    ),
    Row("max offset", RequestCode.GET_MAX_OFFSET, {"topic": "topicA", "queueId": "0"}, USER, OK),
    # Admin-only codes (RocketMQ's five, and ours: the ACL codes 50-54).
    *(
        Row(f"admin code {code} by a plain account", code, {"topic": "topicZ"}, USER, need_admin(code))
        for code in (17, 25, 215, 200, 207, 50, 51, 52, 53, 54)
    ),
    Row("admin code 52 by an admin", RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {}, ADMIN, OK),
    Row("admin code 54 by an admin", RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, {}, ADMIN, OK),
    Row("an admin without entries may send anywhere", RequestCode.SEND_MESSAGE, send_v1("topicY"), ADMIN, OK, b"x"),
    # Identity and signature failures.
    Row(
        "no access key",
        RequestCode.SEND_MESSAGE,
        send_v1("topicB"),
        None,
        _remark("No accessKey is configured", f"{MANAGER}.validate(PlainPermissionManager.java:664)"),
        b"x",
    ),
    Row(
        "unknown access key",
        RequestCode.SEND_MESSAGE,
        send_v1("topicB"),
        SessionCredentials("nobody12", "12345678"),
        _remark("No acl config for nobody12", f"{MANAGER}.validate(PlainPermissionManager.java:668)"),
        b"x",
    ),
    Row(
        "wrong secret",
        RequestCode.SEND_MESSAGE,
        send_v1("topicB"),
        SessionCredentials("RocketMQ", "wrong-secret"),
        _remark(
            "Check signature failed for accessKey=RocketMQ", f"{MANAGER}.validate(PlainPermissionManager.java:684)"
        ),
        b"x",
    ),
    # White-listed by the account's address: neither the signature nor the permissions are checked.
    Row(
        "white-listed account, wrong secret, DENY topic", RequestCode.SEND_MESSAGE, send_v1("topicT"), TRUSTED, OK, b"x"
    ),
    Row(
        "white-listed account sends an admin code",
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        create_topic_request("topicW").ext_fields,
        TRUSTED,
        OK,
    ),
]


def _command(row: Row) -> RemotingCommand:
    cmd = request(row.code, dict(row.fields), row.body)
    return cmd if row.creds is None else sign(cmd, row.creds)


def _refusal(answer: RemotingCommand) -> str | None:
    if answer.code == ResponseCode.SYSTEM_ERROR and "AclException" in (answer.remark or ""):
        return answer.remark
    return None


async def test_every_request_code_of_the_rules_is_allowed_or_refused_as_rocketmq_does(
    acl_cluster: EmbeddedCluster,
) -> None:
    store = acl_cluster.controller.context.store
    mismatches = []
    async with RemotingClient() as client:
        for row in ROWS:
            answer = await client.invoke(acl_cluster.broker_addr, _command(row), 5)
            got = _refusal(answer)
            if got != row.refused:
                mismatches.append(f"{row.name}: expected {row.refused!r}, got code {answer.code} {answer.remark!r}")
    assert not mismatches, "\n".join(mismatches)
    # Refused requests changed nothing: no record for the refused topics, no topic created by a refused admin code.
    for topic in ("topicA", "topicC", "topicZ"):
        assert store.max_offset_in_queue(topic, 0) == 0, topic
    assert acl_cluster.controller.context.topics.get("topicZ") is None
    assert acl_cluster.controller.context.topics.get("topicW") is not None  # the white-listed admin code went through
    assert acl_cluster.controller.context.offsets.query("groupB", "topicA", 0) < 0


async def test_of_several_refused_resources_the_remark_names_the_first_in_java_s_hash_map_order(
    acl_cluster: EmbeddedCluster,
) -> None:
    """4.9.8's ``PlainPermissionManager.checkPerm`` walks the request's ``resourcePermMap``, a ``HashMap`` of 16
    buckets, and throws at the first resource refused: by bucket (``String.hashCode`` spread), not in the order
    ``PlainAccessValidator.parse`` put them. ``topicZ`` (default DENY) lands after ``%RETRY%groupA`` (DENY),
    ``%RETRY%groupA`` after ``topicA`` (DENY)."""
    cases = [
        (request(RequestCode.PULL_MESSAGE, pull("topicZ", "groupA")), no_perm("group:groupA")),
        (request(RequestCode.HEART_BEAT, {}, heartbeat("groupA", "topicA")), no_perm("topic:topicA")),
    ]
    async with RemotingClient() as client:
        for command, remark in cases:
            answer = await client.invoke(acl_cluster.broker_addr, sign(command, USER), 5)
            assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, remark)


async def test_a_refused_oneway_request_gets_no_answer_and_the_connection_keeps_serving(
    acl_cluster: EmbeddedCluster,
) -> None:
    async with RemotingClient() as client:
        refused = sign(request(RequestCode.UPDATE_CONSUMER_OFFSET, offset("topicA", "groupB"), oneway=True), USER)
        await client.invoke_oneway(acl_cluster.broker_addr, refused, 5)
        answer = await client.invoke(
            acl_cluster.broker_addr,
            sign(request(RequestCode.GET_MAX_OFFSET, {"topic": "topicB", "queueId": "0"}), USER),
            5,
        )
        assert answer.code != ResponseCode.SYSTEM_ERROR
    assert acl_cluster.controller.context.offsets.query("groupB", "topicA", 0) < 0


async def test_an_empty_resource_entry_in_an_acl_update_fails_as_rocketmq_splits_it(
    acl_cluster: EmbeddedCluster, acl_home: Path
) -> None:
    """Code 50's ``topicPerms``/``groupPerms`` are split by Java's ``String.split(",")`` (``UtilAll.split`` in
    AdminBrokerProcessor.updateAndCreateAccessConfig): ``""`` gives ``[""]`` and ``"a=PUB,,b=SUB"`` an empty middle
    entry, which ``Permission.checkResourcePerms`` refuses (209, nothing written); only trailing empty entries are
    dropped."""
    acl_file = acl_home / "conf" / "plain_acl.yml"
    before = acl_file.read_text()

    def update(**fields: str) -> RemotingCommand:
        account = {"accessKey": "RocketMQ", "secretKey": "12345678", **fields}
        return sign(request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, account), ADMIN)

    async with RemotingClient() as client:
        for fields in ({"topicPerms": ""}, {"groupPerms": ""}, {"topicPerms": "topicB=PUB,,topicC=SUB"}):
            answer = await client.invoke(acl_cluster.broker_addr, update(**fields), 5)
            assert answer.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED, (fields, answer)
            assert (answer.remark or "").startswith("Parse Resource format error for"), answer.remark
            assert acl_file.read_text() == before
        answer = await client.invoke(acl_cluster.broker_addr, update(topicPerms="topicP=PUB,"), 5)
        assert answer.code == ResponseCode.SUCCESS, answer
    (entry,) = [a for a in yaml.safe_load(acl_file.read_text())["accounts"] if a["accessKey"] == "RocketMQ"]
    assert entry["topicPerms"] == ["topicP=PUB"]


async def test_an_acl_update_with_empty_default_perms_keeps_the_accounts_defaults(
    acl_cluster: EmbeddedCluster, acl_home: Path
) -> None:
    """Code 50 edits an existing account through ``PlainPermissionManager.createAclAccessConfigMap``, which writes
    ``defaultTopicPerm`` / ``defaultGroupPerm`` only when ``!StringUtils.isEmpty``: an update whose header carries them
    empty (a form left blank; the Java admin client sends ``""`` as it is) keeps the account's defaults. The account
    here keeps ``defaultGroupPerm: SUB``, so it may still ask for the consumers of a group it names nowhere."""
    acl_file = acl_home / "conf" / "plain_acl.yml"
    fields = {"accessKey": "RocketMQ", "secretKey": "12345678", "defaultTopicPerm": "", "defaultGroupPerm": ""}
    async with RemotingClient() as client:
        answer = await client.invoke(
            acl_cluster.broker_addr, sign(request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, fields), ADMIN), 5
        )
        assert answer.code == ResponseCode.SUCCESS, answer
        (entry,) = [a for a in yaml.safe_load(acl_file.read_text())["accounts"] if a["accessKey"] == "RocketMQ"]
        assert (entry["defaultTopicPerm"], entry["defaultGroupPerm"]) == ("DENY", "SUB")
        lookup = request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "groupUnnamed"})
        answer = await client.invoke(acl_cluster.broker_addr, sign(lookup, USER), 5)
        assert "AclException" not in (answer.remark or ""), answer


async def test_commit_offset_numbers_are_left_to_the_processor_as_rocketmq_decodes_them(
    acl_cluster: EmbeddedCluster,
) -> None:
    """4.9.8's ACL parse of UPDATE_CONSUMER_OFFSET decodes the header with ``decodeCommandCustomHeader``, which reads
    ``queueId``/``commitOffset`` with ``Integer.parseInt``/``Long.parseLong`` and only logs a field that fails: the
    ACL check never refuses the request for its numbers. ``+1`` and ``+7`` are numbers there (the commit is stored);
    text or a number past the int range is refused by the offset processor, not as an ACL failure."""
    offsets = acl_cluster.controller.context.offsets
    acl_cluster.controller.context.topics.update_topic(TopicConfig("topicC", 4, 4))  # a commit needs the topic
    async with RemotingClient() as client:
        signed = sign(request(RequestCode.UPDATE_CONSUMER_OFFSET, {**offset("topicC", "groupB"), "queueId": "+1",
                                                                   "commitOffset": "+7"}), USER)  # fmt: skip
        answer = await client.invoke(acl_cluster.broker_addr, signed, 5)
        assert answer.code == ResponseCode.SUCCESS, answer
        assert offsets.query("groupB", "topicC", 1) == 7
        for field, value in (("queueId", "x"), ("queueId", "2147483648"), ("commitOffset", "9223372036854775808")):
            fields = {**offset("topicC", "groupB"), field: value}
            bad = sign(request(RequestCode.UPDATE_CONSUMER_OFFSET, fields), USER)
            answer = await client.invoke(acl_cluster.broker_addr, bad, 5)
            assert answer.code == ResponseCode.SYSTEM_ERROR and "AclException" not in (answer.remark or ""), answer


async def test_a_missing_header_field_is_left_to_the_processor_as_rocketmq_decodes_it(
    acl_cluster: EmbeddedCluster,
) -> None:
    """4.9.8's ``decodeCommandCustomHeader`` throws "the custom field <x> is null" inside the per-field ``try`` whose
    ``catch (Throwable)`` only logs it: the ACL parse of UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP and
    UPDATE_CONSUMER_OFFSET never fails for a missing field, a missing group or topic is simply not a resource
    (``addResourceAndPerm`` skips null). Ours refused them as ACL failures (found by a review)."""
    cases = [
        (RequestCode.UNREGISTER_CLIENT, {"consumerGroup": "groupB"}),
        (RequestCode.GET_CONSUMER_LIST_BY_GROUP, {}),
        (RequestCode.UPDATE_CONSUMER_OFFSET, {"topic": "topicC", "queueId": "0", "commitOffset": "1"}),
    ]
    async with RemotingClient() as client:
        for code, fields in cases:
            answer = await client.invoke(acl_cluster.broker_addr, sign(request(code, fields), USER), 5)
            assert "AclException" not in (answer.remark or ""), (code, answer)
