"""ACL 1.0 on the gRPC front door: what each 5.x RPC needs, and the broker's own check of it (RocketMQ's
``proxy/src/main/java/org/apache/rocketmq/proxy/grpc/interceptor/AuthenticationInterceptor.java`` over
``acl/src/main/java/org/apache/rocketmq/acl/plain/PlainAccessResource.java``'s ``parse(GeneratedMessageV3, ...)``).

:class:`GrpcAcl` is built by :mod:`proxy.startup` when the broker runs with ``aclEnable``; it holds the broker's
:class:`~broker.acl.manager.AclManager` (the same accounts, white lists and hot reload as the remoting port) and
:meth:`GrpcAcl.check` runs before anything else of an RPC (before the client-id check, as RocketMQ 5.3's request
pipeline does). The order is RocketMQ 5's (``PlainAccessResource.parse`` then ``PlainPermissionManager.validate``):
the ``authorization`` header (:mod:`proxy.auth_header`) and the ``x-mq-date-time`` header (a missing or malformed one
is refused even for a globally white-listed client: RocketMQ parses both before it looks at the white list), the
resources the request names (a request RocketMQ's parser refuses is refused), the gRPC peer's IP (refused when
unknown, :data:`~proxy.common.UNKNOWN_PEER`: RocketMQ always has the channel's address), the global white list on it,
then :meth:`AclManager.check <broker.acl.manager.AclManager.check>` (account, its white address, signature over
``x-mq-date-time``, permissions) — one check, two front ends.

Resources per request (a group is checked as ``%RETRY%<group>``; names are checked as the proxy uses them, without
the resource namespace, which this proxy does not apply either): SendMessage, EndTransaction and RecallMessage topic
PUB (a send's messages must share one topic); ReceiveMessage, AckMessage, ForwardMessageToDeadLetterQueue,
ChangeInvisibleDuration and QueryAssignment topic SUB and group SUB; QueryRoute topic PUB or SUB; Heartbeat of a
consumer its group SUB; NotifyClientTermination its group SUB when it names one; a Telemetry Settings its publishing
topics PUB, or its subscription's group and topics SUB; other Telemetry commands only authentication.

Every refusal raises :class:`~proxy.common.RpcError` with ``UNAUTHORIZED`` (40100) and the reason: RocketMQ 5.3's
``proxy/.../grpc/v2/common/ResponseBuilder.java`` answers both an authentication and an authorization failure with
it (FORBIDDEN is for a topic without readable or writable queues). Refusals are logged rate-limited, the access key
and reason quoted and cut. A bug in the check refuses the request (INTERNAL_SERVER_ERROR), never admits it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from broker.acl.manager import AclDenied, AclManager
from broker.acl.permission import ANY, PUB, SUB
from broker.acl.plain_config import RETRY_PREFIX
from broker.acl.resources import Needed
from proxy.auth_header import AUTHORIZATION, DATE_TIME, parse_authorization
from proxy.common import PEER_KEY, UNKNOWN_PEER, Code, RpcError, peer_of
from proxy.pb import definition
from remoting.ratelog import RateLimitedLog

__all__ = ["GrpcAcl", "needed_by"]

log = logging.getLogger(__name__)

_CONSUMERS: Final = frozenset({definition.ClientType.PUSH_CONSUMER, definition.ClientType.SIMPLE_CONSUMER})
#: No 5.x RPC is one of the admin-only request codes; :func:`~broker.acl.manager.check_perm` gets this one.
_NOT_ADMIN: Final = -1


class _Refused(ValueError):
    """A request RocketMQ's parser refuses before any check."""


def _group(needed: Needed, resource: Any) -> None:
    needed[RETRY_PREFIX + resource.name] = SUB


def _send(req: Any, needed: Needed) -> None:
    if not req.messages:
        raise _Refused("SendMessageRequest, messageCount is zero")
    topic = req.messages[0].topic.name
    if any(message.topic.name != topic for message in req.messages):
        raise _Refused("SendMessageRequest, messages' topic is not consistent")
    needed[topic] = PUB


def _topic_pub(req: Any, needed: Needed) -> None:
    needed[req.topic.name] = PUB


def _subscribe(req: Any, needed: Needed) -> None:
    _group(needed, req.group)
    needed[req.topic.name] = SUB


def _receive(req: Any, needed: Needed) -> None:
    _group(needed, req.group)
    needed[req.message_queue.topic.name] = SUB


def _route(req: Any, needed: Needed) -> None:
    needed[req.topic.name] = ANY


