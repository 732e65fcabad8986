"""JSON request and response bodies (docs/protocol.md#4-json-bodies): attrs classes with ``encode() -> bytes`` and
``decode(bytes) -> cls``, plus ``to_json``/``from_json`` for nesting them in other documents.

Output is standard JSON (string keys, sorted keys, null fields omitted, enums as names). Input is tolerant the way
real 4.x peers need: fastjson's unquoted numeric keys, enums as names or ordinals, numbers as strings, unknown fields
ignored. Every decode failure raises :class:`BodyDecodeError`, a :class:`~remoting.codec.errors.CodecError`.
Sans-IO like the rest of ``remoting.codec``.
"""

from remoting.codec.bodies._json import BodyDecodeError
from remoting.codec.bodies.heartbeat import (
    EXPRESSION_SQL92,
    EXPRESSION_TAG,
    SUB_ALL,
    ConsumeFromWhere,
    ConsumerData,
    ConsumerListBody,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
)
from remoting.codec.bodies.register import RegisterBrokerBody, body_crc32
from remoting.codec.bodies.route import MASTER_ID, BrokerData, ClusterInfo, QueueData, TopicRouteData
from remoting.codec.bodies.tables import (
    KVTable,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    TopicList,
    UnlockBatchRequestBody,
)
from remoting.codec.bodies.topic_config import (
    PERM_INHERIT,
    PERM_PRIORITY,
    PERM_READ,
    PERM_WRITE,
    DataVersion,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicFilterType,
    decode_data_version,
    encode_data_version,
)

__all__ = [
    "EXPRESSION_SQL92",
    "EXPRESSION_TAG",
    "MASTER_ID",
    "PERM_INHERIT",
    "PERM_PRIORITY",
    "PERM_READ",
    "PERM_WRITE",
    "SUB_ALL",
    "BodyDecodeError",
    "BrokerData",
    "ClusterInfo",
    "ConsumeFromWhere",
    "ConsumeType",
    "ConsumerData",
    "ConsumerListBody",
    "DataVersion",
    "HeartbeatData",
    "KVTable",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "MessageModel",
    "MessageQueue",
    "ProducerData",
    "QueueData",
    "RegisterBrokerBody",
    "SubscriptionData",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "TopicFilterType",
    "TopicList",
    "TopicRouteData",
    "UnlockBatchRequestBody",
    "body_crc32",
    "decode_data_version",
    "encode_data_version",
]
