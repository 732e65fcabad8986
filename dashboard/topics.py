"""The Topics page's data and actions: the topic list (one name-server call, so it stays fast with thousands of
topics), a topic's route, queue offsets and consumer groups, create, delete and a test message.

Broker refusals propagate as :class:`~client.errors.MQBrokerError`; :mod:`dashboard.api` turns them into the JSON
error the page shows.
"""

from __future__ import annotations

from typing import Any

import attrs

from client.admin import Admin
from client.message import Message
from client.producer import Producer
from dashboard.groups import topic_consumers
from remoting.codec.bodies import PERM_READ, PERM_WRITE
from remoting.codec.topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

#: Topics the broker and the clients make for themselves (RocketMQ's ``TopicValidator`` system topics and the
#: default topic ``TBW102``), listed as SYSTEM besides each cluster's and broker's own topic.
SYSTEM_TOPICS = frozenset(
    {
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "OFFSET_MOVED_EVENT",
        "SELF_TEST_TOPIC",
        "BenchmarkTest",
    }
)
REPLY_SUFFIX = "_REPLY_TOPIC"
#: The producer group test messages are sent with (``mqadmin sendMessage``'s).
TOOLS_PRODUCER_GROUP = "TOOLS_PRODUCER"


class NoSuchCluster(ValueError):
    """A cluster name the name servers do not know (answered 400 by :mod:`dashboard.api`)."""


def topic_kind(topic: str, own_names: frozenset[str]) -> str:
    """NORMAL, RETRY, DLQ or SYSTEM (``own_names``: the cluster and broker names, which are topics too)."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return "RETRY"
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return "DLQ"
    if (
        topic in SYSTEM_TOPICS
        or topic in own_names
        or topic.startswith("rmq_sys_")
        or _is_reply_topic(topic, own_names)
    ):
        return "SYSTEM"
    return "NORMAL"


def _is_reply_topic(topic: str, own_names: frozenset[str]) -> bool:
    """A cluster's request-reply topic, ``<cluster>_REPLY_TOPIC`` (RocketMQ's ``MixAll.getReplyTopic``)."""
    return topic.endswith(REPLY_SUFFIX) and topic[: -len(REPLY_SUFFIX)] in own_names


async def topic_list(admin: Admin) -> list[dict[str, str]]:
    """Every topic the name servers know, sorted, with its kind."""
    info = await admin.cluster_info()
    own = frozenset(info.cluster_addr_table) | frozenset(info.broker_addr_table)
    return [{"topic": t, "kind": topic_kind(t, own)} for t in sorted(await admin.topic_list())]


def _perm_text(perm: int) -> str:
    return ("R" if perm & PERM_READ else "-") + ("W" if perm & PERM_WRITE else "-")


async def topic_detail(admin: Admin, topic: str) -> dict[str, Any]:
    """Route (brokers and queue counts), every queue's offsets and the groups consuming the topic with their lag."""
    route = await admin.topic_route(topic)
    status = await admin.topic_status(topic)
    consumers = await topic_consumers(admin, topic)
    return {
        "topic": topic,
        "route": [
            {
                "brokerName": qd.broker_name,
                "readQueueNums": qd.read_queue_nums,
                "writeQueueNums": qd.write_queue_nums,
                "perm": qd.perm,
                "permText": _perm_text(qd.perm),
                "addresses": {str(k): v for k, v in sorted(_addrs(route, qd.broker_name).items())},
            }
            for qd in route.queue_datas
        ],
        "queues": [
            {
                "brokerName": mq.broker_name,
                "queueId": mq.queue_id,
                "minOffset": o.min_offset,
                "maxOffset": o.max_offset,
                "lastUpdateTimestamp": o.last_update_timestamp,
            }
            for mq, o in status.items()
        ],
        "totalMessages": sum(o.max_offset - o.min_offset for o in status.values()),
        "consumerGroups": [c["group"] for c in consumers],
        "consumers": consumers,
    }


def _addrs(route: Any, broker_name: str) -> dict[int, str]:
    for bd in route.broker_datas:
        if bd.broker_name == broker_name:
            return dict(bd.broker_addrs)
    return {}


async def create_topic(
    admin: Admin,
    topic: str,
    *,
    read_queue_nums: int,
    write_queue_nums: int,
    perm: int = PERM_READ | PERM_WRITE,
    order: bool = False,
    cluster: str | None = None,
    broker_addr: str | None = None,
) -> list[str]:
    """Create or update ``topic`` on ``broker_addr`` or every master of ``cluster`` (default all); the brokers.

    A ``cluster`` the name servers do not know is a :class:`NoSuchCluster` (nothing created), as rocketmq-dashboard's
    ``AbstractCommonService.changeToBrokerNameSet`` fails on it and ``mqadmin updateTopic -c`` prints its error
    (tools/src/main/java/org/apache/rocketmq/tools/command/CommandUtil.java ``fetchMasterAddrByClusterName``);
    without this the topic was created nowhere and the answer was a success naming no broker."""
    if broker_addr is None and cluster is not None and cluster not in (await admin.cluster_info()).cluster_addr_table:
        raise NoSuchCluster(f"no cluster {cluster!r}: make sure the cluster name exists")
    return await admin.create_topic(
        topic,
        read_queue_nums=read_queue_nums,
        write_queue_nums=write_queue_nums,
        perm=perm,
        order=order,
        cluster=cluster,
        broker_addr=broker_addr,
    )


async def send_test_message(admin: Admin, topic: str, body: str, tags: str | None, keys: str | None) -> dict[str, Any]:
    """One message sent by a short-lived producer of the tools group (as ``mqadmin sendMessage``), with the admin
    client's settings (name servers, timeout, credentials). The topic must have a route (TopicRouteNotFoundError
    otherwise): rocketmq-dashboard's ``TopicServiceImpl.sendTopicMessageRequest`` reads the topic's config from its
    route first, so a test message never auto-creates a topic through TBW102."""
    await admin.topic_route(topic)
    config = attrs.evolve(admin.instance.config, instance_name="mqdashboard-producer")
    async with Producer(TOOLS_PRODUCER_GROUP, config.namesrv_addr, config=config) as producer:
        result = await producer.send(Message(topic, body.encode(), tags=tags or None, keys=keys or None))
    return {
        "sendStatus": result.send_status.name,
        "msgId": result.msg_id,
        "offsetMsgId": result.offset_msg_id,
        "brokerName": result.broker_name,
        "queueId": result.queue_id,
        "queueOffset": result.queue_offset,
    }
