"""Message ids: the offset msgId (docs/protocol.md#58-offset-message-id), the client ``UNIQ_KEY``
(docs/protocol.md#59-uniq_key), and the packed socket addresses both are built from
(docs/protocol.md#53-born-and-store-hosts).

A packed socket address is the record's host layout: 4-byte IPv4 or 16-byte IPv6 address, then a big-endian int32
port (8 or 20 bytes). IPv4-mapped IPv6 peers (``::ffff:1.2.3.4``) are packed as IPv4 because ali-ons cannot read
IPv6 hosts. Decoding errors raise :class:`~remoting.codec.errors.MessageDecodeError`.
"""

from __future__ import annotations

import datetime
import ipaddress
import itertools
import os
import socket
import struct
import time
from typing import Final

import attrs

from remoting.codec.errors import MessageDecodeError

_PORT: Final = struct.Struct(">i")
_PHY: Final = struct.Struct(">q")


def pack_socket_address(host: str, port: int) -> bytes:
    """8 bytes for IPv4 (and IPv4-mapped IPv6), 20 for IPv6. Raises ``ValueError`` for a non-IP host."""
    addr = ipaddress.ip_address(host.split("%", 1)[0])
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.packed + _PORT.pack(port)


def unpack_socket_address(packed: bytes | memoryview) -> tuple[str, int]:
    """Inverse of :func:`pack_socket_address`; raises :class:`MessageDecodeError` for a length other than 8 or 20."""
    if len(packed) not in (8, 20):
        raise MessageDecodeError(f"a socket address is 8 or 20 bytes, not {len(packed)}")
    ip = bytes(packed[:-4])
    host = socket.inet_ntop(socket.AF_INET if len(ip) == 4 else socket.AF_INET6, ip)
    return host, _PORT.unpack_from(packed, len(packed) - 4)[0]


def offset_msg_id(store_host: bytes, phy_offset: int) -> str:
    """The offset msgId from a packed store address and a CommitLog offset: 32 (IPv4) or 56 (IPv6) hex chars."""
    return (store_host + _PHY.pack(phy_offset)).hex().upper()


@attrs.frozen(slots=True)
class OffsetMsgId:
    host: str
    port: int
    phy_offset: int


def decode_offset_msg_id(msg_id: str) -> OffsetMsgId:
    """Parse an offset msgId; 32 chars = IPv4, 56 = IPv6 (decided by length, as Java does)."""
    if len(msg_id) not in (32, 56):
        raise MessageDecodeError(f"offset msgId must be 32 or 56 hex chars, got {len(msg_id)}")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise MessageDecodeError(f"offset msgId {msg_id!r} is not hex") from exc
    host, port = unpack_socket_address(raw[:-8])
    return OffsetMsgId(host, port, _PHY.unpack_from(raw, len(raw) - 8)[0])


def _month_start_ms(now_ms: int) -> int:
    now = datetime.datetime.fromtimestamp(now_ms / 1000).astimezone()
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return int(start.timestamp() * 1000)


#: Two hex digits per byte value: the counter's four digits are two lookups (cheaper than a format spec).
_HEX2: Final = tuple(f"{b:02X}" for b in range(256))


class UniqKeyGenerator:
    """Makes Java-compatible ``UNIQ_KEY`` values (``MessageClientIDSetter``'s layout): a fixed per-process prefix (ip,
    pid, class-loader hash) then milliseconds since the start of the local month (int32) and a 16-bit wrapping
    counter. The hex of prefix and time is kept while the millisecond lasts, so an id costs a counter step and one
    four-digit format. Not thread-safe."""

    __slots__ = ("_counter", "_last_ms", "_month_start", "_next_month_start", "_prefix", "_stem")

    def __init__(self, ip: str = "127.0.0.1", pid: int | None = None, loader_hash: int | None = None) -> None:
        packed = ipaddress.ip_address(ip).packed
        pid = os.getpid() if pid is None else pid
        loader_hash = id(self) if loader_hash is None else loader_hash
        self._prefix = (packed + struct.pack(">HI", pid & 0xFFFF, loader_hash & 0xFFFFFFFF)).hex().upper()
        self._counter = itertools.count()
        self._month_start = 0
        self._next_month_start = 0
        self._last_ms = -1
        self._stem = ""

    def next_id(self, now_ms: int | None = None) -> str:
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        if now != self._last_ms:
            self._new_millisecond(now)
        counter = next(self._counter)
        return self._stem + _HEX2[counter >> 8 & 0xFF] + _HEX2[counter & 0xFF]

    def next_ids(self, count: int) -> list[str]:
        """``count`` ids from one clock read: what ``count`` calls of :meth:`next_id` give within one millisecond."""
        now = time.time_ns() // 1_000_000
        if now != self._last_ms:
            self._new_millisecond(now)
        stem, hex2 = self._stem, _HEX2
        return [stem + hex2[c >> 8 & 0xFF] + hex2[c & 0xFF] for c in itertools.islice(self._counter, count)]

    def _new_millisecond(self, now: int) -> None:
        """Keep the hex of the prefix and of ``now`` for the ids of that millisecond."""
        self._stem = self._prefix + f"{self._elapsed(now):08X}"
        self._last_ms = now

    def _elapsed(self, now: int) -> int:
        """``now`` as milliseconds since the start of its local month, wrapped to 32 bits."""
        if not self._month_start <= now < self._next_month_start:
            self._month_start = _month_start_ms(now)
            # 32 days past the start always lands in the next month.
            self._next_month_start = _month_start_ms(self._month_start + 32 * 86_400_000)
        return (now - self._month_start) & 0xFFFFFFFF


@attrs.frozen(slots=True)
class UniqKey:
    ip: str
    pid: int
    loader_hash: int
    month_ms: int
    counter: int


def parse_uniq_key(key: str) -> UniqKey:
    """Split a ``UNIQ_KEY`` (32 hex chars for IPv4 clients, 56 for IPv6) into its fields."""
    if len(key) not in (32, 56):
        raise MessageDecodeError(f"UNIQ_KEY must be 32 or 56 hex chars, got {len(key)}")
    try:
        raw = bytes.fromhex(key)
    except ValueError as exc:
        raise MessageDecodeError(f"UNIQ_KEY {key!r} is not hex") from exc
    ip_len = len(raw) - 12
    ip = str(ipaddress.IPv4Address(raw[:4]) if ip_len == 4 else ipaddress.IPv6Address(raw[:16]))
    pid, loader, month_ms, counter = struct.unpack_from(">HIiH", raw, ip_len)
    return UniqKey(ip, pid, loader, month_ms, counter)


def nearly_time_from_id(msg_id: str, now_ms: int | None = None) -> int | None:
    """Java's ``MessageClientIDSetter.getNearlyTimeFromID``: the epoch milliseconds a producer's ``UNIQ_KEY`` was made
    at, from its time field (milliseconds since the start of a local month): this month's, or the month before when
    that is not before now. ``None`` for an id that is not hex or too short to hold the field."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        return None
    at = (16 if len(raw) == 28 else 4) + 6  # after the IP, pid and class-loader hash
    if len(raw) < at + 4:
        return None
    since = int.from_bytes(raw[at : at + 4], "big")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    start = _month_start_ms(now)
    if start + since >= now:
        start = _month_start_ms(start - 1)
    return start + since
