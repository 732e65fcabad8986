"""Admin headers: topic admin on the broker and the admin/consumer-management requests
(docs/protocol.md#313-broker-admin-headers; their codes and pools are in docs/protocol.md#21-requests-rocketrio-serves).

The latter (reset offset, consumer status/running info, consume directly, subscription-group and stats queries) follow
the Java 4.9.8 header classes. docs/protocol.md#313-broker-admin-headers lists their keys, except for the consumer
status pair (INVOKE_BROKER_TO_GET_CONSUMER_STATUS, GET_CONSUMER_STATUS_FROM_CLIENT), which rocketrio does not serve.
"""

from __future__ import annotations

import attrs

from remoting.codec.codes import RequestCode
from remoting.codec.headers.base import Header, wire


@attrs.frozen(slots=True)
class CreateTopicRequestHeader(Header):
    """UPDATE_AND_CREATE_TOPIC (17). ``perm`` holds PermName bits; ``topic_filter_type`` is SINGLE_TAG/MULTI_TAG.

    Java declares ``order`` not-null, so it is required on the wire even though it defaults to false in Java.
    """

    REQUEST_CODES = (RequestCode.UPDATE_AND_CREATE_TOPIC,)

    topic: str = attrs.field(metadata=wire("topic"))
    default_topic: str = attrs.field(metadata=wire("defaultTopic"))
    read_queue_nums: int = attrs.field(metadata=wire("readQueueNums", int32=True))
    write_queue_nums: int = attrs.field(metadata=wire("writeQueueNums", int32=True))
    perm: int = attrs.field(metadata=wire("perm", int32=True))
    topic_filter_type: str = attrs.field(metadata=wire("topicFilterType"))
    order: bool = attrs.field(metadata=wire("order"))
    topic_sys_flag: int | None = attrs.field(default=None, metadata=wire("topicSysFlag", int32=True))
    #: RocketMQ 5: the attribute modification, ``+message.type=FIFO,-key`` (:mod:`processors.topic_attributes`).
    attributes: str | None = attrs.field(default=None, metadata=wire("attributes"))


@attrs.frozen(slots=True)
class DeleteTopicRequestHeader(Header):
    """DELETE_TOPIC_IN_BROKER (215)."""

    REQUEST_CODES = (RequestCode.DELETE_TOPIC_IN_BROKER,)

    topic: str = attrs.field(metadata=wire("topic"))


@attrs.frozen(slots=True)
class ResetOffsetRequestHeader(Header):
    """INVOKE_BROKER_TO_RESET_OFFSET (222, admin -> broker) and RESET_CONSUMER_CLIENT_OFFSET (220, broker -> client).

    ``timestamp`` in ms; ``is_force`` also moves offsets forward. The wire key is literally ``isForce``. RocketMQ 5's
    admin adds ``queueId`` (-1: every queue) and ``offset`` (-1 or absent: the one at ``timestamp``) to reset one queue.
    """

    REQUEST_CODES = (RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, RequestCode.RESET_CONSUMER_CLIENT_OFFSET)

    topic: str = attrs.field(metadata=wire("topic"))
    group: str = attrs.field(metadata=wire("group"))
    timestamp: int = attrs.field(metadata=wire("timestamp"))
    is_force: bool = attrs.field(metadata=wire("isForce"))
    queue_id: int | None = attrs.field(default=None, metadata=wire("queueId", int32=True))
    offset: int | None = attrs.field(default=None, metadata=wire("offset"))


@attrs.frozen(slots=True)
class GetConsumerStatusRequestHeader(Header):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) and GET_CONSUMER_STATUS_FROM_CLIENT (221)."""

    REQUEST_CODES = (RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT)

    topic: str = attrs.field(metadata=wire("topic"))
    group: str = attrs.field(metadata=wire("group"))
    client_addr: str | None = attrs.field(default=None, metadata=wire("clientAddr"))


@attrs.frozen(slots=True)
class GetConsumerRunningInfoRequestHeader(Header):
    """GET_CONSUMER_RUNNING_INFO (307): admin -> broker, forwarded to the client ``client_id``."""

    REQUEST_CODES = (RequestCode.GET_CONSUMER_RUNNING_INFO,)

    consumer_group: str = attrs.field(metadata=wire("consumerGroup"))
    client_id: str = attrs.field(metadata=wire("clientId"))
    jstack_enable: bool | None = attrs.field(default=None, metadata=wire("jstackEnable"))


@attrs.frozen(slots=True)
class ConsumeMessageDirectlyResultRequestHeader(Header):
    """CONSUME_MESSAGE_DIRECTLY (309): admin -> broker -> client; the broker attaches the message as the body."""

    REQUEST_CODES = (RequestCode.CONSUME_MESSAGE_DIRECTLY,)

    consumer_group: str = attrs.field(metadata=wire("consumerGroup"))
    client_id: str | None = attrs.field(default=None, metadata=wire("clientId"))
    msg_id: str | None = attrs.field(default=None, metadata=wire("msgId"))
    broker_name: str | None = attrs.field(default=None, metadata=wire("brokerName"))


@attrs.frozen(slots=True)
class DeleteSubscriptionGroupRequestHeader(Header):
    """DELETE_SUBSCRIPTIONGROUP (207). ``remove_offset`` (4.9's ``removeOffset``) or ``clean_offset`` (RocketMQ 5's
    ``cleanOffset``) also drops the group's consumer offsets; our client sends both."""

    REQUEST_CODES = (RequestCode.DELETE_SUBSCRIPTIONGROUP,)

    group_name: str = attrs.field(metadata=wire("groupName"))
    remove_offset: bool = attrs.field(default=False, metadata=wire("removeOffset"))
    clean_offset: bool = attrs.field(default=False, metadata=wire("cleanOffset"))


