"""Client namespaces (RocketMQ 4.9.8's ``NamespaceUtil``, common/src/main/java/org/apache/rocketmq/common/protocol/
NamespaceUtil.java, and ``ClientConfig``'s ``withNamespace`` / ``withoutNamespace`` / ``getNamespace``).

A client with namespace ``ns`` works on ``ns%Topic`` and ``ns%Group`` on the wire while the application names ``Topic``
and ``Group``: a retry or dead-letter topic keeps its prefix in front (``%RETRY%ns%Group``, ``%DLQ%ns%Group``), and
system topics (``TBW102``, ``RMQ_SYS_TRACE_TOPIC``, ``rmq_sys_*``, ...) and system groups (``CID_RMQ_SYS_*``) are never
wrapped. Wrapping is idempotent; unwrapping only strips the client's own namespace. Pure functions, no state; an empty
or ``None`` namespace leaves every name as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from remoting.codec.bodies import MessageQueue
from remoting.codec.topics import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    is_system_group,
    is_system_topic,
)

SEPARATOR: Final = "%"

#: A name server endpoint naming an instance: ``[scheme://]MQ_INST_xxx_yyy.host...`` (Java's
#: ``NameServerAddressUtils.INST_ENDPOINT_PATTERN``).
_INSTANCE_ENDPOINT: Final = re.compile(r"(\w+://|)MQ_INST_\w+_\w+\..*")


#: Given as a client's ``namespace``: none at all, not even the configured one (the trace dispatcher's inner producer,
#: which sends the trace topic as named).
NO_NAMESPACE: Final = SEPARATOR


def resolve_namespace(given: str | None, configured: str | None) -> str | None:
    """A client's namespace: ``given`` unless it is None or blank, else ``configured`` (the config's, or the instance
    id of an ``MQ_INST_`` endpoint): Java's constructors store the namespace as given and ``getNamespace`` only returns
    it when not empty (client/src/main/java/org/apache/rocketmq/client/ClientConfig.java).
    :data:`NO_NAMESPACE`: none."""
    if given == NO_NAMESPACE:
        return None
    return given or configured


def _split_prefix(resource: str) -> tuple[str, str]:
    """``(prefix, rest)``: the ``%RETRY%`` / ``%DLQ%`` prefix (or ``""``) and the name after it."""
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if resource.startswith(prefix):
            return prefix, resource[len(prefix) :]
    return "", resource


def _is_system(resource: str) -> bool:
    return is_system_topic(resource) or is_system_group(resource)


def wrap(namespace: str | None, resource: str) -> str:
    """``resource`` under ``namespace``: ``ns%Topic``, ``%RETRY%ns%Group``, ``%DLQ%ns%Group``; unchanged without a
    namespace, for a system topic or group, or when already under ``namespace``."""
    if not namespace or not resource or _is_system(resource):
        return resource
    prefix, rest = _split_prefix(resource)
    if rest.startswith(namespace + SEPARATOR):
        return resource
    return f"{prefix}{namespace}{SEPARATOR}{rest}"


def unwrap(namespace: str | None, resource: str) -> str:
    """``resource`` without ``namespace`` (``ns%Topic`` -> ``Topic``, ``%RETRY%ns%Group`` -> ``%RETRY%Group``); a name
    under another namespace, or under none, is returned unchanged (Java's ``withoutNamespace(resource, ns)``)."""
    if not namespace or not resource or _is_system(resource):
        return resource
    prefix, rest = _split_prefix(resource)
    if rest.startswith(namespace + SEPARATOR):
        return prefix + rest[len(namespace) + 1 :]
    return resource


def namespace_of(resource: str) -> str:
    """The namespace ``resource`` is under, ``""`` for none (Java's ``getNamespaceFromResource``)."""
    if not resource or _is_system(resource):
        return ""
    rest = _split_prefix(resource)[1]
    index = rest.find(SEPARATOR)
    return rest[:index] if index > 0 else ""


def wrap_queue(namespace: str | None, mq: MessageQueue) -> MessageQueue:
    """``mq`` with its topic under ``namespace`` (Java's ``queueWithNamespace``)."""
    topic = wrap(namespace, mq.topic)
    return mq if topic == mq.topic else MessageQueue(topic, mq.broker_name, mq.queue_id)


def unwrap_queue(namespace: str | None, mq: MessageQueue) -> MessageQueue:
    """``mq`` with its topic as the application names it."""
    topic = unwrap(namespace, mq.topic)
    return mq if topic == mq.topic else MessageQueue(topic, mq.broker_name, mq.queue_id)


def wrap_queues(namespace: str | None, mqs: Iterable[MessageQueue]) -> list[MessageQueue]:
    return [wrap_queue(namespace, mq) for mq in mqs]


def instance_id_from_endpoint(endpoint: str) -> str | None:
    """The instance id an ``MQ_INST_xxx_yyy.host`` name server endpoint names (``MQ_INST_xxx_yyy``), else None
    (Java's ``NameServerAddressUtils.validateInstanceEndpoint`` then ``parseInstanceIdFromEndpoint``)."""
    if not _INSTANCE_ENDPOINT.fullmatch(endpoint):
        return None
    return endpoint[endpoint.rfind("/") + 1 : endpoint.index(".")]


def strip_namespace(resource: str) -> str:
    """``resource`` without whatever namespace it is under, the ``%RETRY%`` / ``%DLQ%`` prefix kept (Java's
    one-argument ``NamespaceUtil.withoutNamespace``, which the trace hooks use)."""
    if not resource or _is_system(resource):
        return resource
    prefix, rest = _split_prefix(resource)
    index = rest.find(SEPARATOR)
    return prefix + rest[index + 1 :] if index > 0 else resource
