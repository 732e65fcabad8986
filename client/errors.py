"""Typed client errors. Everything the client raises on purpose is a :class:`MQClientError`.

Transport failures from :mod:`remoting` (:class:`~remoting.errors.RemotingError`) are wrapped where the client retries
(sends) and surface unchanged elsewhere, so callers can tell "the broker said no" (:class:`MQBrokerError`) from "the
network failed" (``RemotingError``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from remoting.errors import RemotingConnectError, RemotingTimeoutError

#: Java's ``ClientErrorCode`` (client/src/main/java/org/apache/rocketmq/client/common/ClientErrorCode.java) a failed
#: send reports: its broker could not be reached, did not answer in time, or had no master address.
CONNECT_BROKER_EXCEPTION: Final = 10001
ACCESS_BROKER_TIMEOUT: Final = 10002
BROKER_NOT_EXIST_EXCEPTION: Final = 10003
#: ... and a send that found no route: no name server set, or none knows the topic (nor TBW102).
NO_NAME_SERVER_EXCEPTION: Final = 10004
NOT_FOUND_TOPIC_EXCEPTION: Final = 10005
#: Java's ``FAQUrl.suggestTodo`` (common/src/main/java/org/apache/rocketmq/common/help/FAQUrl.java) for these.
FAQ_HINT: Final = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
#: ``FAQUrl.attachDefaultURL``'s tail, which ``MQClientException(String, Throwable)`` appends to its message.
UNEXPECTED_HINT: Final = "\nFor more information, please visit the url, http://rocketmq.apache.org/docs/faq/"


class MQClientError(Exception):
    """Base of every error the client raises itself."""


class ClientStateError(MQClientError):
    """A producer or consumer was used before ``start`` / outside its ``async with`` block, or after shutdown."""


class MQBrokerError(MQClientError):
    """A broker or name server answered with a non-success response code. ``code`` and ``remark`` are as received."""

    def __init__(self, code: int, remark: str | None, address: str | None = None) -> None:
        self.code = code
        self.remark = remark
        self.address = address
        where = f" from {address}" if address else ""
        super().__init__(f"response code {code}{where}: {remark or ''}")


class BrokerNotExistError(MQClientError):
    """A queue's broker has no master address, even after re-reading the route: Java's sendKernelImpl throws
    MQClientException "The broker[...] not exist" (``response_code`` -1), which sendDefaultImpl retries
    (client/src/main/java/org/apache/rocketmq/client/impl/producer/DefaultMQProducerImpl.java)."""

    def __init__(self, broker_name: str) -> None:
        super().__init__(f"The broker[{broker_name}] not exist")
        self.broker_name = broker_name
        self.response_code = -1


class TopicRouteNotFoundError(MQClientError):
    """No name server knows a route for ``topic``. The message names the topic and every name server tried;
    ``topic_not_exist`` is True when a name server answered TOPIC_NOT_EXIST (not only transport failures).
    ``response_code``: -1, but for a send (:meth:`for_send`)."""

    def __init__(
        self, topic: str, namesrv_addrs: Sequence[str], cause: str | None = None, *, topic_not_exist: bool = False
    ) -> None:
        self.topic = topic
        self.namesrv_addrs = list(namesrv_addrs)
        self.topic_not_exist = topic_not_exist
        self.cause = cause
        self.response_code = -1
        detail = f" ({cause})" if cause else ""
        super().__init__(
            f"no route info of topic {topic!r} from name servers {', '.join(self.namesrv_addrs) or '(none)'}{detail}"
        )

    def for_send(self, *, selecting: bool = False) -> TopicRouteNotFoundError:
        """This error as sendDefaultImpl throws it (client/.../impl/producer/DefaultMQProducerImpl.java): "No name
        server address, please set it." (:data:`NO_NAME_SERVER_EXCEPTION`, ``validateNameServerSetting``) or "No
        route info of this topic: <topic>" (:data:`NOT_FOUND_TOPIC_EXCEPTION`), with the FAQ hint; ours adds the
        name servers tried. ``selecting`` (a send with a selector): sendSelectImpl's "No route info for this topic,
        <topic>", code -1."""
        error = TopicRouteNotFoundError(self.topic, self.namesrv_addrs, self.cause)
        error.topic_not_exist = self.topic_not_exist
        if not self.namesrv_addrs:
            error.response_code, text = NO_NAME_SERVER_EXCEPTION, f"No name server address, please set it.{FAQ_HINT}"
        elif selecting:
            text = f"No route info for this topic, {self.topic}"
        else:
            error.response_code = NOT_FOUND_TOPIC_EXCEPTION
            text = f"No route info of this topic: {self.topic}{FAQ_HINT}"
        error.args = (f"{text}\n({self})",)
        return error


class MessageValidationError(MQClientError):
    """A message cannot be sent as given (empty topic or body, too large, delay level in a batch...).

    ``response_code`` is what Java's ``MQClientException.getResponseCode()`` gives for the same refusal
    (client/src/main/java/org/apache/rocketmq/client/Validators.java ``checkMessage``): MESSAGE_ILLEGAL (13) for a
    body that is empty or over ``maxMessageSize``, -1 for the rest."""

    def __init__(self, message: str, response_code: int = -1) -> None:
        super().__init__(message)
        self.response_code = response_code


class QueueSelectionError(MQClientError):
    """A send's ``MessageQueueSelector`` raised or picked no queue ("select message queue threw exception" / "select
    message queue return null.", client/src/main/java/org/apache/rocketmq/client/impl/producer/
    DefaultMQProducerImpl.java ``sendSelectImpl``); nothing was sent."""


class SendFailedError(MQClientError):
    """Every attempt of a send failed. ``attempts`` lists ``(broker_name, error)`` in order; the last is the cause.
    ``timed_out``: the send's timeout ran out before its retries did (Java's "sendDefaultImpl call timeout").
    ``response_code``: the last attempt's, as sendDefaultImpl sets it on its "Send [n] times, still failed"
    MQClientException (client/.../impl/producer/DefaultMQProducerImpl.java): the broker's code of a refusal,
    :data:`CONNECT_BROKER_EXCEPTION` for a connection that failed, :data:`ACCESS_BROKER_TIMEOUT` for no answer in
    time, :data:`BROKER_NOT_EXIST_EXCEPTION` for a broker without master, else -1."""

    def __init__(self, topic: str, attempts: list[tuple[str, BaseException]], *, timed_out: bool = False) -> None:
        self.topic = topic
        self.attempts = attempts
        self.timed_out = timed_out
        self.response_code = _response_code(attempts[-1][1]) if attempts else -1
        tried = "; ".join(f"{broker}: {err}" for broker, err in attempts)
        why = " (sendDefaultImpl call timeout)" if timed_out else ""
        super().__init__(f"send to topic {topic!r} failed after {len(attempts)} attempt(s){why}: {tried}")


def _response_code(error: BaseException) -> int:
    """The code sendDefaultImpl's MQClientException gets for a send whose last attempt raised ``error``."""
    if isinstance(error, MQBrokerError):
        return error.code
    if isinstance(error, RemotingConnectError):
        return CONNECT_BROKER_EXCEPTION
    if isinstance(error, RemotingTimeoutError):
        return ACCESS_BROKER_TIMEOUT
    if isinstance(error, BrokerNotExistError):
        return BROKER_NOT_EXIST_EXCEPTION
    return -1