@attrs.frozen(slots=True)
class GetTopicStatsInfoRequestHeader(Header):
    """GET_TOPIC_STATS_INFO (202)."""

    REQUEST_CODES = (RequestCode.GET_TOPIC_STATS_INFO,)

    topic: str = attrs.field(metadata=wire("topic"))


@attrs.frozen(slots=True)
class GetConsumeStatsRequestHeader(Header):
    """GET_CONSUME_STATS (208); without ``topic`` it covers every topic the group consumes. ``topic_list`` is
    RocketMQ 5's: topics joined by ``;`` (each followed by one, as ``updateTopicList`` writes them)."""

    REQUEST_CODES = (RequestCode.GET_CONSUME_STATS,)

    consumer_group: str = attrs.field(metadata=wire("consumerGroup"))
    topic: str | None = attrs.field(default=None, metadata=wire("topic"))
    topic_list: str | None = attrs.field(default=None, metadata=wire("topicList"))


@attrs.frozen(slots=True)
class GetConsumerConnectionListRequestHeader(Header):
    """GET_CONSUMER_CONNECTION_LIST (203)."""

    REQUEST_CODES = (RequestCode.GET_CONSUMER_CONNECTION_LIST,)

    consumer_group: str = attrs.field(metadata=wire("consumerGroup"))


@attrs.frozen(slots=True)
class GetProducerConnectionListRequestHeader(Header):
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    REQUEST_CODES = (RequestCode.GET_PRODUCER_CONNECTION_LIST,)

    producer_group: str = attrs.field(metadata=wire("producerGroup"))


@attrs.frozen(slots=True)
class ViewBrokerStatsDataRequestHeader(Header):
    """VIEW_BROKER_STATS_DATA (315): one stats item, by statistic name (``TOPIC_PUT_NUMS``...) and key."""

    REQUEST_CODES = (RequestCode.VIEW_BROKER_STATS_DATA,)

    stats_name: str = attrs.field(metadata=wire("statsName"))
    stats_key: str = attrs.field(metadata=wire("statsKey"))


@attrs.frozen(slots=True)
class GetConsumeStatsInBrokerHeader(Header):
    """GET_BROKER_CONSUME_STATS (317); ``is_order`` keeps only order topics. Java's field is ``isOrder``."""

    REQUEST_CODES = (RequestCode.GET_BROKER_CONSUME_STATS,)

    is_order: bool = attrs.field(metadata=wire("isOrder"))


@attrs.frozen(slots=True)
class QueryTopicConsumeByWhoRequestHeader(Header):
    """QUERY_TOPIC_CONSUME_BY_WHO (300): the groups consuming ``topic`` (``mqadmin statsAll``)."""

    REQUEST_CODES = (RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,)

    topic: str = attrs.field(metadata=wire("topic"))


@attrs.frozen(slots=True)
class GetSubscriptionGroupConfigRequestHeader(Header):
    """GET_SUBSCRIPTIONGROUP_CONFIG (352, RocketMQ 5): one subscription group's config."""

    REQUEST_CODES = (RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,)

    group: str = attrs.field(metadata=wire("group"))


@attrs.frozen(slots=True)
class QueryTopicsByConsumerRequestHeader(Header):
    """QUERY_TOPICS_BY_CONSUMER (343, RocketMQ 5): the topics ``group`` has offsets on."""

    REQUEST_CODES = (RequestCode.QUERY_TOPICS_BY_CONSUMER,)

    group: str = attrs.field(metadata=wire("group"))


@attrs.frozen(slots=True)
class QuerySubscriptionByConsumerRequestHeader(Header):
    """QUERY_SUBSCRIPTION_BY_CONSUMER (345, RocketMQ 5): the online ``group``'s subscription of ``topic``."""

    REQUEST_CODES = (RequestCode.QUERY_SUBSCRIPTION_BY_CONSUMER,)

    group: str = attrs.field(metadata=wire("group"))
    topic: str | None = attrs.field(default=None, metadata=wire("topic"))
