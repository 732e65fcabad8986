"""Sends that write to a topic the signed account may not write, on a real broker over real sockets with ACL on
(tests/acl/conftest.py's PLAIN_ACL: account RocketMQ has topicA=DENY, groupA=DENY, defaultTopicPerm DENY,
groupB=PUB|SUB). RocketMQ 4.9.8 checked none of these three ways in: a batch, a reply, a retry topic named beside
another group."""

from __future__ import annotations

from broker.embedded import EmbeddedCluster
from remoting.client import RemotingClient
from remoting.codec.acl_signing import SessionCredentials, sign
from remoting.codec.batch_body import BatchEntry, encode_batch_body
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from tests.broker.helpers import create_topic_request

USER = SessionCredentials("RocketMQ", "12345678")
ADMIN = SessionCredentials("rocketmq2", "12345678")


def v2(topic: str, group: str = "PG", **extra: str) -> dict[str, str]:
    return {
        "a": group,
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": "0",
        "f": "0",
        "g": "1700000000000",
        "h": "0",
        "i": "",
        "j": "0",
        **extra,
    }


async def _setup(cluster: EmbeddedCluster, client: RemotingClient, *topics: str) -> None:
    for topic in topics:
        answer = await client.invoke(cluster.broker_addr, sign(create_topic_request(topic), ADMIN), 5)
        assert answer.code == ResponseCode.SUCCESS, answer


async def test_batch_send_to_a_denied_topic_is_refused(acl_cluster: EmbeddedCluster) -> None:
    store = acl_cluster.controller.context.store
    async with RemotingClient() as client:
        await _setup(acl_cluster, client, "topicA")
        # control: the same send as a single message is refused
        single = await client.invoke(
            acl_cluster.broker_addr, sign(request(RequestCode.SEND_MESSAGE_V2, v2("topicA"), b"x"), USER), 5
        )
        assert single.code == ResponseCode.SYSTEM_ERROR and "AclException" in (single.remark or "")
        body = encode_batch_body([BatchEntry(b"evil-1"), BatchEntry(b"evil-2")])
        batch = sign(request(RequestCode.SEND_BATCH_MESSAGE, v2("topicA", m="true"), body), USER)
        answer = await client.invoke(acl_cluster.broker_addr, batch, 5)
    assert store.max_offset_in_queue("topicA", 0) == 0, f"batch stored in a DENY topic: {answer.code} {answer.remark}"
    assert answer.code == ResponseCode.SYSTEM_ERROR and "AclException" in (answer.remark or "")


async def test_reply_send_to_a_denied_topic_is_refused(acl_cluster: EmbeddedCluster) -> None:
    store = acl_cluster.controller.context.store
    async with RemotingClient() as client:
        await _setup(acl_cluster, client, "topicA")
        fields = v2("topicA", i="REPLY_TO_CLIENT\x01nobody\x02")
        answer = await client.invoke(
            acl_cluster.broker_addr, sign(request(RequestCode.SEND_REPLY_MESSAGE_V2, fields, b"evil"), USER), 5
        )
    assert store.max_offset_in_queue("topicA", 0) == 0, f"reply stored in a DENY topic: {answer.code} {answer.remark}"
    assert answer.code == ResponseCode.SYSTEM_ERROR and "AclException" in (answer.remark or "")


async def test_a_send_to_another_groups_retry_topic_needs_that_group(acl_cluster: EmbeddedCluster) -> None:
    """groupA is DENY for the account; it names its own group groupB (PUB|SUB) in ``a`` and groupA's retry topic
    in ``b``. The message lands in %RETRY%groupA (the broker takes the group from the topic, not from ``a``)."""
    store = acl_cluster.controller.context.store
    async with RemotingClient() as client:
        await _setup(acl_cluster, client, "%RETRY%groupA")
        # control: naming the victim group in ``a`` is refused
        direct = await client.invoke(
            acl_cluster.broker_addr,
            sign(request(RequestCode.SEND_MESSAGE_V2, v2("%RETRY%groupA", "groupA"), b"x"), USER),
            5,
        )
        assert "AclException" in (direct.remark or "")
        answer = await client.invoke(
            acl_cluster.broker_addr,
            sign(request(RequestCode.SEND_MESSAGE_V2, v2("%RETRY%groupA", "groupB"), b"evil"), USER),
            5,
        )
    stored = sum(store.max_offset_in_queue("%RETRY%groupA", q) for q in range(4))
    assert stored == 0, f"message injected into groupA's retry topic: {answer.code} {answer.remark}"
    assert "AclException" in (answer.remark or "")
