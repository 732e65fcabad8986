"""Request-reply (RocketMQ 4.6+; docs/protocol.md#716-request-reply): the requester's table of waiting requests, the
replier's :func:`create_reply_message`, and the requester's side of PUSH_REPLY_MESSAGE_TO_CLIENT (326).

Requester (``Producer.request``): the request is a send in Java's ASYNC mode, run in the instance's task group while
the requester waits for the reply alone, which ends its wait whenever it comes (``Producer.send_as_async``:
async retries, a chosen queue's outcome reported to the fault table, a queue of another topic taken as given, as
``DefaultMQProducerImpl.request``), whose properties carry ``CORRELATION_ID`` (a random UUID), ``REPLY_TO_CLIENT`` (the
client id, which the broker knows from the producer's heartbeats: before the first request to a topic the route is
read and the heartbeat sent to every broker and answered, as ``prepareSendRequest``) and ``TTL`` (the timeout in
ms). Its :class:`PendingRequest` waits in the client instance's :class:`ReplyTable` until the broker pushes the
reply with code 326; the handler (:func:`reply_from_push`) builds the reply message, inflates a compressed body (one
that does not inflate is kept as it came, as Java's), stamps ``ARRIVE_TIME`` and completes the request with the same
correlation id. A reply nobody waits for (it came after its request timed out, or names no request) is dropped and
counted in :attr:`ReplyTable.unmatched`.

Replier: a consumer that got a request builds the answer with :func:`create_reply_message` (topic
``<CLUSTER>_REPLY_TOPIC``, the request's ``CORRELATION_ID``, ``REPLY_TO_CLIENT`` and ``TTL``, ``MSG_TYPE=reply``) and
sends it with a producer's ``send``; the client sends such a message with SEND_REPLY_MESSAGE_V2 (325), as Java does.

Errors: :class:`RequestTimeoutError` (Java's ``RequestTimeoutException``, code 10006) when no reply came in time,
also when the send itself was not answered by then (it has not failed yet);
:class:`CreateReplyMessageError` (code 10007) from :func:`create_reply_message` for a request without ``CLUSTER``. A
request the send refuses before sending anything raises the send's own error, as Java's ``request`` runs
``sendDefaultImpl`` on the caller's thread (client/src/main/java/org/apache/rocketmq/client/impl/producer/
DefaultMQProducerImpl.java): ``MessageValidationError`` (``Validators.checkMessage``; ``request_async`` raises it too,
to its caller), ``TopicRouteNotFoundError`` and, with a selector, ``QueueSelectionError`` (``sendSelectImpl``;
``request_async`` hands these two to its callback, as it looks the route up in the background); a failure the send
reports later is wrapped ("send request message to <topic> fail", the cause chained), or handed to a request callback as
it is.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import anyio
import attrs

from client.budget import time_left
from client.errors import (
    ClientStateError,
    MessageValidationError,
    MQClientError,
    QueueSelectionError,
    TopicRouteNotFoundError,
)
from client.message import Message, uncompressed
from client.selector import MessageQueueSelector
from remoting.codec.bodies import MessageQueue
from remoting.codec.headers.ops import ReplyMessageRequestHeader
from remoting.codec.message import MessageExt
from remoting.codec.message_properties import decode_properties
from remoting.codec.msgid import pack_socket_address

if TYPE_CHECKING:
    from client.producer import Producer

log = logging.getLogger(__name__)

#: ``callback(reply or exception)`` of ``Producer.request_async``; may return an awaitable.
RequestCallback = Callable[[MessageExt | Exception], object]

__all__ = [
    "PROPERTY_CORRELATION_ID",
    "PROPERTY_MESSAGE_REPLY_TO_CLIENT",
    "PROPERTY_MESSAGE_TTL",
    "CreateReplyMessageError",
    "PendingRequest",
    "ReplyTable",
    "RequestTimeoutError",
    "create_reply_message",
    "reply_from_push",
]

PROPERTY_CORRELATION_ID: Final = "CORRELATION_ID"
PROPERTY_MESSAGE_REPLY_TO_CLIENT: Final = "REPLY_TO_CLIENT"
PROPERTY_MESSAGE_TTL: Final = "TTL"
PROPERTY_MESSAGE_ARRIVE_TIME: Final = "ARRIVE_TIME"
PROPERTY_MESSAGE_TYPE: Final = "MSG_TYPE"
PROPERTY_CLUSTER: Final = "CLUSTER"
REPLY_MESSAGE_FLAG: Final = "reply"
REPLY_TOPIC_POSTFIX: Final = "REPLY_TOPIC"
#: Java's ``ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION`` and ``CREATE_REPLY_MESSAGE_EXCEPTION``.
REQUEST_TIMEOUT_EXCEPTION: Final = 10006
CREATE_REPLY_MESSAGE_EXCEPTION: Final = 10007


class CreateReplyMessageError(MQClientError):
    """The request carries no ``CLUSTER`` property (``response_code``, also ``code``: 10007, as the
    MQClientException's ``getResponseCode``)."""

    code = response_code = CREATE_REPLY_MESSAGE_EXCEPTION


class RequestTimeoutError(MQClientError):
    """No reply within the request's timeout (``response_code``, also ``code``: 10006, Java's
    ``RequestTimeoutException.getResponseCode``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.code = self.response_code = REQUEST_TIMEOUT_EXCEPTION


class _SendRequestError(MQClientError):
    """The request could not be sent (its ``__cause__`` says why): what the blocking request raises, as Java's
    waitResponse (``MQClientException(message, cause)``, ``response_code`` -1); a request callback gets the cause
    itself."""

    response_code = -1


@attrs.define(eq=False)
class PendingRequest:
    """One request waiting for its reply; :attr:`done` is set once :attr:`reply` is in, or :attr:`send_error` (its
    send failed first)."""

    correlation_id: str
    done: anyio.Event = attrs.field(factory=anyio.Event)
    reply: MessageExt | None = None
    send_error: Exception | None = None

    def fail(self, error: Exception) -> None:
        """The request's send failed: the wait ends, unless the reply already came."""
        if not self.done.is_set():
            self.send_error = error
            self.done.set()


class ReplyTable:
    """A client instance's requests waiting for a reply, by correlation id (Java's ``RequestFutureHolder``). Runs on
    the event loop's thread only."""

    def __init__(self) -> None:
        self._pending: dict[str, PendingRequest] = {}
        #: Replies that matched a waiting request, and replies dropped because none waited (late or unknown).
        self.matched = 0
        self.unmatched = 0

    def __len__(self) -> int:
        return len(self._pending)

    def register(self, correlation_id: str) -> PendingRequest:
        pending = PendingRequest(correlation_id)
        self._pending[correlation_id] = pending
        return pending

    def remove(self, correlation_id: str) -> None:
        self._pending.pop(correlation_id, None)

    def complete(self, reply: MessageExt) -> bool:
        """Hand ``reply`` to the request with its correlation id; False (and counted) when none waits."""
        pending = self._pending.pop(reply.properties.get(PROPERTY_CORRELATION_ID, ""), None)
        if pending is None:
            self.unmatched += 1
            return False
        self.matched += 1
        pending.reply = reply
        pending.done.set()
        return True


def request_properties(msg: Message, client_id: str, timeout: float) -> tuple[Message, str]:
    """A copy of ``msg`` carrying the request properties, and its correlation id."""
    correlation_id = str(uuid.uuid4())
    props = dict(msg.properties)
    props[PROPERTY_CORRELATION_ID] = correlation_id
    props[PROPERTY_MESSAGE_REPLY_TO_CLIENT] = client_id
    props[PROPERTY_MESSAGE_TTL] = str(int(timeout * 1000))
    return attrs.evolve(msg, properties=props), correlation_id


def create_reply_message(request: MessageExt, body: bytes) -> Message:
    """The reply to ``request`` (Java's ``MessageUtil.createReplyMessage``); send it with ``Producer.send``.
    Raises :class:`CreateReplyMessageError` (code 10007) when the request carries no ``CLUSTER``."""
    props = request.properties
    cluster = props.get(PROPERTY_CLUSTER)
    if not cluster:
        raise CreateReplyMessageError("create reply message fail, requestMessage error, property[CLUSTER] is null.")
    reply_props = {PROPERTY_MESSAGE_TYPE: REPLY_MESSAGE_FLAG}
    for name in (PROPERTY_CORRELATION_ID, PROPERTY_MESSAGE_REPLY_TO_CLIENT, PROPERTY_MESSAGE_TTL):
        if name in props:
            reply_props[name] = props[name]
    return Message(f"{cluster}_{REPLY_TOPIC_POSTFIX}", body, properties=reply_props)


def reply_from_push(header: ReplyMessageRequestHeader, body: bytes) -> MessageExt:
    """The reply message a PUSH_REPLY_MESSAGE_TO_CLIENT carries, inflated, with ``ARRIVE_TIME`` set. Raises
    ``ValueError`` for a bad host. A body flagged compressed that does not inflate is logged and kept as it came,
    still the request's reply (client/src/main/java/org/apache/rocketmq/client/impl/ClientRemotingProcessor.java
    receiveReplyMessage catches the decompressor's IOException alone)."""
    props = decode_properties(header.properties or "")
    props[PROPERTY_MESSAGE_ARRIVE_TIME] = str(time.time_ns() // 1_000_000)
    born_host, store_host = _host(header.born_host), _host(header.store_host)
    msg = MessageExt(
        store_size=0,
        body_crc=zlib.crc32(body) & 0x7FFFFFFF,
        queue_id=header.queue_id,
        flag=header.flag,
        queue_offset=0,
        commit_log_offset=0,
        sys_flag=header.sys_flag,
        born_timestamp=header.born_timestamp,
        born_host=born_host,
        store_timestamp=header.store_timestamp,
        store_host=store_host,
        reconsume_times=header.reconsume_times or 0,
        prepared_transaction_offset=0,
        body=body,
        topic=header.topic,
        properties=props,
        store_host_packed=pack_socket_address(*store_host),
    )
    try:
        return uncompressed(msg)
    except zlib.error as exc:
        log.warning("reply %s: body does not inflate (%s), kept as it came", props.get(PROPERTY_CORRELATION_ID), exc)
        return msg


def _host(text: str) -> tuple[str, int]:
    host, _, port = text.lstrip("/").rpartition(":")
    return host, int(port)


async def request(
    producer: Producer,
    msg: Message,
    timeout: float,
    *,
    queue: MessageQueue | None,
    selector: MessageQueueSelector | None,
    arg: object,
) -> MessageExt:
    """``Producer.request``: send ``msg`` as a request and wait for its reply. See the module docstring."""
    request_msg, correlation_id = request_properties(msg, producer.instance.client_id, timeout)
    replies = producer.instance.replies
    pending = replies.register(correlation_id)
    started = anyio.current_time()
    try:
        await _prepare_send_request(producer, msg.topic)
        # The send and the wait for the reply share the request's timeout, and the reply is taken whenever it comes,
        # before the send is answered too (client/.../impl/producer/DefaultMQProducerImpl.java request: sendDefaultImpl
        # in ASYNC mode with ``timeout - cost``, then waitResponse for ``timeout - cost``; ClientRemotingProcessor's
        # processReplyMessage completes the RequestResponseFuture).
        remaining = max(0.0, time_left(timeout, started))
        producer.instance.task_group.start_soon(
            _send_request, producer, request_msg, remaining, pending, queue, selector, arg
        )
        with anyio.move_on_after(remaining):
            await pending.done.wait()
        return _reply_or_raise(pending, msg.topic, timeout)
    finally:
        replies.remove(correlation_id)


async def _send_request(
    producer: Producer,
    msg: Message,
    timeout: float,
    pending: PendingRequest,
    queue: MessageQueue | None,
    selector: MessageQueueSelector | None,
    arg: object,
) -> None:
    """The request's send, in the instance's task group: its failure ends the request's wait unless the reply came
    first (Java's SendCallback.onException); given up after ``timeout``, when the request stops waiting. Stopped with
    the client instance, it fails the request then (NettyRemotingAbstract.failFast fails the pending send)."""
    with anyio.move_on_after(timeout) as scope:
        try:
            await producer.send_as_async(msg, timeout, queue, selector, arg)
        except Exception as exc:
            pending.fail(exc)
        except anyio.get_cancelled_exc_class():
            if not scope.cancel_called:
                pending.fail(ClientStateError(f"the client stopped before the request to {msg.topic!r} was sent"))
            raise


def _reply_or_raise(pending: PendingRequest, topic: str, timeout: float) -> MessageExt:
    """The reply, or what Java's waitResponse throws without one."""
    if pending.reply is not None:
        return pending.reply
    error = pending.send_error
    if isinstance(error, (MessageValidationError, TopicRouteNotFoundError, QueueSelectionError)):
        # Refused before anything was sent: Java's request runs sendDefaultImpl (sendSelectImpl with a selector) on
        # the caller's thread, so Validators.checkMessage's, "No route info of this topic" and the selector's "select
        # message queue ..." MQClientExceptions reach the caller as they are.
        raise error
    if error is not None:
        raise _SendRequestError(f"send request message to <{topic}> fail") from error
    # A send not answered by the timeout has not failed yet: RequestResponseFuture's sendRequestOk starts true and the
    # async send's own timeout is found later, so that is a timeout too.
    raise RequestTimeoutError(
        f"send request message to <{topic}> OK, but wait reply message timeout, {int(timeout * 1000)} ms."
    )


async def _prepare_send_request(producer: Producer, topic: str) -> None:
    """Before the first request to ``topic`` (no route cached yet): read its route and send the heartbeat to every
    broker, waiting for it, so that the broker knows the requester's channel before a reply can come back
    (client/.../impl/producer/DefaultMQProducerImpl.java prepareSendRequest: tryToFindTopicPublishInfo, then
    sendHeartbeatToAllBrokerWithLock). A topic without a route fails in the send that follows."""
    if topic in producer.instance.routes:
        return
    with contextlib.suppress(TopicRouteNotFoundError):
        await producer.publish_info(topic)
    await producer.instance.send_heartbeat_to_all_brokers()


def request_async(producer: Producer, msg: Message, callback: RequestCallback, timeout: float, **where: Any) -> None:
    """``Producer.request_async``: :func:`request` in the instance's task group; ``callback`` gets the reply or the
    exception (a timeout is :class:`RequestTimeoutError` ``request timeout, no reply message.``, a failed send the
    send's own exception, as Java's)."""

    async def run() -> None:
        outcome: MessageExt | Exception
        try:
            outcome = await request(producer, msg, timeout, **where)
        except RequestTimeoutError:
            outcome = RequestTimeoutError("request timeout, no reply message.")
        except _SendRequestError as exc:
            # The send's own failure, unwrapped: requestFail -> RequestCallback.onException(cause)
            # (client/.../impl/producer/DefaultMQProducerImpl.java, client/.../producer/RequestResponseFuture.java).
            outcome = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
        except Exception as exc:
            outcome = exc
        except anyio.get_cancelled_exc_class():
            # The instance is stopping (its task group is cancelled only then) with the request under way. Java's
            # shutdown closes the channels and NettyRemotingAbstract.failFast (remoting/src/main/java/org/apache/
            # rocketmq/remoting/netty/NettyRemotingAbstract.java) fails the pending send, whose callback calls
            # requestFail -> RequestCallback.onException (client/.../impl/producer/DefaultMQProducerImpl.java): tell
            # it too, as Producer._send_then_call does. Ours also tells a request whose reply was still awaited, which
            # Java's RequestFutureHolder times out later, or never once its last producer stopped (its scan is shut
            # down with it).
            stopped = ClientStateError(f"the client stopped before the request to {msg.topic!r} ended")
            producer.instance.call_back(callback, stopped, "request")
            raise
        # Not awaited in this task, which the stop cancels: a running coroutine callback finishes (start_callback).
        producer.instance.call_back(callback, outcome, "request")

    producer.instance.task_group.start_soon(run)
