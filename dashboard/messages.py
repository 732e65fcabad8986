"""The Messages page's data and actions: search a topic by store-time range, by key, or by message id; one
message's body, properties and per-group consume state; resending it to a consumer of a group.

A time-range search finds each queue's offsets for the range (SEARCH_OFFSET_BY_TIMESTAMP) and pulls between them
with the tools group (no offset committed), keeping the newest :data:`MAX_RESULTS`. A message id is the producer's
``UNIQ_KEY`` (found through the topic's index) or an offset msgId; an offset msgId is only followed to a broker of
this cluster, never to whatever host its bytes name.
"""

from __future__ import annotations

import codecs
import logging
import re
from typing import Any

from client import api
from client.admin import BROKER_FAILURES, Admin
from client.errors import MQClientError
from client.message_track import message_track_detail
from remoting.codec.bodies import MessageQueue
from remoting.codec.errors import MessageDecodeError
from remoting.codec.message import MessageExt
from remoting.codec.message_properties import PROPERTY_UNIQ_KEY
from remoting.codec.msgid import decode_offset_msg_id

log = logging.getLogger(__name__)

#: Messages a time-range search returns at most (rocketmq-dashboard stops at 2000; a page stays readable at 1000).
MAX_RESULTS = 1000
_PULL_BATCH = 32
#: Bytes of a body shown; the length says how much there is.
MAX_BODY_SHOWN = 256 << 10
#: The control characters (Unicode category Cc) that make a body binary: all but tab, LF and CR.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


class NotFoundError(MQClientError):
    """No message answers the id or key asked for."""


def summary(msg: MessageExt) -> dict[str, Any]:
    """A search result row."""
    return {
        "msgId": msg.properties.get(PROPERTY_UNIQ_KEY) or msg.msg_id,
        "offsetMsgId": msg.msg_id,
        "topic": msg.topic,
        "tags": msg.tags or "",
        "keys": " ".join(msg.keys),
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "storeTimestamp": msg.store_timestamp,
        "bodyLength": len(msg.body),
    }


def body_view(body: bytes) -> dict[str, Any]:
    """The first MAX_BODY_SHOWN bytes of ``body`` as text and as hex, and ``encoding``: the view shown first. Text
    when they are UTF-8 (a character cut by the limit aside) without control characters other than tab, CR and LF;
    else hex, the text view then showing bytes that are not UTF-8 as U+FFFD (rocketmq-dashboard's
    ``new String(body, UTF-8)``)."""
    shown = body[:MAX_BODY_SHOWN]
    cut = len(body) > MAX_BODY_SHOWN
    try:
        text = _utf8(shown, cut, "strict")
        encoding = "hex" if _CONTROL.search(text) else "text"
    except UnicodeDecodeError:
        text, encoding = _utf8(shown, cut, "replace"), "hex"
    return {"encoding": encoding, "text": text, "hex": shown.hex(" "), "length": len(body)}


def _utf8(data: bytes, cut: bool, errors: str) -> str:
    """``data`` decoded; when it was ``cut`` from a longer body, an incomplete character at its end is left out."""
    return codecs.getincrementaldecoder("utf-8")(errors).decode(data, final=not cut)


def detail(msg: MessageExt) -> dict[str, Any]:
    """Everything the message page shows of one message."""
    return {
        **summary(msg),
        "bornHost": f"{msg.born_host[0]}:{msg.born_host[1]}",
        "storeHost": f"{msg.store_host[0]}:{msg.store_host[1]}",
        "bornTimestamp": msg.born_timestamp,
        "reconsumeTimes": msg.reconsume_times,
        "sysFlag": msg.sys_flag,
        "properties": dict(sorted(msg.properties.items())),
        "body": body_view(msg.body),
    }


async def by_key(admin: Admin, topic: str, key: str) -> list[dict[str, Any]]:
    return [summary(m) for m in await admin.query_msg_by_key(topic, key, max_num=64)]


async def by_time(admin: Admin, topic: str, begin_ms: int, end_ms: int) -> dict[str, Any]:
    """:func:`messages_by_time` as search result rows."""
    found = await messages_by_time(admin, topic, begin_ms, end_ms)
    return {"messages": [summary(m) for m in found["messages"]], "truncated": found["truncated"]}


async def messages_by_time(admin: Admin, topic: str, begin_ms: int, end_ms: int) -> dict[str, Any]:
    """Messages of ``topic`` stored in ``[begin_ms, end_ms]``, oldest first: the newest MAX_RESULTS of them, with
    ``truncated`` when the range holds more. A queue is read from at most MAX_RESULTS offsets before its end of the
    range (a queue's messages are in store order), so the cost is bounded by the number of queues.

    Each broker is read at ``BrokerData.selectBrokerAddr()``: its master, else a slave while the master is down, as
    the pulls of rocketmq-dashboard's ``DefaultMQPullConsumer`` go (``findBrokerAddressInSubscribe``,
    client/src/main/java/org/apache/rocketmq/client/impl/consumer/PullAPIWrapper.java) and as the admin client's
    other reads; a broker without a master was left out, its messages silently missing from the result."""
    if end_ms < begin_ms:
        raise ValueError("the end of the range is before its beginning")
    route = await admin.topic_route(topic)
    readable = {bd.broker_name: bd.select_broker_addr() for bd in route.broker_datas}
    remoting, timeout = admin.instance.remoting, admin.instance.config.rpc_timeout
    found: list[MessageExt] = []
    truncated = False
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        addr = readable.get(qd.broker_name)
        if addr is None:
            continue
        for queue_id in range(qd.read_queue_nums):
            mq = MessageQueue(topic, qd.broker_name, queue_id)
            first = await api.search_offset(remoting, addr, mq, begin_ms, timeout)
            last = await api.search_offset(remoting, addr, mq, end_ms, timeout)
            start = max(first, last - MAX_RESULTS + 1)
            truncated |= start > first
            found.extend(await _pull_range(admin, mq, start, last, begin_ms, end_ms))
    found.sort(key=lambda m: m.store_timestamp)
    truncated |= len(found) > MAX_RESULTS
    return {"messages": found[-MAX_RESULTS:], "truncated": truncated}


