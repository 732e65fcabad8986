"""The broker's ACL check of every request (:class:`remoting.dispatch.Dispatcher`'s ``admission``): a pool's worker
calls :class:`AclAdmission` after the busy checks, just before the processor, as RocketMQ 4.9.8 runs its RPC hooks
inside the executor's task; the connection's reader calls it only for a code no processor serves (on the VIP
channel, also for one that port refuses). A refused request costs one HMAC and the queue slot it held while it
waited, as in RocketMQ; :meth:`AclAdmission.admits_fields` is the same check on a parsed JSON header, for the
reader's send fast path.

A refusal is answered as a Java broker answers an exception from its RPC hook
(``remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingAbstract.java``): code SYSTEM_ERROR (1), the
AclException text and its first frame as remark, JSON header; oneway requests get nothing. An unexpected error in the
check refuses the request the same way (and is logged with its traceback) instead of ending the worker or reader that
called it. Each refusal is logged (code, access key, client address, reason) at most ``burst`` times per 10 s
(:class:`remoting.ratelog.RateLimitedLog`), on one line of bounded length: the access key and the reason come from
the request, so they are quoted and cut (a client cannot write megabytes or forged lines into the log).
"""

from __future__ import annotations

import logging
from typing import Any

import attrs

from broker.acl.manager import AclDenied, AclManager
from broker.acl.remote_address import remote_ip
from remoting.codec.codes import LanguageCode, ResponseCode, SerializeType
from remoting.codec.command import RemotingCommand
from remoting.processor import RequestContext
from remoting.ratelog import RateLimitedLog

log = logging.getLogger(__name__)


class AclAdmission:
    """Admits or refuses one request; see the module docstring. ``refused`` counts refusals (tests, stats)."""

    def __init__(self, manager: AclManager, refusal_log: RateLimitedLog | None = None) -> None:
        self.manager = manager
        self.refused = 0
        self._log = refusal_log or RateLimitedLog(log)

    def __call__(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        address = ctx.connection.remote_address
        try:
            self.manager.validate(remote_ip(address), request)
        except AclDenied as exc:
            self.refused += 1
            self._log.warning(
                "ACL refused request code %d from %s:%s (accessKey %.80r): %.300r",
                request.code,
                address[0],
                address[1],
                exc.access_key,
                exc.message,
            )
            response = request.response(ResponseCode.SYSTEM_ERROR, exc.remark)
            return attrs.evolve(response, serialize_type=SerializeType.JSON)
        except Exception as exc:  # a bug in the check must refuse the request, never end its worker or reader
            log.exception("ACL check failed on request code %d from %s:%s", request.code, address[0], address[1])
            return request.response(ResponseCode.SYSTEM_ERROR, f"ACL check failed: {type(exc).__name__}")
        return None

    def admits_fields(self, ctx: RequestContext, fields: dict[str, Any], body: bytes) -> bool:
        """Whether the request of a parsed JSON header passes the same check as it is (the dispatcher's fast path).
        False, with nothing logged or counted, for a refusal and for anything unusual (an extFields value that is not
        text makes the signing or the resource lookup raise, an error in the check): the general path then checks the
        request again, as it decodes it, and answers it."""
        ext_fields = fields.get("extFields")
        if type(ext_fields) is not dict:
            return False
        request = RemotingCommand(fields["code"], 0, 0, LanguageCode.OTHER, 0, None, ext_fields, body)
        try:
            self.manager.validate(remote_ip(ctx.connection.remote_address), request)
        except Exception:  # AclDenied or a bug: the general path refuses it with the right answer and log line
            return False
        return True
