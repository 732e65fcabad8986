"""ACL 1.0 request signing, sans-IO: the content a signature covers, the HMAC, and signing a request
(docs/protocol.md#11-acl-10-signed-requests).

RocketMQ's rule (``acl/src/main/java/org/apache/rocketmq/acl/common/AclUtils.java``, ``AclSigner.java``,
``AclClientRPCHook.java``): sort every extFields entry by key in Java's ``TreeMap`` order (UTF-16 code units), leave
out ``Signature``, concatenate the values only (no keys, no separators), encode as UTF-8, append the raw body, then
``base64(HMAC-SHA1(secretKey, content))``. The broker's check (``PlainAccessValidator.parse``) also leaves out
``_UNIQUE_KEY_QUERY``, which the Java client signs: :func:`signature_matches` accepts either content for that one
field, so queries from every client verify.

Both sides use this module: the broker's ACL check (:mod:`broker.acl`) and our client's signing
(:class:`remoting.client.RemotingClient`). Nothing here raises for odd input: missing keys simply sign as absent.
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import hmac
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Final, Protocol

import attrs

from remoting.codec.command import Body, RemotingCommand

ACCESS_KEY: Final = "AccessKey"
SIGNATURE: Final = "Signature"
SECURITY_TOKEN: Final = "SecurityToken"
#: The field the Java client signs on QUERY_MESSAGE while a 4.9.8 broker leaves it out of the content.
UNIQUE_KEY_QUERY: Final = "_UNIQUE_KEY_QUERY"


_CLIENT_SKIP: Final = frozenset((SIGNATURE,))
_BROKER_SKIP: Final = frozenset((SIGNATURE, UNIQUE_KEY_QUERY))

#: How many field sets (keys in arrival order) keep a precomputed content order per exclusion set; past it the table
#: starts again, so a client sending ever-new field sets costs a sort per request (as without the table), not memory.
_MAX_ORDERS: Final = 512

_Values = Callable[[Mapping[str, str]], Iterable[str]]


def _java_sorted(keys: Iterable[str]) -> list[str]:
    """Keys in Java's ``String.compareTo`` order: UTF-16 code units, which is code-point order for ASCII keys."""
    ordered = sorted(keys)
    if not all(map(str.isascii, ordered)):
        ordered.sort(key=lambda key: key.encode("utf-16-be"))
    return ordered


def _values_getter(keys: Iterable[str], exclude: frozenset[str]) -> _Values:
    """A function returning the signed values of a mapping with these keys, in signing order (one C call)."""
    order = [key for key in _java_sorted(keys) if key not in exclude]
    if len(order) > 1:
        return operator.itemgetter(*order)
    if order:
        (only,) = order
        return lambda fields: (fields[only],)
    return lambda fields: ()


#: Per exclusion set: the keys of a field set in arrival order -> its values getter. The send header's field set is
#: fixed and a dict keeps insertion order, so a steady client hits one entry: no sort per request.
_ORDERS: Final[dict[frozenset[str], dict[tuple[str, ...], _Values]]] = {_CLIENT_SKIP: {}, _BROKER_SKIP: {}}


def signing_content(ext_fields: Mapping[str, str], exclude: frozenset[str] = _CLIENT_SKIP) -> bytes:
    """The UTF-8 text the signature covers, without the body: the values sorted by key, ``exclude`` left out."""
    table = _ORDERS.get(exclude)
    if table is None:
        return "".join(_values_getter(ext_fields, exclude)(ext_fields)).encode("utf-8")
    keys = tuple(ext_fields)
    values = table.get(keys)
    if values is None:
        if len(table) >= _MAX_ORDERS:
            table.clear()
        values = table[keys] = _values_getter(keys, exclude)
    return "".join(values(ext_fields)).encode("utf-8")


class _Mac(Protocol):
    def copy(self) -> _Mac: ...
    def update(self, data: Body, /) -> None: ...
    def digest(self) -> bytes: ...


