"""White-address patterns of ``plain_acl.yml`` (``globalWhiteRemoteAddresses``, an account's ``whiteRemoteAddress``),
as RocketMQ's ``acl/src/main/java/org/apache/rocketmq/acl/plain/RemoteAddressStrategyFactory.java`` reads them.

:func:`address_matcher` turns one pattern into a predicate over a client's IP (the text before the last ``:`` of its
``ip:port``), picking the first rule that fits:

- blank: never matches; ``*``, ``*.*.*.*``, ``*:*:*:*:*:*:*:*`` (exactly: `` *`` is no such pattern and fails to
  load): always;
- ends with ``}``: a prefix and a ``{a,b,c}`` list (``192.168.1.{1,2}``), exact matches;
- contains ``,``: a list of full addresses (empty items dropped, as ``StringUtils.split``: ``a,b,`` is ``a,b``);
- contains ``*`` or ``-``: a range, ``*`` or ``a-b`` (``a-b-c`` reads as ``a-b``), the first one after the first
  part whose end is above 0. IPv4: in octet 2, 3 or 4 of exactly four parts (so ``192.168.*`` is refused); the octets
  after it are ignored, as in RocketMQ. IPv6: in the last group, or the one before a final ``*`` (later groups
  ignored); ``::`` before it counts as if the range were the 8th group, or the 7th before a ``*``
  (``1050::5:600:300c:*``, ``2::ac5:78:1-200:*``), as ``AclUtils.v6ipProcess`` expands it;
- otherwise one exact address.

A pattern is read untrimmed, as RocketMQ reads it: a blank around an address, or around an item of a list, makes it
invalid (``InetAddressValidator``); only a range's parts are trimmed. IPv6 addresses compare in their expanded,
upper-case form. A pattern RocketMQ's strategy constructor refuses raises
:class:`AddressPatternError` with RocketMQ's wording, which fails the load of its file (the old rules stay). Numbers
are read as Java's ``Integer.parseInt`` reads them: any Unicode decimal digit, and for IPv6 also the fullwidth
``a``-``f``.

A range the constructor builds although it can match nothing loads and is logged; its matcher answers what
RocketMQ's ``RangeRemoteAddressStrategy.match`` answers, and where that throws it raises :class:`AddressMatchError`,
which refuses the request being checked (the Java exception escapes ``PlainPermissionManager.validate``):

- no range after the first part (``::1-200``, ``1.2.3.4*``, ``1.2.3.0-0``; Java's ``head`` stays null): raises for
  every IPv4 or IPv6 address (``startsWith(null)``: NullPointerException);
- parts before the range that no address has (``*.*.1.10``, ``1::zz:*``): matches nothing; eight groups before it
  (``1:2:3:4:5:6:7:8:*``): raises for that one address (a ``substring`` past its end), matches nothing else;
- an empty head (``:1-2:*``): raises for every IPv4 address (``Integer.valueOf`` of its first two octets). RocketMQ
  white-lists every IPv6 address there; ours matches none (not RocketMQ's: a pattern that can only be a typo opens
  nothing).
"""

from __future__ import annotations

import ipaddress
import logging
import re
import unicodedata
from collections.abc import Callable

log = logging.getLogger(__name__)

AddressMatcher = Callable[[str], bool]

_MATCH_ALL = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})
#: What Java's ``Integer.parseInt(text, base)`` accepts: a sign and the digits ``Character.digit`` reads (any Unicode
#: decimal digit, which Python's ``\d`` and ``int`` read too; for base 16 also ASCII and fullwidth ``a``-``f``), no
#: blank, no ``_``, no ``0x``.
_JAVA_INT = {10: re.compile(r"[+-]?\d+"), 16: re.compile(r"[+-]?[\da-fA-F\uff21-\uff26\uff41-\uff46]+")}
_FULLWIDTH_HEX = str.maketrans(
    "\uff21\uff22\uff23\uff24\uff25\uff26\uff41\uff42\uff43\uff44\uff45\uff46", "ABCDEFabcdef"
)
#: An octet of an IPv4 address and a group of an expanded IPv6 address, as a client's address is written.
_OCTET = re.compile(r"0|[1-9][0-9]{0,2}")
_HEX_GROUP = re.compile(r"[0-9A-F]{4}")


