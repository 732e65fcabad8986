"""``plain_acl.yml``: RocketMQ 4.9.8's ACL file, read with PyYAML and written back atomically
(``acl/src/main/java/org/apache/rocketmq/acl/common/AclConstants.java``, ``PlainPermissionManager.java``).

One file holds ``globalWhiteRemoteAddresses`` (a list), ``accounts`` (a list of maps with ``accessKey``,
``secretKey``, ``whiteRemoteAddress``, ``admin``, ``defaultTopicPerm``, ``defaultGroupPerm``, ``topicPerms``,
``groupPerms``) and ``dataVersion`` (``[{counter, timestamp}]``). :func:`parse_acl_file` (:func:`read_acl_file` from a
path) turns its text into an :class:`AclFile` of compiled :class:`Account` values, or raises :class:`AclConfigError`
with RocketMQ's message (key shorter than 7 characters, a ``res=PERM`` entry that does not split in two, a bad white
address) or for text that is not UTF-8, so the caller can keep the rules it had. :meth:`AclFile.dump` gives the YAML
text back with the accounts, white list and data version replaced and every other key kept. PyYAML is imported by
those two, at the first file read or written: the admin processor, which a broker without ACL loads too, uses this
module's account checks only.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import attrs

from broker.acl.permission import parse_perm
from broker.acl.remote_address import AddressMatcher, AddressPatternError, address_matcher
from remoting.codec.bodies._json import java_cast_to_boolean

RETRY_PREFIX: Final = "%RETRY%"
#: RocketMQ accepts keys strictly longer than this (``AclConstants.ACCESS_KEY_MIN_LENGTH``).
KEY_MIN_LENGTH: Final = 6


class AclConfigError(ValueError):
    """A file or an account RocketMQ would refuse; the message is RocketMQ's."""


