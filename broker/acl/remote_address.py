"""White-address patterns of ``plain_acl.yml`` (``globalWhiteRemoteAddresses``, an account's ``whiteRemoteAddress``),
as RocketMQ's ``acl/src/main/java/org/apache/rocketmq/acl/plain/RemoteAddressStrategyFactory.java`` reads them.

:func:`address_matcher` turns one pattern into a predicate over a client's IP (the text before the last ``:`` of its
``ip:port``), picking the first rule that fits:

- blank: never matches; ``*``, ``*.*.*.*``, ``*:*:*:*:*:*:*:*``: always;
- ends with ``}``: a prefix and a ``{a,b,c}`` list (``192.168.1.{1,2}``), exact matches;
- contains ``,``: a list of full addresses;
- contains ``*`` or ``-``: a range, ``*`` or ``a-b``. IPv4: in the first varying octet, index 1 to 3, of exactly four
  parts (so ``192.168.*`` is refused); the octets after it are ignored, as in RocketMQ. IPv6: in the last group, or
  the one before a final ``*`` (later groups ignored); ``::`` before it counts as if the range were the 8th group, or
  the 7th before a ``*`` (``1050::5:600:300c:*``, ``2::ac5:78:1-200:*``), as ``AclUtils.v6ipProcess`` expands it;
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


def _v4_range(pattern: str) -> AddressMatcher:
    """A range in octet 2, 3 or 4 of exactly four octets (``AclUtils.isScope``: ``strArray.length == 4``, empty parts
    dropped as ``StringUtils.split`` does); the octets after it are ignored."""
    parts = [part.strip() for part in pattern.split(".") if part]
    if len(parts) != 4:
        raise AddressPatternError(f"Netaddress examine scope Exception netaddress is {pattern}")
    for index in range(1, 4):
        bounds = _bounds(parts[index], pattern, 10, 255)
        if bounds is None:
            continue
        head = parts[:index]
        if not all(p.isdigit() and int(p) <= 255 for p in head):
            raise AddressPatternError(f"Netaddress examine Exception netaddress is {pattern}")
        return _range_matcher(False, head, index, *bounds)
    raise AddressPatternError(f"RangeRemoteAddressStrategy netaddress examine scope Exception {pattern}")


def _expand_ip(text: str, groups: int) -> list[str]:
    """``AclUtils.expandIP``: ``::`` widened as if ``text`` had ``groups`` groups, each padded to four upper-case
    digits (a group of more digits is kept as written)."""
    text = text.upper()
    missing = groups - text.count(":")
    if missing > 0:
        text = text.replace("::", ":" * (missing + 1))
    return [group.rjust(4, "0") for group in text.split(":")]


def _check_v6_range(pattern: str) -> None:
    """``AclUtils.IPv6AddressCheck``: a ``*`` only as the last character; a ``-`` only in the last group, or in the
    one before a final ``*`` (``2::ac5:78:1-200:*``)."""
    star, minus = pattern.find("*"), pattern.find("-")
    if star > -1 and star != len(pattern) - 1:
        raise AddressPatternError(f"Netaddress examine scope Exception netaddress is {pattern}")
    last = pattern.rfind(":")
    if minus > -1 and minus <= (last if star == -1 else pattern.rfind(":", 0, last)):
        raise AddressPatternError(f"Netaddress examine scope Exception netaddress is {pattern}")


def _v6_range(pattern: str) -> AddressMatcher:
    """RocketMQ's IPv6 ``RangeRemoteAddressStrategy``: the range is the last group, or the one before a final ``*``;
    the groups before it are expanded as ``AclUtils.v6ipProcess`` does (a ``::`` among them widened as if the range
    were the 8th group, or the 7th before a ``*``), and the address's group after them must be in the range."""
    _check_v6_range(pattern)
    both = "*" in pattern and "-" in pattern
    groups = [group.strip() for group in pattern.split(":") if group]  # StringUtils.split
    at = len(groups) - (2 if both else 1)
    bounds = _bounds(groups[at], pattern, 16, 0xFFFF) if at >= 1 else None
    if bounds is None:
        raise AddressPatternError(f"RangeRemoteAddressStrategy netaddress examine scope Exception {pattern}")
    cut = pattern.rfind(":")
    if both:
        cut = pattern.rfind(":", 0, cut)
    head = _expand_ip(pattern[:cut], 6 if both else 7)
    if len(head) >= 8 or not all(len(p) == 4 and all(c in "0123456789ABCDEF" for c in p) for p in head):
        raise AddressPatternError(f"Netaddress examine Exception netaddress is {pattern}")
    return _range_matcher(True, head, len(head), *bounds)


def _range(pattern: str) -> AddressMatcher:
    return _v6_range(pattern) if ":" in pattern else _v4_range(pattern)


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