class AddressPatternError(ValueError):
    """A white-address pattern RocketMQ would refuse."""


_MATCH_FRAME = (
    "org.apache.rocketmq.acl.plain.RemoteAddressStrategyFactory$RangeRemoteAddressStrategy.match"
    "(RemoteAddressStrategyFactory.java:{})"
)


class AddressMatchError(Exception):
    """RocketMQ's ``match`` throws for this address: the check asking must refuse the request, not go on.
    ``java_text`` is the Java exception's ``toString``; ``frame`` names the 4.9.8 line of ``match`` that throws (ours:
    a Java broker's remark names the exception's first frame, inside the JDK, whose line depends on the JDK)."""

    def __init__(self, reason: str, java_text: str, line: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.java_text = java_text
        self.frame = _MATCH_FRAME.format(line)


def _java_int(text: str, base: int) -> int | None:
    """``Integer.parseInt(text, base)`` (see ``_JAVA_INT``); None where it throws (a number out of ``int`` range
    is left to the caller's range check)."""
    if not _JAVA_INT[base].fullmatch(text):
        return None
    sign, digits = (text[0], text[1:]) if text[0] in "+-" else ("", text)
    # RangeRemoteAddressStrategy's Integer.parseInt (acl/src/main/java/org/apache/rocketmq/acl/plain/
    # RemoteAddressStrategyFactory.java) takes any number of leading zeros, of any Unicode decimal zero:
    # Character.digit reads each as 0.
    zeros = 0
    while zeros < len(digits) - 1 and unicodedata.decimal(digits[zeros], -1) == 0:
        zeros += 1
    digits = digits[zeros:]
    if len(digits) > 12:  # past int's range whatever the digits, and short of int()'s 4,300-digit limit
        return -(1 << 40) if sign == "-" else 1 << 40
    return int(sign + digits.translate(_FULLWIDTH_HEX), base)


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
    for address in addresses:  # untrimmed: InetAddressValidator refuses a blank around an address
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
    items = [item for item in last[1:-1].split(",") if item]  # AclUtils.getAddresses: StringUtils.split, no trim
    return _exact_set([f"{head}{sep}{item}" for item in items])


def _bounds(value: str, pattern: str, base: int, top: int) -> tuple[int, int] | None:
    """``(start, end)`` for ``*`` or ``a-b``, read as ``RangeRemoteAddressStrategy.analysis`` reads them (the parts
    ``StringUtils.split`` gives, the first two parsed by ``Integer.parseInt``); None when ``value`` is a fixed part."""
    if value == "*":
        return 0, top
    if "-" not in value:
        return None
    if value.startswith("-"):
        raise AddressPatternError(f"RangeRemoteAddressStrategy netaddress examine scope Exception value {value}")
    parts = [part for part in value.split("-") if part][:2]
    numbers = [number for number in (_java_int(part, base) for part in parts) if number is not None]
    if len(numbers) != 2:
        raise AddressPatternError(f"RangeRemoteAddressStrategy netaddress examine scope Exception {pattern}")
    start, end = numbers
    if not 0 <= start <= end <= top:
        raise AddressPatternError(
            f"RangeRemoteAddressStrategy netaddress examine scope Exception start is {start} , end is {end}"
        )
    return start, end


def _octet_value(text: str) -> bool:
    """``AclUtils.isScope(String)``: a decimal number from 0 to 255 (False for a non-number, where Java throws)."""
    number = _java_int(text, 10)
    return number is not None and 0 <= number <= 255


def _group_value(text: str) -> bool:
    """``AclUtils.isIPv6Scope(String[], ..)`` of one group: a hexadecimal number from 0 to ``ffff``."""
    number = _java_int(text, 16)
    return number is not None and 0 <= number <= 0xFFFF


def _range_matcher(v6: bool, head: list[str], index: int, start: int, end: int) -> AddressMatcher:
    """Matches an address whose parts before ``index`` are ``head`` and whose part at ``index`` is in range."""

    def match(ip: str) -> bool:
        if v6 != (":" in ip):
            return False
        parts = normalise(ip).split(":") if v6 else ip.split(".")
        if len(parts) != (8 if v6 else 4) or parts[:index] != head:
            return False
        if index == len(parts):  # a head of all eight groups: Java's substring of the next group runs past the end
            raise AddressMatchError(
                f"no group of {ip} is after the eight of the white address head",
                "java.lang.StringIndexOutOfBoundsException: String index out of range: 44",
                245,
            )
        try:
            value = int(parts[index], 16 if v6 else 10)
        except ValueError:
            return False
        return start <= value <= end

    return match


def _first_range(parts: list[str], pattern: str, base: int, top: int, stop: int) -> tuple[int, tuple[int, int]] | None:
    """The range and its index as ``RangeRemoteAddressStrategy``'s loop over ``analysis`` / ``ipv6Analysis`` finds it:
    the first part from the second one up to ``stop`` (excluded) that is ``*`` or ``a-b`` with an end above 0; None
    when there is none. Raises for a bad range before it, or when ``stop`` is past the parts (Java's index out of
    bounds)."""
    for at in range(1, stop):
        if at >= len(parts):
            raise AddressPatternError(f"Netaddress examine scope Exception netaddress is {pattern}")
        bounds = _bounds(parts[at], pattern, base, top)
        if bounds is not None and bounds[1] > 0:
            return at, bounds
    return None


def _v4_range(pattern: str) -> AddressMatcher:
    """RocketMQ's IPv4 ``RangeRemoteAddressStrategy``: the range in octet 2, 3 or 4 (:func:`_first_range`); then the
    pattern must have exactly four parts, all before the range but the last decimal up to 255 (``AclUtils.verify(..,
    index - 1)`` -> ``isScope``; empty parts dropped as ``StringUtils.split`` does). Raises where that constructor
    throws; a pattern it builds that can match nothing answers as RocketMQ's match (see the module docstring)."""
    parts = [part.strip() for part in pattern.split(".") if part]
    found = _first_range(parts, pattern, 10, 255, 4)
    if found is None:
        return _headless(pattern, "no range in its second to fourth octet")
    index, bounds = found
    verified = parts[: index - 1]
    if len(parts) != 4 or not all(_octet_value(p) for p in verified):
        raise AddressPatternError(f"Netaddress examine scope Exception netaddress is {pattern}")
    head = parts[:index]
    if not all(_OCTET.fullmatch(p) and int(p) <= 255 for p in head):
        return _unmatchable(pattern, f"the octets before its range, {'.'.join(head)}, are not those of an address")
    return _range_matcher(False, head, index, *bounds)


def _expand_ip(text: str, groups: int) -> list[str]:
    """``AclUtils.expandIP``: ``::`` widened as if ``text`` had ``groups`` groups, each padded to four upper-case
    digits (a group of more digits is kept as written)."""
    if not text:
        return []  # StringUtils.splitPreserveAllTokens("") is empty
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


def _verify_v6(pattern: str, count: int) -> None:
    """``AclUtils.verify(pattern, count)``: the first ``count`` groups of the pattern expanded to eight groups are
    hexadecimal numbers up to ``ffff``."""
    groups = _expand_ip(pattern, 8)
    head = groups[:count]
    if len(head) < count or not all(_group_value(g) for g in head):
        raise AddressPatternError(f"Netaddress examine scope Exception netaddress is {pattern}")


def _v6_head(pattern: str) -> list[str]:
    """``AclUtils.v6ipProcess``: the pattern before its last group (its last two when it has both ``*`` and ``-``),
    expanded as if it had 7 groups (6); raises where Java's ``substring`` fails (no group before them)."""
    cut = pattern.rfind(":")
    if "*" not in pattern or "-" not in pattern:
        return _expand_ip(pattern[:cut], 7)
    cut = pattern.rfind(":", 0, cut)
    if cut < 0:
        raise AddressPatternError(f"Netaddress examine scope Exception netaddress is {pattern}")
    return _expand_ip(pattern[:cut], 6)


def _unmatchable(pattern: str, why: str) -> AddressMatcher:
    log.warning("white address %s loads but matches no address: %s", pattern, why)
    return _never


def _headless(pattern: str, why: str) -> AddressMatcher:
    """A range without a head (see the module docstring): raises :class:`AddressMatchError` for every address."""
    log.warning("white address %s loads but refuses every request checked against it: %s", pattern, why)

    def match(ip: str) -> bool:
        if not _valid_ip(ip):
            return False
        raise AddressMatchError(
            f"white address {pattern} has no range RocketMQ can match",
            "java.lang.NullPointerException",
            244 if ":" in ip else 230,
        )

    return match


def _empty_head(pattern: str) -> AddressMatcher:
    """``:1-2:*`` (see the module docstring): raises :class:`AddressMatchError` for an IPv4 address, matches none."""
    log.warning(
        "white address %s loads but matches no IPv6 address and refuses IPv4 ones: no group before its range", pattern
    )

    def match(ip: str) -> bool:
        if ":" in ip or not _valid_ip(ip):
            return False
        octets = ip[: ip.rfind(".", 0, ip.rfind("."))]
        raise AddressMatchError(
            f"white address {pattern} has an empty head RocketMQ matches IPv4 addresses with",
            f'java.lang.NumberFormatException: For input string: "{octets}"',
            239,
        )

    return match


def _v6_range(pattern: str) -> AddressMatcher:
    """RocketMQ's IPv6 ``RangeRemoteAddressStrategy``: ``IPv6AddressCheck``, the range (:func:`_first_range`),
    ``AclUtils.verify`` of the groups before it, then the head of :func:`_v6_head`; an address matches when its
    groups start with the head and its group after them is in the range. Raises :class:`AddressPatternError` where
    that constructor throws; one it builds that can match nothing answers as RocketMQ's match (module docstring)."""
    _check_v6_range(pattern)
    groups = [group.strip() for group in pattern.split(":") if group]  # StringUtils.split
    found = _first_range(groups, pattern, 16, 0xFFFF, len(groups))
    if found is None:
        return _headless(pattern, "no range after its first group")
    at, bounds = found
    _verify_v6(pattern, at - 1)
    head = _v6_head(pattern)
    if not head:
        return _empty_head(pattern)
    if len(head) > 8 or not all(_HEX_GROUP.fullmatch(group) for group in head):
        return _unmatchable(pattern, f"the groups before its range, {':'.join(head)}, are not those of an address")
    return _range_matcher(True, head, len(head), *bounds)


def _range(pattern: str) -> AddressMatcher:
    return _v6_range(pattern) if ":" in pattern else _v4_range(pattern)


def address_matcher(pattern: object) -> AddressMatcher:
    """The predicate for one pattern (see the module docstring). Raises :class:`AddressPatternError`."""
    text = "" if pattern is None else str(pattern)
    if not text.strip():  # StringUtils.isBlank; anything else is read untrimmed
        return _never
    if text in _MATCH_ALL:
        return _always
    if text.endswith("}"):
        return _brace_list(text)
    if "," in text:  # StringUtils.split: empty items dropped
        return _exact_set([item for item in text.split(",") if item])
    if "*" in text or "-" in text:
        return _range(text)
    return _exact_set([text])


def remote_ip(address: tuple[str, int] | str) -> str:
    """The client's IP as RocketMQ compares it: the host of ``(host, port)``, or ``ip:port`` cut at the last ``:``."""
    if isinstance(address, tuple):
        return str(address[0])
    return address.rpartition(":")[0] if ":" in address else address