def _new_mac(key: bytes) -> _Mac:
    """OpenSSL's HMAC object (copy, update and digest all in C) or, on a Python without it or an OpenSSL refusing
    SHA-1 there, the stdlib's wrapper: the same bytes either way."""
    try:
        from _hashlib import hmac_new

        return hmac_new(key, digestmod="sha1")
    except (ImportError, ValueError):
        return hmac.new(key, digestmod=hashlib.sha1)


@functools.lru_cache(maxsize=1024)
def _keyed(secret_key: str) -> _Mac:
    """An HMAC-SHA1 with the key already scheduled, copied per message: the C object's ``copy`` is ~2.5x cheaper
    than copying ``hmac.HMAC`` (a Python wrapper) and ~2.5x cheaper than a one-shot ``hmac.digest``. A few hundred
    accounts at most, so the cache stays small."""
    return _new_mac(secret_key.encode("utf-8"))


def hmac_sha1(secret_key: str, data: bytes) -> bytes:
    """The raw HMAC-SHA1 of ``data`` keyed by ``secret_key`` (the 5.x gRPC signature, :mod:`proxy.auth_header`)."""
    mac = _keyed(secret_key).copy()
    mac.update(data)
    return mac.digest()


def calculate_signature(content: bytes, body: Body, secret_key: str) -> str:
    """``base64(HMAC-SHA1(secret_key, content + body))``, standard alphabet with padding."""
    mac = _keyed(secret_key).copy()
    mac.update(content)
    if body:
        mac.update(body)
    return binascii.b2a_base64(mac.digest(), newline=False).decode("ascii")


def request_signature(ext_fields: Mapping[str, str], body: Body, secret_key: str) -> str:
    """The signature of a request whose extFields (``AccessKey`` included) and body are these."""
    return calculate_signature(signing_content(ext_fields), body, secret_key)


def signature_matches(cmd: RemotingCommand, secret_key: str) -> bool:
    """Whether ``cmd``'s ``Signature`` is right for ``secret_key``, computed over the broker's content (without
    ``_UNIQUE_KEY_QUERY``) or, when that field is present, over the Java client's (with it)."""
    given = cmd.ext_fields.get(SIGNATURE)
    if given is None or not given.isascii():  # base64 is ASCII; compare_digest refuses other text
        return False
    fields = cmd.ext_fields
    expected = calculate_signature(signing_content(fields, _BROKER_SKIP), cmd.body, secret_key)
    if hmac.compare_digest(expected, given):
        return True
    if UNIQUE_KEY_QUERY not in fields:
        return False
    return hmac.compare_digest(request_signature(fields, cmd.body, secret_key), given)


@attrs.frozen(slots=True)
class SessionCredentials:
    """An account's keys as a client holds them (Java's ``SessionCredentials``); ``repr`` hides the secret."""

    access_key: str
    secret_key: str = attrs.field(repr=False)
    security_token: str | None = attrs.field(default=None, repr=False)


def signed_fields(ext_fields: Mapping[str, str], body: Body, credentials: SessionCredentials) -> dict[str, str]:
    """A new dict: ``ext_fields`` with ``AccessKey`` (and ``SecurityToken`` when set) added and ``Signature`` over
    them and ``body``, as Java's ``AclClientRPCHook`` (for a frame written straight from its fields)."""
    fields = {**ext_fields, ACCESS_KEY: credentials.access_key}
    fields.pop(SIGNATURE, None)
    if credentials.security_token is not None:
        fields[SECURITY_TOKEN] = credentials.security_token
    fields[SIGNATURE] = calculate_signature(signing_content(fields), body, credentials.secret_key)
    return fields


def sign(cmd: RemotingCommand, credentials: SessionCredentials) -> RemotingCommand:
    """``cmd`` with ``AccessKey`` (and ``SecurityToken`` when set) added and signed, as Java's ``AclClientRPCHook``.

    Returns a new command; ``cmd`` and its extFields dict are not modified.
    """
    fields = signed_fields(cmd.ext_fields, cmd.body, credentials)
    # Positional, in field order: cheaper than attrs.evolve on every signed request.
    return RemotingCommand(
        cmd.code, cmd.opaque, cmd.flag, cmd.language, cmd.version, cmd.remark, fields, cmd.body, cmd.serialize_type
    )
