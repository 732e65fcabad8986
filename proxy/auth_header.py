"""The 5.x clients' ``authorization`` header, sans-IO: parsing it and checking its signature (RocketMQ's
``acl/src/main/java/org/apache/rocketmq/acl/common/AuthorizationHeader.java`` and the ``parse(GeneratedMessageV3,
AuthenticationHeader)`` half of ``acl/.../plain/PlainAccessResource.java``).

The header reads ``MQv2-HMAC-SHA1 Credential=<ak>[/...], SignedHeaders=x-mq-date-time, Signature=<hex>``: split at
the first space, then on commas into ``key=value`` items (as Java's ``String.split``: trailing empty items are
dropped, so a trailing comma is accepted); ``Credential`` is cut at ``/`` and its first part is the
access key; ``Signature`` is the lowercase (any case is accepted) hex of HMAC-SHA1 keyed by the secret key over the
``x-mq-date-time`` header's value. Unknown items are ignored, as in RocketMQ.

:func:`parse_authorization` raises :class:`AuthHeaderError` (a ``ValueError``) with RocketMQ's wording for every bad
shape: no space, an item without ``=``, a signature that is not hex. Nothing here raises anything else for any
text. The date-time is not checked for freshness: ACL 1.0 has no replay window.
"""

from __future__ import annotations

import hmac
from typing import Final

import attrs

from remoting.codec.acl_signing import hmac_sha1
from remoting.codec.message_properties import java_split

__all__ = ["AUTHORIZATION", "DATE_TIME", "AuthHeaderError", "Authorization", "authorization_header",
           "parse_authorization"]  # fmt: skip

AUTHORIZATION: Final = "authorization"
DATE_TIME: Final = "x-mq-date-time"
METHOD: Final = "MQv2-HMAC-SHA1"
_HEX: Final = frozenset("0123456789abcdefABCDEF")


class AuthHeaderError(ValueError):
    """An ``authorization`` header RocketMQ's parser refuses; the message says why."""


@attrs.frozen(slots=True)
class Authorization:
    """A parsed header: the access key (None when the credential is empty, as the Python client sends it without
    credentials) and the signature's bytes (None when absent)."""

    method: str
    access_key: str | None
    signature: bytes | None = attrs.field(repr=False)

    def signed_by(self, secret_key: str, date_time: str | None) -> bool:
        """Whether the signature is HMAC-SHA1(``secret_key``, ``date_time``); False without either."""
        if self.signature is None or date_time is None:
            return False
        return hmac.compare_digest(hmac_sha1(secret_key, date_time.encode("utf-8")), self.signature)


def _hex(text: str) -> bytes:
    """Strict hex (Commons Codec's ``Hex.decodeHex``): even length, hex digits only, no spaces."""
    if len(text) % 2:
        raise AuthHeaderError("Odd number of characters.")
    if not _HEX.issuperset(text):
        bad = next(c for c in text if c not in _HEX)
        raise AuthHeaderError(f"Illegal hexadecimal character {bad!r}")
    return bytes.fromhex(text)


def parse_authorization(header: str | None) -> Authorization:
    """The parsed header; raises :class:`AuthHeaderError` (see the module docstring)."""
    if header is None:
        raise AuthHeaderError("authorization header is missing")
    method, sep, rest = header.partition(" ")
    if not sep:
        raise AuthHeaderError("authorization header is incorrect")
    access_key: str | None = None
    signature: bytes | None = None
    for item in java_split(rest, ","):
        key, sep, value = item.strip().partition("=")
        if not sep:
            raise AuthHeaderError("authorization keyValues length is incorrect, actual length=1")
        if key == "Credential":
            credential = java_split(value, "/")
            if not credential:
                raise AuthHeaderError("authorization credential length is incorrect, actual length=0")
            access_key = credential[0] or None
        elif key == "Signature":
            signature = _hex(value)
    return Authorization(method, access_key, signature)


def authorization_header(access_key: str, secret_key: str, date_time: str) -> str:
    """The header a 5.x client sends for these keys at ``date_time`` (tests, benches)."""
    signature = hmac_sha1(secret_key, date_time.encode("utf-8")).hex()
    return f"{METHOD} Credential={access_key}, SignedHeaders={DATE_TIME}, Signature={signature}"
