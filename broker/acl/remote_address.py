"""White-address patterns of ``plain_acl.yml`` (``globalWhiteRemoteAddresses``, an account's ``whiteRemoteAddress``),
as RocketMQ's ``acl/src/main/java/org/apache/rocketmq/acl/plain/RemoteAddressStrategyFactory.java`` reads them.

:func:`address_matcher` turns one pattern into a predicate over a client's IP (the text before the last ``:`` of its
``ip:port``), picking the first rule that fits:

- blank: never matches; ``*``, ``*.*.*.*``, ``*:*:*:*:*:*:*:*``: always;
- ends with ``}``: a prefix and a ``{a,b,c}`` list (``192.168.1.{1,2}``), exact matches;
- contains ``,``: a list of full addresses;
- contains ``*`` or ``-``: a range in the first varying octet (IPv4: exactly four parts, so ``192.168.*`` is refused;
  index 1 to 3, ``*`` or ``a-b``; the octets after it are ignored, as in RocketMQ) or group (IPv6, written without
  ``::`` before it);
- otherwise one exact address.

IPv6 addresses compare in their expanded, upper-case form. A malformed pattern raises :class:`AddressPatternError`
with RocketMQ's wording, which fails the load of its file (the old rules stay).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

AddressMatcher = Callable[[str], bool]

_MATCH_ALL = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})


class AddressPatternError(ValueError):
    """A white-address pattern RocketMQ would refuse."""


def _never(_ip: str) -> bool:
    return False


def _always(_ip: str) -> bool:
    return True


def normalise(ip: str) -> str:
    """IPv4 as it is; IPv6 expanded to eight 4-digit upper-case groups (RocketMQ's ``AclUtils.expandIP``)."""
    if ":" not in ip:
        return ip
    try:
        return ipaddress.IPv6Address(ip.split("%", 1)[0]).exploded.upper()
    except ValueError:
        return ip.upper()


def _valid_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _exact_set(addresses: list[str]) -> AddressMatcher:
    members = set()
    for address in addresses:
        address = address.strip()
        if not _valid_ip(address):
            raise AddressPatternError(f"Netaddress examine Exception netaddress is {address}")
        members.add(normalise(address))
    return lambda ip: normalise(ip) in members


def _brace_list(pattern: str) -> AddressMatcher:
    sep = ":" if ":" in pattern else "."
    head, _, last = pattern.rpartition(sep)
    if sep == "." and len(pattern.split(".")) < 4:
        raise AddressPatternError(f"MultipleRemoteAddressStrategy has got a/some wrong format IP(s) {pattern}")
    if not last.startswith("{"):
        raise AddressPatternError(f"MultipleRemoteAddressStrategy netaddress examine scope Exception {pattern}")
    items = [item.strip() for item in last[1:-1].split(",") if item.strip()]
    return _exact_set([f"{head}{sep}{item}" for item in items])


def _bounds(value: str, pattern: str, base: int, top: int) -> tuple[int, int] | None:
    """``(start, end)`` for ``*`` or ``a-b``; None when ``value`` is a fixed part."""
    if value == "*":
        return 0, top
    if "-" not in value:
        return None
    if value.startswith("-"):
        raise AddressPatternError(f"RangeRemoteAddressStrategy netaddress examine scope Exception value {value}")
    try:
        start, end = (int(part, base) for part in value.split("-", 1))
    except ValueError:
        raise AddressPatternError(f"RangeRemoteAddressStrategy netaddress examine scope Exception {pattern}") from None
    if not 0 <= start <= end <= top:
        raise AddressPatternError(
            f"RangeRemoteAddressStrategy netaddress examine scope Exception start is {start} , end is {end}"
        )
    return start, end


def _range_matcher(v6: bool, head: list[str], index: int, start: int, end: int) -> AddressMatcher:
    """Matches an address whose parts before ``index`` are ``head`` and whose part at ``index`` is in range."""

    def match(ip: str) -> bool:
        if v6 != (":" in ip):
            return False
        parts = normalise(ip).split(":") if v6 else ip.split(".")
        if len(parts) != (8 if v6 else 4) or parts[:index] != head:
            return False
        try:
            value = int(parts[index], 16 if v6 else 10)
        except ValueError:
            return False
        return start <= value <= end

    return match


def _range_parts(pattern: str, v6: bool) -> list[str]:
    """The pattern's groups, or its four octets (``AclUtils.isScope``: IPv4 needs ``strArray.length == 4``, empty
    parts dropped as ``StringUtils.split`` does)."""
    if v6:
        return [part.strip() for part in pattern.split(":")]
    parts = [part.strip() for part in pattern.split(".") if part]
    if len(parts) != 4:
        raise AddressPatternError(f"Netaddress examine scope Exception netaddress is {pattern}")
    return parts


def _range(pattern: str) -> AddressMatcher:
    v6 = ":" in pattern
    parts = _range_parts(pattern, v6)
    for index in range(1, len(parts) if v6 else 4):
        bounds = _bounds(parts[index], pattern, 16 if v6 else 10, 0xFFFF if v6 else 255)
        if bounds is None:
            continue
        head = parts[:index]
        if v6:
            if not all(p and len(p) <= 4 and all(c in "0123456789abcdefABCDEF" for c in p) for p in head):
                raise AddressPatternError(f"Netaddress examine Exception netaddress is {pattern}")
            head = [p.upper().rjust(4, "0") for p in head]
        elif not all(p.isdigit() and int(p) <= 255 for p in head):
            raise AddressPatternError(f"Netaddress examine Exception netaddress is {pattern}")
        return _range_matcher(v6, head, index, *bounds)
    raise AddressPatternError(f"RangeRemoteAddressStrategy netaddress examine scope Exception {pattern}")


def address_matcher(pattern: object) -> AddressMatcher:
    """The predicate for one pattern (see the module docstring). Raises :class:`AddressPatternError`."""
    text = "" if pattern is None else str(pattern).strip()
    if not text:
        return _never
    if text in _MATCH_ALL:
        return _always
    if text.endswith("}"):
        return _brace_list(text)
    if "," in text:
        return _exact_set(text.split(","))
    if "*" in text or "-" in text:
        return _range(text)
    return _exact_set([text])


def remote_ip(address: tuple[str, int] | str) -> str:
    """The client's IP as RocketMQ compares it: the host of ``(host, port)``, or ``ip:port`` cut at the last ``:``."""
    if isinstance(address, tuple):
        return str(address[0])
    return address.rpartition(":")[0] if ":" in address else address
