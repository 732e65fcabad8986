"""The VIP channel (Java's ``vipChannelEnabled``): with it on, a client sends some requests to a broker's ``port - 2``
listener instead of its main port.

Java decides call by call: 4.9.8's client/src/main/java/org/apache/rocketmq/client/impl/MQClientAPIImpl.java wraps
the broker address of 47 calls in ``MixAll.brokerVIPChannel(clientConfig.isVipChannelEnabled(), addr)``, and
client/.../impl/producer/DefaultMQProducerImpl.java ``sendKernelImpl`` wraps every send's. Each of those calls sends
one request code, and no other call sends it, so the choice is made here once, by code (:data:`VIP_CHANNEL_CODES`),
for every request the client's :class:`~remoting.client.RemotingClient` sends (its ``address_for`` hook). Requests
left on the main port, as Java leaves them: PULL_MESSAGE (the fast port has no pull processor), HEART_BEAT,
UNREGISTER_CLIENT, END_TRANSACTION, GET_BROKER_CONFIG, the pop family, and everything sent to a name server.
"""

from __future__ import annotations

import os
from typing import Final

from remoting.codec.codes import RequestCode

#: The sends of ``sendKernelImpl``: every producer send, the reply of a request-reply and the inner producer's
#: retry of a failed send-back included.
_SENDS = (
    RequestCode.SEND_MESSAGE,
    RequestCode.SEND_MESSAGE_V2,
    RequestCode.SEND_BATCH_MESSAGE,
    RequestCode.SEND_REPLY_MESSAGE,
    RequestCode.SEND_REPLY_MESSAGE_V2,
)

#: The codes of 4.9.8's 47 wrapped ``MQClientAPIImpl`` calls (46 codes: UPDATE_CONSUMER_OFFSET has a sync and a
#: oneway call), then those 5.3.3's MQClientAPIImpl adds to the wrapped ones that this client sends, and 4.9.7's
#: GET_BROKER_CLUSTER_ACL_CONFIG (its ``getBrokerClusterConfig``, gone from 4.9.8; sent for the dashboard).
_API_4_9_8 = (
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RequestCode.UPDATE_AND_CREATE_TOPIC,
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, RequestCode.DELETE_ACL_CONFIG,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, RequestCode.GET_BROKER_CLUSTER_ACL_INFO,
    RequestCode.VIEW_MESSAGE_BY_ID, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, RequestCode.GET_MAX_OFFSET,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP, RequestCode.GET_MIN_OFFSET, RequestCode.GET_EARLIEST_MSG_STORETIME,
    RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.QUERY_MESSAGE,
    RequestCode.CONSUMER_SEND_MSG_BACK, RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ,
    RequestCode.GET_TOPIC_STATS_INFO, RequestCode.GET_CONSUME_STATS, RequestCode.GET_PRODUCER_CONNECTION_LIST,
    RequestCode.GET_ALL_PRODUCER_INFO, RequestCode.GET_CONSUMER_CONNECTION_LIST, RequestCode.GET_BROKER_RUNTIME_INFO,
    RequestCode.UPDATE_BROKER_CONFIG, RequestCode.DELETE_TOPIC_IN_BROKER, RequestCode.DELETE_SUBSCRIPTIONGROUP,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, RequestCode.QUERY_CONSUME_TIME_SPAN,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
    RequestCode.DELETE_EXPIRED_COMMITLOG, RequestCode.CLEAN_UNUSED_TOPIC, RequestCode.GET_CONSUMER_RUNNING_INFO,
    RequestCode.CONSUME_MESSAGE_DIRECTLY, RequestCode.QUERY_CORRECTION_OFFSET, RequestCode.CLONE_GROUP_OFFSET,
    RequestCode.VIEW_BROKER_STATS_DATA, RequestCode.GET_BROKER_CONSUME_STATS,
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, RequestCode.GET_ALL_TOPIC_CONFIG, RequestCode.QUERY_CONSUME_QUEUE,
    RequestCode.CHECK_CLIENT_CONFIG, RequestCode.RESUME_CHECK_HALF_MESSAGE,
)  # fmt: skip
_API_5_3_3 = (
    RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, RequestCode.GET_TOPIC_CONFIG, RequestCode.QUERY_ASSIGNMENT,
    RequestCode.QUERY_SUBSCRIPTION_BY_CONSUMER, RequestCode.QUERY_TOPICS_BY_CONSUMER,
    RequestCode.SET_MESSAGE_REQUEST_MODE, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST,
)  # fmt: skip
_API_4_9_7 = (RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG,)

#: The request codes a client with the VIP channel on sends to ``port - 2``.
VIP_CHANNEL_CODES: Final = frozenset(int(code) for code in (*_SENDS, *_API_4_9_8, *_API_5_3_3, *_API_4_9_7))

#: Java's ``ClientConfig.SEND_MESSAGE_WITH_VIP_CHANNEL_PROPERTY`` (``com.rocketmq.sendMessageWithVIPChannel``) as an
#: environment variable (see :func:`client.body_codecs.default_compress_level`).
VIP_CHANNEL_ENV: Final = "COM_ROCKETMQ_SEND_MESSAGE_WITH_VIP_CHANNEL"


def default_vip_channel_enabled() -> bool:
    """Whether a client told nothing uses the VIP channel: :data:`VIP_CHANNEL_ENV` reads ``true`` (in any case), as
    4.9.8's ``ClientConfig.vipChannelEnabled`` is ``Boolean.parseBoolean`` of the system property, ``false`` when
    unset."""
    return os.environ.get(VIP_CHANNEL_ENV, "").lower() == "true"


def broker_vip_channel(address: str) -> str:
    """``host:port`` with ``port - 2`` (common/src/main/java/org/apache/rocketmq/common/MixAll.java
    ``brokerVIPChannel``, which splits at the last colon)."""
    host, _, port = address.rpartition(":")
    return f"{host}:{int(port) - 2}"


def kernel_address(enabled: bool, address: str) -> str:
    """The broker address a send's hooks and its Pub trace record (``storeHost``) name: 4.9.8's sendKernelImpl
    wraps it in ``MixAll.brokerVIPChannel`` before it builds the SendMessageContext (client/src/main/java/org/apache/
    rocketmq/client/impl/producer/DefaultMQProducerImpl.java)."""
    return broker_vip_channel(address) if enabled else address


def vip_address(address: str, code: int) -> str:
    """The address a request with ``code`` goes to when the VIP channel is on."""
    return broker_vip_channel(address) if code in VIP_CHANNEL_CODES else address