def _text(value: object) -> str | None:
    """YAML scalars as the Java loader sees them: numbers become their decimal text."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _text_list(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list):
        raise AclConfigError(f"expected a list, got {type(value).__name__}")
    return tuple(t for t in (_text(v) for v in value) if t is not None)


_NULL_TEXTS: Final = frozenset({"", "null", "NULL"})


def _java_int_value(value: int | float) -> int:
    """Java's ``Number.intValue()`` of a YAML number: a long's low 32 bits (signed), a double truncated and
    saturated, NaN 0."""
    if isinstance(value, float):
        if value != value:  # NaN
            return 0
        if value >= 2**31:
            return 2**31 - 1
        if value <= -(2**31):
            return -(2**31)
        return int(value)
    return ((value + 2**31) % 2**32) - 2**31


def _admin_flag(value: object) -> bool:
    """``admin`` as 4.9.8 reads it: the account map becomes a ``PlainAccessConfig`` through fastjson
    (``accounts.toJavaList`` in ``acl/src/main/java/org/apache/rocketmq/acl/plain/PlainPermissionManager.java``), whose
    ``TypeUtils.castToBoolean`` takes a number as ``intValue() == 1`` and the texts ``true``/``false`` (any case),
    ``1``/``0``, ``Y``/``F`` (any case), ``T``/``N``; an empty or ``null`` text is null (the flag stays false). Any
    other value throws, so the file does not load: raises :class:`AclConfigError`."""
    if value is None or isinstance(value, bool):
        return value is True
    if isinstance(value, (int, float)):
        return _java_int_value(value) == 1
    if isinstance(value, str):
        cast = java_cast_to_boolean(value)
        if cast is not None or value in _NULL_TEXTS:
            return cast is True
    raise AclConfigError(f"can not cast to boolean, value : {value}")


@attrs.frozen
class AccountConfig:
    """One ``accounts`` entry as written in the file (texts, not yet compiled)."""

    access_key: str | None
    secret_key: str | None = attrs.field(default=None, repr=False)
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: tuple[str, ...] = ()
    group_perms: tuple[str, ...] = ()
    #: The entry's map as read (None for a new account): :meth:`to_yaml` writes it back with the fields above put in,
    #: so keys RocketMQ does not read stay.
    raw: Mapping[str, Any] | None = attrs.field(default=None, eq=False, repr=False)

    @classmethod
    def from_yaml(cls, raw: object) -> AccountConfig:
        if not isinstance(raw, Mapping):
            raise AclConfigError(f"an account must be a map, got {type(raw).__name__}")
        return cls(
            access_key=_text(raw.get("accessKey")),
            secret_key=_text(raw.get("secretKey")),
            white_remote_address=_text(raw.get("whiteRemoteAddress")),
            admin=_admin_flag(raw.get("admin")),
            default_topic_perm=_text(raw.get("defaultTopicPerm")),
            default_group_perm=_text(raw.get("defaultGroupPerm")),
            topic_perms=_text_list(raw.get("topicPerms")),
            group_perms=_text_list(raw.get("groupPerms")),
            raw=dict(raw),
        )

    def to_yaml(self) -> dict[str, Any]:
        """The entry as 4.9.8's ``createAclAccessConfigMap`` (``acl/src/main/java/org/apache/rocketmq/acl/plain/
        PlainPermissionManager.java``) builds it: ``accessKey``, ``secretKey``, then ``whiteRemoteAddress`` only when
        set, ``admin``, and the perms only when set (never a ``null`` line), put into the entry's map as read, so its
        other keys stay in place (``createAclAccessConfigMap`` edits the existing map; the edits dump every other
        account's map as read)."""
        out: dict[str, Any] = dict(self.raw) if self.raw is not None else {}
        out["accessKey"] = self.access_key
        out["secretKey"] = self.secret_key
        if self.white_remote_address is not None:
            out["whiteRemoteAddress"] = self.white_remote_address
        out["admin"] = self.admin
        if self.default_topic_perm is not None:
            out["defaultTopicPerm"] = self.default_topic_perm
        if self.default_group_perm is not None:
            out["defaultGroupPerm"] = self.default_group_perm
        if self.topic_perms:
            out["topicPerms"] = list(self.topic_perms)
        if self.group_perms:
            out["groupPerms"] = list(self.group_perms)
        return out


@attrs.frozen
class Account:
    """An account ready for checks: permissions as bits, group entries keyed ``%RETRY%<group>``, ``perms`` None when
    the account names no resource (an admin without entries may then do anything)."""

    access_key: str
    secret_key: str = attrs.field(repr=False)
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    perms: Mapping[str, int] | None
    white: AddressMatcher = attrs.field(repr=False)


def split_resource_entry(entry: str) -> list[str]:
    """``res=PERM`` split as ``StringUtils.split(entry, "=")`` (``acl/src/main/java/org/apache/rocketmq/acl/common/
    Permission.java``, ``parseResourcePerms`` and ``checkResourcePerms``): empty parts dropped, so ``topicA==PUB`` is
    ``["topicA", "PUB"]`` and ``topicA=`` is ``["topicA"]``."""
    return [part for part in entry.split("=") if part]


def _resource_perms(entries: Iterable[str], is_topic: bool, into: dict[str, int]) -> None:
    kind = "topic" if is_topic else "group"
    for entry in entries:
        parts = split_resource_entry(entry)
        if len(parts) != 2:
            raise AclConfigError(f"Parse resource permission failed for {kind}:{entry}")
        name = parts[0].strip()
        into[name if is_topic else RETRY_PREFIX + name] = parse_perm(parts[1])


def check_keys(access_key: str | None, secret_key: str | None) -> None:
    """RocketMQ's key rule: both present and longer than 6 characters. Raises :class:`AclConfigError`."""
    if access_key is None or secret_key is None or len(access_key) <= KEY_MIN_LENGTH or len(secret_key) <= 6:
        raise AclConfigError(
            f"The accessKey={access_key} and secretKey={secret_key} cannot be null and length should longer than 6"
        )


def compile_account(config: AccountConfig) -> Account:
    """The checkable form of an entry. Raises :class:`AclConfigError` for a bad key, entry or white address."""
    check_keys(config.access_key, config.secret_key)
    assert config.access_key is not None and config.secret_key is not None
    perms: dict[str, int] = {}
    _resource_perms(config.group_perms, False, perms)
    _resource_perms(config.topic_perms, True, perms)
    try:
        white = address_matcher(config.white_remote_address)
    except AddressPatternError as exc:
        raise AclConfigError(str(exc)) from None
    return Account(
        access_key=config.access_key,
        secret_key=config.secret_key,
        admin=config.admin,
        default_topic_perm=parse_perm(config.default_topic_perm),
        default_group_perm=parse_perm(config.default_group_perm),
        perms=perms or None,
        white=white,
    )


@attrs.frozen
class DataVersion:
    counter: int = 0
    timestamp: int = 0

    def next(self) -> DataVersion:
        return DataVersion(self.counter + 1, int(time.time() * 1000))

    def to_json(self) -> dict[str, int]:
        return {"counter": self.counter, "timestamp": self.timestamp}


@attrs.frozen
class AclFile:
    """One parsed file: its entries as written, the compiled accounts and white-list matchers, the data version and
    the whole document (other keys are kept on rewrite)."""

    global_white_addresses: tuple[str, ...]
    entries: tuple[AccountConfig, ...]
    accounts: tuple[Account, ...]
    global_white: tuple[AddressMatcher, ...] = attrs.field(repr=False)
    data_version: DataVersion
    document: Mapping[str, Any] = attrs.field(repr=False)

    @property
    def empty(self) -> bool:
        """No data: an empty document, or one of comments only."""
        return not self.document

    def as_written(self) -> AclFile:
        """This file with the document :meth:`dump` writes (never empty), as a rewrite leaves it on disk."""
        doc = dict(self.document)
        doc["globalWhiteRemoteAddresses"] = list(self.global_white_addresses)
        doc["accounts"] = [entry.to_yaml() for entry in self.entries]
        doc["dataVersion"] = [self.data_version.to_json()]
        return attrs.evolve(self, document=doc)

    def dump(self) -> str:
        import yaml

        doc = self.as_written().document
        return str(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, default_flow_style=False))