def _heartbeat(req: Any, needed: Needed) -> None:
    if req.client_type in _CONSUMERS:
        if not req.HasField("group"):
            raise _Refused("Consumer heartbeat doesn't have group")
        _group(needed, req.group)


def _terminate(req: Any, needed: Needed) -> None:
    if req.group.name.strip():
        _group(needed, req.group)


def _telemetry(req: Any, needed: Needed) -> None:
    if not req.HasField("settings"):
        return
    settings = req.settings
    if not settings.HasField("publishing") and not settings.HasField("subscription"):
        raise _Refused("settings command doesn't have publishing or subscription")
    if settings.HasField("publishing"):
        for topic in settings.publishing.topics:
            needed[topic.name] = PUB
    if settings.HasField("subscription"):
        _group(needed, settings.subscription.group)
        for entry in settings.subscription.subscriptions:
            needed[entry.topic.name] = SUB


_RULES: Final[dict[str, Callable[[Any, Needed], None]]] = {
    "SendMessageRequest": _send,
    "EndTransactionRequest": _topic_pub,
    "RecallMessageRequest": _topic_pub,
    "ReceiveMessageRequest": _receive,
    "AckMessageRequest": _subscribe,
    "ForwardMessageToDeadLetterQueueRequest": _subscribe,
    "ChangeInvisibleDurationRequest": _subscribe,
    "QueryAssignmentRequest": _subscribe,
    "QueryRouteRequest": _route,
    "HeartbeatRequest": _heartbeat,
    "NotifyClientTerminationRequest": _terminate,
    "TelemetryCommand": _telemetry,
}


def needed_by(req: Any) -> Needed:
    """``{resource: permission}`` for one request message (see the module docstring); ``{}`` for a message with no
    rule (only authentication) or ``None`` (a Telemetry stream being opened). Raises ``ValueError``."""
    needed: Needed = {}
    rule = None if req is None else _RULES.get(type(req).DESCRIPTOR.name)
    if rule is not None:
        rule(req, needed)
    return needed


class GrpcAcl:
    """The check of every gRPC request when ``aclEnable`` is on; see the module docstring. ``refused`` counts."""

    def __init__(self, manager: AclManager, refusal_log: RateLimitedLog | None = None) -> None:
        self.manager = manager
        self.refused = 0
        self._log = refusal_log or RateLimitedLog(log)

    def check(self, req: Any, md: dict[str, str]) -> None:
        """Admit ``req`` (``None``: only the caller's credentials, when a Telemetry stream opens) with request
        headers ``md``, or raise RpcError (UNAUTHORIZED, or INTERNAL_SERVER_ERROR for a bug in the check)."""
        access_key: str | None = None
        try:
            # The headers are parsed first, so even a globally white-listed client needs well-formed ones.
            auth = parse_authorization(md.get(AUTHORIZATION))
            access_key = auth.access_key
            date_time = md.get(DATE_TIME)
            if date_time is None:  # RocketMQ's parse reads it unconditionally (and fails without it)
                raise ValueError(f"{DATE_TIME} header is missing")
            needed = needed_by(req)
            ip = peer_of(md)[0]
            if ip == UNKNOWN_PEER[0]:  # fail closed: never taken for any address a white list may name
                raise ValueError("the client's address is unknown")
            if self.manager.globally_white(ip):
                return
            self.manager.check(ip, access_key, lambda secret: auth.signed_by(secret, date_time), _NOT_ADMIN, needed)
        except (AclDenied, ValueError) as exc:  # ValueError: a refused request or header
            reason = exc.message if isinstance(exc, AclDenied) else str(exc)
            self._refuse(req, md, access_key, reason)
        except Exception as exc:  # a bug in the check refuses the request, never admits it
            log.exception("gRPC ACL check failed on %s", _rpc(req))
            raise RpcError(Code.INTERNAL_SERVER_ERROR, f"ACL check failed: {type(exc).__name__}") from None

    def _refuse(self, req: Any, md: dict[str, str], access_key: str | None, reason: str) -> None:
        self.refused += 1
        self._log.warning(
            "ACL refused gRPC %s from %s (accessKey %.80r): %.300r", _rpc(req), md.get(PEER_KEY), access_key,
            reason,
        )  # fmt: skip
        raise RpcError(Code.UNAUTHORIZED, reason)


def _rpc(req: Any) -> str:
    return "Telemetry stream" if req is None else str(type(req).DESCRIPTOR.name)
