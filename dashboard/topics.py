"""The Topics page's data and actions: the topic list (one name-server call, so it stays fast with thousands of
topics), a topic's route, queue offsets and consumer groups, create, delete and a test message.

Broker refusals propagate as :class:`~client.errors.MQBrokerError`; :mod:`dashboard.api` turns them into the JSON
error the page shows.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from typing import Any

import attrs

from client.admin import BROKER_FAILURES, Admin
from client.errors import MQBrokerError, TopicRouteNotFoundError
from client.message import Message
from client.producer import Producer
from client.transaction import LocalTransactionState, TransactionProducer
from dashboard.groups import NoBrokerPicked, topic_consumers
from dashboard.targets import NoMasterOnline, cluster_of, master_addrs, picked_brokers
from remoting.codec.bodies import PERM_READ, PERM_WRITE
from remoting.codec.codes import ResponseCode
from remoting.codec.topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

#: Topics the broker and the clients make for themselves (RocketMQ's ``TopicValidator`` system topics, 5.3.3's
#: ``CHECKPOINT_TOPIC`` among them, and the default topic ``TBW102``) and the 5.x proxy's heartbeat syncer topic
#: (rocketmq-dashboard's ``TopicServiceImpl.classifyTopicType``), listed as SYSTEM besides each cluster's and
#: broker's own topic.
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
        "CHECKPOINT_TOPIC",
        "DefaultHeartBeatSyncerTopic",
    }
)
REPLY_SUFFIX = "_REPLY_TOPIC"
#: RocketMQ 5's topic attribute naming the topic's message type (``TopicAttributes.TOPIC_MESSAGE_TYPE_ATTRIBUTE``).
MESSAGE_TYPE = "message.type"
#: The message type (RocketMQ 5's ``TopicMessageType``) a create falls back to, and the one shown for a topic without
#: the attribute.
DEFAULT_MESSAGE_TYPE, NO_MESSAGE_TYPE = "NORMAL", "UNSPECIFIED"
#: The test message's producer group (MixAll.SELF_TEST_PRODUCER_GROUP).
SELF_TEST_PRODUCER_GROUP = "SELF_TEST_P_GROUP"
#: Numbers the test messages' producers (:func:`send_test_message`).
_test_producers = itertools.count(1)


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
    """Route (the brokers holding the topic, with their cluster, addresses and queue counts), every queue's offsets
    and the groups consuming the topic with their lag."""
    route = await admin.topic_route(topic)
    status = await admin.topic_status(topic)
    consumers = await topic_consumers(admin, topic)
    clusters = cluster_of(await admin.cluster_info())
    return {
        "topic": topic,
        "route": [
            {
                "brokerName": qd.broker_name,
                "cluster": clusters.get(qd.broker_name, ""),
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
    clusters: Sequence[str] = (),
    brokers: Sequence[str] = (),
    broker_addr: str | None = None,
    message_type: str = "",
) -> dict[str, list[str]]:
    """Create or update ``topic`` on the masters of the picked ``clusters`` and ``brokers`` (names, joined as
    :func:`dashboard.targets.picked_brokers`), or on ``broker_addr`` alone; ``{"brokerNames": [...], "brokers":
    [address...]}`` of the brokers written, in name order.

    With nothing picked, an existing topic is updated on the brokers of its route only, never spread to brokers that
    lack it (rocketmq-dashboard's update dialog holds one form per broker of the topic, each naming that broker); a
    new topic is a :class:`~dashboard.groups.NoBrokerPicked` (answered 400), as rocketmq-dashboard refuses a create
    naming neither ("clusterName or brokerName can not be all blank", src/main/java/org/apache/rocketmq/dashboard/
    controller/TopicController.java), rather than landing on every master of every cluster. Unknown names and
    brokers without a master fail before anything is written (:mod:`dashboard.targets`); a broker's refusal stops at
    that broker and propagates.

    ``message_type`` becomes the topic's ``+message.type`` attribute, as rocketmq-dashboard's
    ``TopicServiceImpl.createOrUpdate`` (src/main/java/org/apache/rocketmq/dashboard/service/impl/
    TopicServiceImpl.java); a type the broker does not know is its refusal. Blank, it is NORMAL on a broker that
    lacks the topic (that method's default) and nothing on one that holds it: the broker keeps the attributes an
    update does not name (``AttributeUtil.alterCurrentAttributes``, common/src/main/java/org/apache/rocketmq/common/
    attribute/AttributeUtil.java), so an untyped topic stays untyped rather than turning NORMAL, and a typed one
    keeps its type."""
    chosen = message_type.strip()

    async def write(addr: str) -> list[str]:
        attributes = f"+{MESSAGE_TYPE}={chosen}" if chosen else await _default_attributes(admin, addr, topic)
        return await admin.create_topic(
            topic, read_queue_nums=read_queue_nums, write_queue_nums=write_queue_nums, perm=perm, order=order,
            broker_addr=addr, attributes=attributes,
        )  # fmt: skip

    if broker_addr is not None and not clusters and not brokers:
        return {"brokerNames": [], "brokers": await write(broker_addr)}
    info = await admin.cluster_info()
    names = picked_brokers(info, clusters, brokers)
    if not names and not (names := await _holders(admin, topic)):
        raise NoBrokerPicked(
            f"clusterName or brokerName can not be all blank: pick the clusters or brokers to create {topic} on"
        )
    addrs = master_addrs(info, names)
    for name in names:
        await write(addrs[name])
    return {"brokerNames": names, "brokers": [addrs[n] for n in names]}


async def _default_attributes(admin: Admin, addr: str, topic: str) -> str | None:
    """The attribute modification of a write naming no type: NORMAL when the broker at ``addr`` lacks ``topic``,
    none when it holds it (its attributes stay as they are). A 4.x broker, which has no GET_TOPIC_CONFIG, ignores
    attributes anyway."""
    try:
        await admin.topic_config(addr, topic)
    except MQBrokerError as exc:
        if exc.code not in (ResponseCode.TOPIC_NOT_EXIST, ResponseCode.REQUEST_CODE_NOT_SUPPORTED):
            raise
        return f"+{MESSAGE_TYPE}={DEFAULT_MESSAGE_TYPE}"
    return None


async def _holders(admin: Admin, topic: str) -> list[str]:
    """The names of the brokers ``topic``'s route names; empty when the name servers know no such topic."""
    try:
        route = await admin.topic_route(topic)
    except TopicRouteNotFoundError as exc:
        if not exc.topic_not_exist:
            raise
        return []
    return sorted({bd.broker_name for bd in route.broker_datas})


async def topic_configs(admin: Admin, topic: str) -> list[dict[str, Any]]:
    """The topic's config on each broker of its route (GET_TOPIC_CONFIG at the master, else a slave, as
    rocketmq-dashboard's ``examineTopicConfig``), by broker name, with the broker's cluster and the address asked; a
    broker that fails is listed with ``error`` instead of the config, the others still shown."""
    route = await admin.topic_route(topic)
    clusters = cluster_of(await admin.cluster_info())
    rows = []
    for bd in sorted(route.broker_datas, key=lambda bd: bd.broker_name):
        addr = bd.select_broker_addr()
        row: dict[str, Any] = {"brokerName": bd.broker_name, "cluster": clusters.get(bd.broker_name, "")}
        row.update(address=addr, error=None)
        try:
            if not addr:
                raise NoMasterOnline(f"broker {bd.broker_name} has no address online")
            config = await admin.topic_config(addr, topic)
        except BROKER_FAILURES as exc:
            row["error"] = (exc.remark if isinstance(exc, MQBrokerError) else None) or str(exc)
        else:
            row.update(
                readQueueNums=config.read_queue_nums,
                writeQueueNums=config.write_queue_nums,
                perm=config.perm,
                permText=_perm_text(config.perm),
                order=config.order,
                topicSysFlag=config.topic_sys_flag,
                attributes=dict(config.attributes),
                # examineTopicConfig's messageType: the attribute, UNSPECIFIED for a topic without one
                messageType=config.attribute(MESSAGE_TYPE) or NO_MESSAGE_TYPE,
            )
        rows.append(row)
    return rows


async def send_test_message(
    admin: Admin, topic: str, body: str, tags: str | None, keys: str | None, *, trace: bool = False
) -> dict[str, Any]:
    """One message sent by a short-lived producer of group ``SELF_TEST_P_GROUP``, with the admin client's settings
    (name servers, timeout, credentials), as rocketmq-dashboard's ``TopicServiceImpl.sendTopicMessageRequest``: the
    topic's config is read first (TopicRouteNotFoundError without a route, so a test message never auto-creates a
    topic through TBW102), and a TRANSACTION topic's message is sent in a transaction its listener commits. With
    ``trace`` (its ``traceEnabled``) the producer traces the send into the default trace topic, the record sent
    before it closes."""
    configs = await topic_configs(admin, topic)
    # An instance name of its own per message, as rocketmq-dashboard names each one by the time: one shared name
    # made test messages sent at once collide on one client id, all but the first refused.
    name = f"mqdashboard-producer-{os.getpid()}-{next(_test_producers)}"
    config = attrs.evolve(admin.instance.config, instance_name=name)
    msg = Message(topic, body.encode(), tags=tags or None, keys=keys or None)
    answer: dict[str, Any] = {}
    if configs and configs[0].get("messageType") == "TRANSACTION":
        async with TransactionProducer(
            SELF_TEST_PRODUCER_GROUP, config.namesrv_addr, config=config, enable_msg_trace=trace,
            execute_local_transaction=_commit, check_local_transaction=_commit,
        ) as producer:  # fmt: skip
            sent = await producer.send_message_in_transaction(msg)
        result, answer["localTransactionState"] = sent.send_result, sent.local_transaction_state.name
    else:
        async with Producer(SELF_TEST_PRODUCER_GROUP, config.namesrv_addr, config=config, enable_msg_trace=trace) as p:
            result = await p.send(msg)
    return {
        "sendStatus": result.send_status.name,
        "msgId": result.msg_id,
        "offsetMsgId": result.offset_msg_id,
        "brokerName": result.broker_name,
        "queueId": result.queue_id,
        "queueOffset": result.queue_offset,
        **answer,
    }


def _commit(*_: object) -> LocalTransactionState:
    """The test message's local transaction and its check-back: always committed (the dashboard's
    ``TransactionListenerImpl``)."""
    return LocalTransactionState.COMMIT_MESSAGE
