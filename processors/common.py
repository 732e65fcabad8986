"""Helpers shared by the broker's data-path processors: header parsing, RocketMQ's remarks and the peer's address.

Nothing here does I/O. Errors are values: :class:`RequestRejected` carries the response code and remark a check
failed with, so a processor raises it from deep inside its checks and turns it into exactly one response at the top
(:meth:`RequestRejected.to_response`), instead of letting an exception become a generic SYSTEM_ERROR.
"""

from __future__ import annotations

from typing import Final, TypeVar

from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.errors import HeaderFieldError
from remoting.codec.headers.base import Header
from remoting.codec.msgid import pack_socket_address
from remoting.processor import RequestContext

H = TypeVar("H", bound=Header)

#: Java's FAQUrl.suggestTodo(...) suffix, kept because operators grep for it.
FAQ_SUFFIX: Final = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
#: Connection attribute caching the packed born-host address of a peer (computed once per connection).
BORN_HOST_ATTRIBUTE: Final = "rocketrio.born_host"


class RequestRejected(Exception):
    """A request check failed: answer ``code`` with ``remark`` (plus whatever fields the processor must add)."""

    def __init__(self, code: ResponseCode, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark

    def to_response(self, request: RemotingCommand, ext_fields: dict[str, str] | None = None) -> RemotingCommand:
        return request.response(self.code, self.remark, ext_fields)


def parse_header(cls: type[H], request: RemotingCommand) -> H:
    """``cls`` parsed from the request's extFields; a missing or bad field raises :class:`RequestRejected`
    (SYSTEM_ERROR naming the field, as Java's ``RemotingCommandException`` does)."""
    try:
        return cls.from_ext_fields(request.ext_fields)
    except HeaderFieldError as exc:
        raise RequestRejected(ResponseCode.SYSTEM_ERROR, str(exc)) from None


def born_host(ctx: RequestContext) -> bytes:
    """The peer's packed socket address for the record's born host: 8 bytes for IPv4 and IPv4-mapped IPv6 peers
    (ali-ons reads only IPv4 hosts), 20 for real IPv6. Cached on the connection; an unparsable address (a test
    transport) packs as 127.0.0.1 with the peer's port."""
    attributes = ctx.connection.attributes
    packed = attributes.get(BORN_HOST_ATTRIBUTE)
    if packed is None:
        host, port = ctx.remote_address[:2]
        try:
            packed = pack_socket_address(host, port)
        except ValueError:
            packed = pack_socket_address("127.0.0.1", port if isinstance(port, int) else 0)
        attributes[BORN_HOST_ATTRIBUTE] = packed
    assert isinstance(packed, bytes)
    return packed
