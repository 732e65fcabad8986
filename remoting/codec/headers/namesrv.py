"""Name-server request and response headers (docs/protocol.md#314-name-server-headers).

Java names are kept (``RegisterBrokerRequestHeader`` ...) so that a reader can put the two code bases side by side.
"""

from __future__ import annotations

import attrs

from remoting.codec.codes import RequestCode
from remoting.codec.headers.base import Header, wire


@attrs.frozen(slots=True)
class RegisterBrokerRequestHeader(Header):
    """REGISTER_BROKER (103), broker -> namesrv; the body is a RegisterBrokerBody
    (docs/protocol.md#46-registerbrokerbody).

    ``body_crc32`` 0 means "do not check"; ``compressed`` says whether the body is the zlib form.
    """

    REQUEST_CODES = (RequestCode.REGISTER_BROKER,)

    broker_name: str = attrs.field(metadata=wire("brokerName"))
    broker_addr: str = attrs.field(metadata=wire("brokerAddr"))
    cluster_name: str = attrs.field(metadata=wire("clusterName"))
    ha_server_addr: str = attrs.field(metadata=wire("haServerAddr"))
    broker_id: int = attrs.field(metadata=wire("brokerId"))
    compressed: bool = attrs.field(default=False, metadata=wire("compressed"))
    body_crc32: int = attrs.field(default=0, metadata=wire("bodyCrc32", int32=True))


@attrs.frozen(slots=True)
class RegisterBrokerResponseHeader(Header):
    """REGISTER_BROKER response: both set only for a slave whose master is registered."""

    ha_server_addr: str | None = attrs.field(default=None, metadata=wire("haServerAddr"))
    master_addr: str | None = attrs.field(default=None, metadata=wire("masterAddr"))


@attrs.frozen(slots=True)
class UnRegisterBrokerRequestHeader(Header):
    """UNREGISTER_BROKER (104), broker -> namesrv."""

    REQUEST_CODES = (RequestCode.UNREGISTER_BROKER,)

    broker_name: str = attrs.field(metadata=wire("brokerName"))
    broker_addr: str = attrs.field(metadata=wire("brokerAddr"))
    cluster_name: str = attrs.field(metadata=wire("clusterName"))
    broker_id: int = attrs.field(metadata=wire("brokerId"))


@attrs.frozen(slots=True)
class GetRouteInfoRequestHeader(Header):
    """GET_ROUTEINFO_BY_TOPIC (105). ``accept_standard_json_only`` asks for quoted map keys
    (docs/protocol.md#42-topicroutedata)."""

    REQUEST_CODES = (RequestCode.GET_ROUTEINFO_BY_TOPIC,)

    topic: str = attrs.field(metadata=wire("topic"))
    accept_standard_json_only: bool | None = attrs.field(default=None, metadata=wire("acceptStandardJsonOnly"))


@attrs.frozen(slots=True)
class PutKVConfigRequestHeader(Header):
    """PUT_KV_CONFIG (100)."""

    REQUEST_CODES = (RequestCode.PUT_KV_CONFIG,)

    namespace: str = attrs.field(metadata=wire("namespace"))
    key: str = attrs.field(metadata=wire("key"))
    value: str = attrs.field(metadata=wire("value"))


@attrs.frozen(slots=True)
class GetKVConfigRequestHeader(Header):
    """GET_KV_CONFIG (101)."""

    REQUEST_CODES = (RequestCode.GET_KV_CONFIG,)

    namespace: str = attrs.field(metadata=wire("namespace"))
    key: str = attrs.field(metadata=wire("key"))


@attrs.frozen(slots=True)
class GetKVConfigResponseHeader(Header):
    """GET_KV_CONFIG response on SUCCESS (QUERY_NOT_FOUND carries no value)."""

    value: str | None = attrs.field(default=None, metadata=wire("value"))


@attrs.frozen(slots=True)
class DeleteKVConfigRequestHeader(Header):
    """DELETE_KV_CONFIG (102)."""

    REQUEST_CODES = (RequestCode.DELETE_KV_CONFIG,)

    namespace: str = attrs.field(metadata=wire("namespace"))
    key: str = attrs.field(metadata=wire("key"))


@attrs.frozen(slots=True)
class GetKVListByNamespaceRequestHeader(Header):
    """GET_KVLIST_BY_NAMESPACE (219)."""

    REQUEST_CODES = (RequestCode.GET_KVLIST_BY_NAMESPACE,)

    namespace: str = attrs.field(metadata=wire("namespace"))


@attrs.frozen(slots=True)
class GetTopicsByClusterRequestHeader(Header):
    """GET_TOPICS_BY_CLUSTER (224)."""

    REQUEST_CODES = (RequestCode.GET_TOPICS_BY_CLUSTER,)

    cluster: str = attrs.field(metadata=wire("cluster"))


@attrs.frozen(slots=True)
class DeleteTopicFromNamesrvRequestHeader(Header):
    """DELETE_TOPIC_IN_NAMESRV (216). ``cluster_name`` limits the deletion to one cluster when given."""

    REQUEST_CODES = (RequestCode.DELETE_TOPIC_IN_NAMESRV,)

    topic: str = attrs.field(metadata=wire("topic"))
    cluster_name: str | None = attrs.field(default=None, metadata=wire("clusterName"))


@attrs.frozen(slots=True)
class WipeWritePermOfBrokerRequestHeader(Header):
    """WIPE_WRITE_PERM_OF_BROKER (205)."""

    REQUEST_CODES = (RequestCode.WIPE_WRITE_PERM_OF_BROKER,)

    broker_name: str = attrs.field(metadata=wire("brokerName"))


@attrs.frozen(slots=True)
class WipeWritePermOfBrokerResponseHeader(Header):
    """WIPE_WRITE_PERM_OF_BROKER response: how many topics lost their write permission."""

    wipe_topic_count: int = attrs.field(metadata=wire("wipeTopicCount", int32=True))


@attrs.frozen(slots=True)
class AddWritePermOfBrokerRequestHeader(Header):
    """ADD_WRITE_PERM_OF_BROKER (327)."""

    REQUEST_CODES = (RequestCode.ADD_WRITE_PERM_OF_BROKER,)

    broker_name: str = attrs.field(metadata=wire("brokerName"))


@attrs.frozen(slots=True)
class AddWritePermOfBrokerResponseHeader(Header):
    """ADD_WRITE_PERM_OF_BROKER response: how many topics regained their write permission."""

    add_topic_count: int = attrs.field(metadata=wire("addTopicCount", int32=True))


@attrs.frozen(slots=True)
class QueryDataVersionRequestHeader(Header):
    """QUERY_DATA_VERSION (322), broker -> namesrv; the body is the broker's DataVersion JSON."""

    REQUEST_CODES = (RequestCode.QUERY_DATA_VERSION,)

    broker_name: str = attrs.field(metadata=wire("brokerName"))
    broker_addr: str = attrs.field(metadata=wire("brokerAddr"))
    cluster_name: str = attrs.field(metadata=wire("clusterName"))
    broker_id: int = attrs.field(metadata=wire("brokerId"))


@attrs.frozen(slots=True)
class QueryDataVersionResponseHeader(Header):
    """QUERY_DATA_VERSION response: ``changed`` is true when the broker's DataVersion differs from the stored one."""

    changed: bool = attrs.field(metadata=wire("changed"))