async def _pull_range(
    admin: Admin, mq: MessageQueue, first: int, last: int, begin_ms: int, end_ms: int
) -> list[MessageExt]:
    """The messages of ``mq`` from ``first`` through ``last`` (the offset found for the end may hold a message in
    the range) stored in the range."""
    found: list[MessageExt] = []
    offset = first
    while offset <= last:
        batch = await admin.query_msg_by_offset(mq, offset, _PULL_BATCH)
        if not batch:
            break
        found.extend(m for m in batch if begin_ms <= m.store_timestamp <= end_ms and m.queue_offset <= last)
        offset = batch[-1].queue_offset + 1
    return found


async def find(admin: Admin, msg_id: str, topic: str | None) -> MessageExt:
    """The message with ``msg_id``: as a UNIQ_KEY in ``topic``'s index first, then as an offset msgId of a broker
    of this cluster. NotFoundError when neither finds it."""
    msg_id = msg_id.strip()
    if topic:
        for msg in await admin.query_msg_by_unique_key(topic, msg_id):
            return msg
    if not await _names_a_broker_of_this_cluster(admin, msg_id):
        where = f" in topic {topic}" if topic else " (give its topic to look a producer's message id up)"
        raise NotFoundError(f"no message {msg_id!r}{where}")
    return await admin.query_msg_by_id(msg_id)


async def _names_a_broker_of_this_cluster(admin: Admin, msg_id: str) -> bool:
    """Whether ``msg_id`` is an offset msgId whose host:port is a broker of the cluster (the only hosts dialled)."""
    try:
        decoded = decode_offset_msg_id(msg_id)
    except MessageDecodeError:
        return False
    info = await admin.cluster_info()
    known = {addr for bd in info.broker_addr_table.values() for addr in bd.broker_addrs.values()}
    return f"{decoded.host}:{decoded.port}" in known


async def consume_states(admin: Admin, msg: MessageExt) -> list[dict[str, Any]]:
    """Each group consuming the message's topic with its track (:func:`client.message_track.message_track_detail`:
    CONSUMED, CONSUMED_BUT_FILTERED, NOT_CONSUME_YET, NOT_ONLINE, PULL or UNKNOWN), its offset in the message's queue
    and the error that decided the track. When the topic's groups cannot be listed, or a group's consume type is null
    (Java's NullPointerException), the track is empty, as rocketmq-dashboard's ``MessageServiceImpl.messageTrackDetail``
    catches the failure: the message is still shown."""
    try:
        tracks = await message_track_detail(admin, msg)
    except BROKER_FAILURES as exc:
        log.warning("message track of %s failed: %s", msg.msg_id, exc)
        return []
    return [
        {
            "group": t.consumer_group,
            "state": t.track_type,
            "consumerOffset": t.consumer_offset,
            "error": t.exception_desc,
        }
        for t in tracks
    ]


async def resend(
    admin: Admin, group: str, msg_id: str, client_id: str | None, topic: str | None = None
) -> dict[str, Any]:
    """CONSUME_MESSAGE_DIRECTLY to ``client_id`` (default: the group's first online consumer); the client's
    answer (``consumeResult``, ``remark``...). ``msg_id`` is an offset msgId of a broker of this cluster or, with
    ``topic``, any id :func:`find` finds there, as ``DefaultMQAdminExtImpl.consumeMessageDirectly(group, clientId,
    topic, msgId)`` (tools/src/main/java/org/apache/rocketmq/tools/admin/DefaultMQAdminExtImpl.java) looks it up with
    ``viewMessage(topic, msgId)`` and hands over its offset msgId. NotFoundError when neither names a message."""
    if topic:
        offset_msg_id = (await find(admin, msg_id, topic)).msg_id
    elif await _names_a_broker_of_this_cluster(admin, msg_id):
        offset_msg_id = msg_id
    else:
        raise NotFoundError(f"no message {msg_id!r} on a broker of this cluster")
    if not client_id:
        connection = await admin.consumer_connection(group)
        ids = sorted(c.client_id for c in connection.connection_set)
        if not ids:
            raise NotFoundError(f"no consumer of group {group!r} is online")
        client_id = ids[0]
    result = await admin.consume_message_directly(group, client_id, offset_msg_id)
    return {"clientId": client_id, **result}