def _data_version(raw: object) -> DataVersion:
    """The file's ``dataVersion``; without one (the stock ``plain_acl.yml``), or without its timestamp, dated now:
    4.9.8's ``PlainPermissionManager.load`` starts from a ``new DataVersion()`` (``common/src/main/java/org/apache/
    rocketmq/common/DataVersion.java``: ``timestamp = System.currentTimeMillis()``, counter 0) at each load."""
    now = int(time.time() * 1000)
    item = raw[0] if isinstance(raw, list) and raw else raw
    if not isinstance(item, Mapping):
        return DataVersion(0, now)
    try:
        return DataVersion(int(item.get("counter", 0)), int(item.get("timestamp", now)))
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(.inf)
        return DataVersion(0, now)


def build_acl_file(
    document: Mapping[str, Any], white: Iterable[str], entries: Iterable[AccountConfig], version: DataVersion
) -> AclFile:
    """Compile ``entries`` and ``white`` into an :class:`AclFile`. Raises :class:`AclConfigError`."""
    white = tuple(white)
    entries = tuple(entries)
    try:
        matchers = tuple(address_matcher(pattern) for pattern in white)
    except AddressPatternError as exc:
        raise AclConfigError(str(exc)) from None
    return AclFile(white, entries, tuple(compile_account(e) for e in entries), matchers, version, document)


def parse_acl_file(text: str) -> AclFile:
    """Parse and compile one file's text (empty text is an empty file). Raises :class:`AclConfigError`."""
    import yaml

    try:
        document = yaml.safe_load(text)
    except (yaml.YAMLError, ValueError, OverflowError, RecursionError) as exc:  # ValueError: a date like 2024-13-45
        raise AclConfigError(f"not valid YAML: {exc}") from None
    if document is None:
        document = {}
    if not isinstance(document, Mapping):
        raise AclConfigError(f"the document must be a map, got {type(document).__name__}")
    accounts = document.get("accounts") or []
    if not isinstance(accounts, list):
        raise AclConfigError("accounts must be a list")
    white = _text_list(document.get("globalWhiteRemoteAddresses"))
    entries = [AccountConfig.from_yaml(raw) for raw in accounts]
    return build_acl_file(document, white, entries, _data_version(document.get("dataVersion")))


def read_acl_file(path: Path) -> AclFile:
    """Read and parse one file. Raises :class:`AclConfigError` when it is not UTF-8 or does not parse (as
    ``AclUtils.getYamlDataObject`` wraps every failure in an AclException), ``FileNotFoundError`` when it is missing,
    ``OSError`` when it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise AclConfigError(f"{path} is not UTF-8 text: {exc}") from None
    return parse_acl_file(text)
