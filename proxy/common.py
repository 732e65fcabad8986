"""Small shared pieces of the gRPC front door: statuses, request metadata, the mapping of broker response codes to
5.x status codes (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/common/ResponseBuilder.java)."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Final, TypeVar
from urllib.parse import unquote

from proxy.pb import definition
from remoting.codec.bodies import PERM_READ, PERM_WRITE
from remoting.codec.codes import ResponseCode
from remoting.codec.topics import TOPIC_MAX_LENGTH, VALID_NAME_PATTERN, is_legal_name, is_system_group, is_system_topic

__all__ = [
    "PEER_KEY",
    "TLS_ONLY_KEY",
    "UNKNOWN_PEER",
    "Code",
    "RpcError",
    "check_topic",
    "client_id_of",
    "finish_now",
    "peer_of",
    "proxy_error",
    "proxy_status",
    "status",
    "topic_not_found",
    "code_of_broker_refusal",
    "relayed_code",
    "status_of_relayed_answer",
]

T = TypeVar("T")

Code = definition.Code
#: The header the proxy puts the gRPC peer in for the Trio side (``ipv4:127.0.0.1:51234``).
PEER_KEY: Final = "x-rocketrio-peer"
#: The header the proxy sets ("true") on a request that came in on its TLS-only port (``grpcTlsServerPort``), whatever
#: the client sent in it: routes then name every broker at its TLS-only port (:mod:`proxy.route`).
TLS_ONLY_KEY: Final = "x-rocketrio-tls-only"
#: :func:`peer_of` of a caller whose address is not known: no client sends from it, the ACL refuses it
#: (:mod:`proxy.acl`), the client registry and a message's born host show it. Never 127.0.0.1, which white lists
#: may trust.
UNKNOWN_PEER: Final = ("0.0.0.0", 0)
#: ResponseBuilder.RESPONSE_CODE_MAPPING: what a broker answer relayed as is becomes; any other code is
#: INTERNAL_SERVER_ERROR.
_RELAYED: Final = {
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
}


class RpcError(Exception):
    """A request answered with a non-OK 5.x status (raised by checks, turned into the response's status)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


#: What RocketMQ's proxy answers before the message of a refusal raised as a ProxyException (the processors' and the
#: local message service's): GrpcProxyException takes it as its cause, whose toString is then the status message
#: (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/common/GrpcProxyException.java, ResponseBuilder.buildStatus).
_PROXY_EXCEPTION: Final = "org.apache.rocketmq.proxy.common.ProxyException: "


def proxy_error(code: int, message: str) -> RpcError:
    """A refusal RocketMQ's proxy raises as a ProxyException, its message as the client reads it."""
    return RpcError(code, _PROXY_EXCEPTION + message)


def proxy_status(code: int, message: str) -> Any:
    """The status of :func:`proxy_error` (an entry's, as AckMessageActivity builds it from a ProxyException)."""
    return status(code, _PROXY_EXCEPTION + message)


def topic_not_found(topic: str) -> RpcError:
    """TOPIC_NOT_FOUND for a topic without a route, with the message of the route service's MQClientException
    (TopicRouteService.getCacheMessageQueueWrapper; client/src/main/java/org/apache/rocketmq/client/exception/
    MQClientException.java and common/.../help/FAQUrl.java attachDefaultURL)."""
    return RpcError(
        Code.TOPIC_NOT_FOUND,
        f"CODE: {ResponseCode.TOPIC_NOT_EXIST}  DESC: No topic route info in name server for the topic: {topic}\n"
        "For more information, please visit the url, https://rocketmq.apache.org/docs/bestPractice/06FAQ",
    )


#: Validators.CHARACTER_MAX_LENGTH: the longest group name.
_GROUP_MAX_LENGTH: Final = 255


def _java_length(name: str) -> int:
    """Java's String.length(): UTF-16 code units."""
    return len(name.encode("utf-16-le")) // 2


def check_topic(topic: str) -> None:
    """GrpcValidator.validateTopic (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/common/GrpcValidator.java):
    a legal name that is no system topic; raises RpcError(ILLEGAL_TOPIC) with the remark of the 5.x client's
    Validators.checkTopic (client/src/main/java/org/apache/rocketmq/client/Validators.java), which checks blank, then
    length, then characters (not the 4.9.8 broker's TopicValidator.validateTopic's)."""
    if is_blank(topic):
        raise RpcError(Code.ILLEGAL_TOPIC, "The specified topic is blank")
    if _java_length(topic) > TOPIC_MAX_LENGTH:
        raise RpcError(Code.ILLEGAL_TOPIC, f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}.")
    if not is_legal_name(topic):
        remark = f"The specified topic[{topic}] contains illegal characters, allowing only {VALID_NAME_PATTERN}"
        raise RpcError(Code.ILLEGAL_TOPIC, remark)
    if is_system_topic(topic):
        raise RpcError(Code.ILLEGAL_TOPIC, "cannot access system topic")


def routed_perm(topic_perm: int, broker_perm: int) -> int:
    """A topic's permission as its route carries it: a broker that is not read+write registers every topic with its
    own ``brokerPermission`` (BrokerController.registerBrokerAll), which the proxy's routes then show."""
    readable_writable = PERM_READ | PERM_WRITE
    return topic_perm if broker_perm & readable_writable == readable_writable else broker_perm


def check_group(group: str) -> None:
    """GrpcValidator.validateConsumerGroup: a legal name that is no system group; raises
    RpcError(ILLEGAL_CONSUMER_GROUP) with Validators.checkGroup's remark (blank, then length, then characters)."""
    if is_blank(group):
        raise RpcError(Code.ILLEGAL_CONSUMER_GROUP, "the specified group is blank")
    if _java_length(group) > _GROUP_MAX_LENGTH:
        remark = f"the specified group is longer than group max length {_GROUP_MAX_LENGTH}."
        raise RpcError(Code.ILLEGAL_CONSUMER_GROUP, remark)
    if not is_legal_name(group):
        remark = f"the specified group[{group}] contains illegal characters, allowing only {VALID_NAME_PATTERN}"
        raise RpcError(Code.ILLEGAL_CONSUMER_GROUP, remark)
    if is_system_group(group):
        raise RpcError(Code.ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")


#: What Java's Character.isWhitespace calls whitespace (StringUtils.isBlank): the ASCII controls below and the Unicode
#: space, line and paragraph separators except the no-break ones (U+00A0, U+2007, U+202F).
_JAVA_WHITESPACE: Final = frozenset(
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2008\u2009\u200a"
    "\u2028\u2029\u205f\u3000"
)


def is_blank(text: str) -> bool:
    """Java's StringUtils.isBlank: empty, or only characters Character.isWhitespace accepts."""
    if text and text[0] not in _JAVA_WHITESPACE:
        return False  # the common case, without a generator per call
    return all(ch in _JAVA_WHITESPACE for ch in text)


def status(code: int = Code.OK, message: str = "OK") -> Any:
    return definition.Status(code=code, message=message)


def relayed_code(code: int) -> int:
    """ResponseBuilder.buildCode: the status code of a broker answer the proxy relays as is (NO_PERMISSION and
    SYSTEM_ERROR are INTERNAL_SERVER_ERROR there)."""
    return int(_RELAYED.get(code, Code.INTERNAL_SERVER_ERROR))  # type: ignore[call-overload]


def code_of_broker_refusal(code: int) -> int:
    """ResponseBuilder.buildStatus(Throwable) for a broker's refusal as the cluster-mode proxy sees it (an
    MQBrokerException): TOPIC_NOT_EXIST is TOPIC_NOT_FOUND (TopicRouteHelper.isTopicNotExistError), any other code
    :func:`relayed_code`. RocketMQ's local mode answers INTERNAL_SERVER_ERROR for every refused pop; ours follows the
    cluster mode, whose answers tell the client more."""
    return int(Code.TOPIC_NOT_FOUND) if code == ResponseCode.TOPIC_NOT_EXIST else relayed_code(code)


def status_of_relayed_answer(code: int, remark: str | None) -> Any:
    """ResponseBuilder.buildStatus(int, String): a relayed broker answer's status (:func:`relayed_code`), its remark
    or else its code as the message."""
    return status(relayed_code(code), str(code) if remark is None else remark)


def client_id_of(metadata: dict[str, str]) -> str:
    """The caller's ``x-mq-client-id``; raises RpcError(CLIENT_ID_REQUIRED) for a blank one, as
    GrpcMessagingApplication.validateContext (proxy/src/main/java/org/apache/rocketmq/proxy/grpc/v2/
    GrpcMessagingApplication.java)."""
    client_id = metadata.get("x-mq-client-id", "")
    if is_blank(client_id):
        raise RpcError(Code.CLIENT_ID_REQUIRED, "client id cannot be empty")
    return client_id


def peer_of(metadata: dict[str, str]) -> tuple[str, int]:
    """The gRPC peer as ``(host, port)``: grpcio writes ``ipv4:h:p`` and ``ipv6:%5Bh%5D:p`` (percent-encoded), the
    front ``ipv6:[h]:p``. :data:`UNKNOWN_PEER` when there is none, it is no IP peer, or the front no longer knows
    the client (:func:`proxy.front.real_peer` gives ``""``)."""
    kind, _, rest = unquote(metadata.get(PEER_KEY, "")).partition(":")
    host, _, port = rest.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if kind not in ("ipv4", "ipv6") or not host:
        return UNKNOWN_PEER
    return host, int(port) if port.isdigit() else 0


def finish_now(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro``, which must not suspend, to its end synchronously and return its result. A coroutine that tries
    to wait is closed and ``RuntimeError`` raised: the caller's precondition (nothing can wait) was wrong."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a coroutine expected to finish at once tried to wait")


class TransactionData:
    """The offsets 5.x half messages leave for their EndTransaction, as RocketMQ 5.3.3's TransactionDataManager
    (proxy/src/main/java/org/apache/rocketmq/proxy/service/transaction/TransactionDataManager.java) keeps them: per
    (producer group, transaction id), up to ``max_num`` ``(commit-log offset, queue offset, Trio time added)``, oldest
    first (beyond it the oldest goes); at most ``max_keys`` ids, the oldest forgotten beyond (never ended nor checked:
    the broker's check names it again). Entries older than ``expiry`` seconds go as a key's next one is added (Java's
    TransactionDataCleaner sweeps them every ``transactionDataExpireScanPeriodMillis``), so a half the broker checks
    again and again keeps no more than its unexpired ones."""

    def __init__(self, max_num: int, expiry: float = 30.0, max_keys: int = 100_000) -> None:
        self.max_num = max_num
        self.expiry = expiry
        self.max_keys = max_keys
        self.by_key: dict[tuple[str, str], list[tuple[int, int, float]]] = {}

    def add(self, key: tuple[str, str], commit_log_offset: int, queue_offset: int, now: float) -> None:
        entries = self.by_key.get(key)
        if entries is None:
            if len(self.by_key) >= self.max_keys:
                del self.by_key[next(iter(self.by_key))]
            entries = self.by_key[key] = []
        while entries and now - entries[0][2] > self.expiry:  # oldest first: the expired lead
            del entries[0]
        entries.append((commit_log_offset, queue_offset, now))
        if len(entries) > self.max_num:  # addTransactionData: pollFirst
            del entries[0]
        if not entries:
            del self.by_key[key]

    def poll(self, key: tuple[str, str], now: float) -> tuple[int, int] | None:
        """The newest data of ``key`` added ``expiry`` seconds ago or later, taken away with the expired ones after it
        (pollNoExpireTransactionData); ``None`` when there is none."""
        entries = self.by_key.get(key, [])
        found = None
        while entries and found is None:
            phy, queue_offset, added = entries.pop()
            if now - added <= self.expiry:
                found = (phy, queue_offset)
        if not entries:
            self.by_key.pop(key, None)
        return found
