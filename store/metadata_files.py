"""The broker's ``config/*.json`` files and the name server's ``kvConfig.json``: shapes and atomic persistence.

Shapes follow docs/protocol.md#67-config-files (DataVersion and TopicConfig:
docs/protocol.md#47-topicconfigserializewrapper-topicconfig-and-dataversion; SubscriptionGroupConfig:
docs/protocol.md#410-subscriptiongroupconfig), with Java's field names. The attrs classes here (:class:`DataVersion`,
:class:`TopicConfig`, :class:`SubscriptionGroupConfig`) are defined in :mod:`remoting.codec.bodies.broker_metadata`
(they also travel on the wire) and re-exported here; this module owns the files' table shapes and their persistence.

Input is fastjson-tolerant: tab-indented pretty printing, unquoted numeric map keys (``{0:12,1:9}``), numbers sent
as strings, unknown fields (5.x additions such as ``attributes`` or ``stateVersion``) ignored. Output is standard
JSON: quoted keys, sorted (numeric map keys in numeric order), two-space indentation. Java reads it back unchanged.

Persistence (:class:`ConfigFile`): ``save`` writes ``<name>.tmp`` and fsyncs it, copies the previous content to
``<name>.bak`` (only if it loads, so a corrupt file never replaces a good backup), renames the temp file over
``<name>`` and fsyncs the directory. ``load`` falls back to ``<name>.bak`` when the main file is missing, empty or
unparseable; a leftover ``.tmp`` from a crash is ignored because its write never completed. Everything here is
**blocking file I/O and synchronous on purpose**: async callers run ``save``/``load`` through
``trio.to_thread.run_sync``. One owner (a manager) saves a given file; concurrent saves of one file are not supported.

Errors: :class:`ConfigFileError` (a :class:`~store.errors.StoreError`) for content that does not decode and for a file
whose content and backup are both unusable; ``OSError`` from the file system propagates unchanged.
``load_as_config_manager`` (the broker's managers) follows RocketMQ's ConfigManager instead: a main file that does not
decode is logged and, without a ``.bak``, read as no content; only a ``.bak`` that does not decode raises.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar

import attrs
import orjson

from remoting.codec.bodies._json import expect_object, loads, quote_numeric_keys, to_int
from remoting.codec.bodies.broker_metadata import (
    PERM_INHERIT,
    PERM_PRIORITY,
    PERM_READ,
    PERM_WRITE,
    DataVersion,
    SubscriptionGroupConfig,
    TopicConfig,
    TopicFilterType,
)
from remoting.codec.errors import CodecError
from store.errors import StoreError

__all__ = [
    "PERM_INHERIT",
    "PERM_PRIORITY",
    "PERM_READ",
    "PERM_WRITE",
    "ConfigFile",
    "ConfigFileError",
    "ConsumerOffsetTable",
    "DataVersion",
    "DelayOffsetTable",
    "KvConfigTable",
    "LmqOffsets",
    "SubscriptionGroupConfig",
    "SubscriptionGroupTable",
    "TopicConfig",
    "TopicConfigTable",
    "TopicFilterType",
    "consumer_offset_file",
    "decode_consumer_offsets",
    "decode_delay_offsets",
    "decode_kv_config",
    "decode_subscription_groups",
    "decode_topics",
    "delay_offset_file",
    "dump_json",
    "encode_consumer_offsets",
    "encode_delay_offsets",
    "encode_kv_config",
    "encode_subscription_groups",
    "encode_topics",
    "fsync_directory",
    "kv_config_file",
    "lmq_consumer_offset_file",
    "parse_json",
    "quote_numeric_keys",
    "subscription_group_file",
    "topics_file",
]

log = logging.getLogger(__name__)

T = TypeVar("T")


class ConfigFileError(StoreError):
    """A config file's content does not decode, or neither the file nor its ``.bak`` can be loaded."""


@attrs.frozen
class TopicConfigTable:
    """Content of ``topics.json`` (also the TopicConfigSerializeWrapper of REGISTER_BROKER)."""

    topic_config_table: dict[str, TopicConfig] = attrs.field(factory=dict)
    data_version: DataVersion = attrs.field(factory=DataVersion)


@attrs.frozen
class SubscriptionGroupTable:
    """Content of ``subscriptionGroup.json``."""

    subscription_group_table: dict[str, SubscriptionGroupConfig] = attrs.field(factory=dict)
    data_version: DataVersion = attrs.field(factory=DataVersion)


# consumerOffset.json: "topic@group" -> {queueId: next offset to consume}
ConsumerOffsetTable = dict[str, dict[int, int]]
# delayOffset.json: delay level (1-based) -> progress in SCHEDULE_TOPIC_XXXX queue level - 1
DelayOffsetTable = dict[int, int]
# kvConfig.json: namespace -> {key: value}
KvConfigTable = dict[str, dict[str, str]]


def encode_topics(table: TopicConfigTable) -> bytes:
    topics = {name: table.topic_config_table[name].to_json() for name in sorted(table.topic_config_table)}
    return dump_json({"dataVersion": table.data_version.to_json(), "topicConfigTable": topics})


def _config_errors(decode: Callable[[bytes], T]) -> Callable[[bytes], T]:
    """Report a wrong shape inside valid JSON (a codec error from the shared readers) as ConfigFileError."""

    @functools.wraps(decode)
    def wrapper(data: bytes) -> T:
        try:
            return decode(data)
        except CodecError as exc:
            raise ConfigFileError(str(exc)) from None

    return wrapper


@_config_errors
def decode_topics(data: bytes) -> TopicConfigTable:
    root = _expect_map(parse_json(data), "topics.json")
    raw = _expect_map(root.get("topicConfigTable"), "topicConfigTable")
    topics = {name: TopicConfig.from_json(v, name) for name, v in raw.items() if v is not None}
    return TopicConfigTable(topic_config_table=topics, data_version=DataVersion.from_json(root.get("dataVersion")))


def encode_subscription_groups(table: SubscriptionGroupTable) -> bytes:
    groups = {name: table.subscription_group_table[name].to_json() for name in sorted(table.subscription_group_table)}
    return dump_json({"dataVersion": table.data_version.to_json(), "subscriptionGroupTable": groups})


@_config_errors
def decode_subscription_groups(data: bytes) -> SubscriptionGroupTable:
    root = _expect_map(parse_json(data), "subscriptionGroup.json")
    raw = _expect_map(root.get("subscriptionGroupTable"), "subscriptionGroupTable")
    groups = {name: SubscriptionGroupConfig.from_json(v, name) for name, v in raw.items() if v is not None}
    return SubscriptionGroupTable(
        subscription_group_table=groups, data_version=DataVersion.from_json(root.get("dataVersion"))
    )


def encode_consumer_offsets(table: ConsumerOffsetTable) -> bytes:
    return dump_json({"offsetTable": {key: _int_map_out(table[key]) for key in sorted(table)}})


@_config_errors
def decode_consumer_offsets(data: bytes) -> ConsumerOffsetTable:
    root = _expect_map(parse_json(data), "consumerOffset.json")
    return {
        key: _int_map_in(v, key)
        for key, v in _expect_map(root.get("offsetTable"), "offsetTable").items()
        if v is not None
    }


def encode_delay_offsets(table: DelayOffsetTable) -> bytes:
    return dump_json({"offsetTable": _int_map_out(table)})


@_config_errors
def decode_delay_offsets(data: bytes) -> DelayOffsetTable:
    root = _expect_map(parse_json(data), "delayOffset.json")
    return _int_map_in(root.get("offsetTable"), "offsetTable")


def encode_kv_config(table: KvConfigTable) -> bytes:
    sorted_table = {ns: {k: table[ns][k] for k in sorted(table[ns])} for ns in sorted(table)}
    return dump_json({"configTable": sorted_table})


@_config_errors
def decode_kv_config(data: bytes) -> KvConfigTable:
    root = _expect_map(parse_json(data), "kvConfig.json")
    out: KvConfigTable = {}
    for namespace, kv in _expect_map(root.get("configTable"), "configTable").items():
        entries = _expect_map(kv, f"namespace {namespace!r}")
        out[namespace] = {k: str(v) for k, v in entries.items() if v is not None}
    return out


@attrs.frozen
class ConfigFile(Generic[T]):
    """One JSON config file with its codec; see the module docstring for the atomic save and the ``.bak`` rules.

    Blocking: call from a worker thread in async code. Not safe for concurrent ``save`` of the same path.
    """

    path: Path
    encode: Callable[[T], bytes]
    decode: Callable[[bytes], T]

    @property
    def tmp_path(self) -> Path:
        return self.path.with_name(self.path.name + ".tmp")

    @property
    def bak_path(self) -> Path:
        return self.path.with_name(self.path.name + ".bak")

    def load(self) -> T | None:
        """The file's content, else its ``.bak``'s; ``None`` when neither exists nor has content.

        Raises :class:`ConfigFileError` when some content exists but none of it decodes (Java refuses to start the
        broker in that case rather than silently starting with an empty table), also when the main file does not
        decode and the ``.bak`` cannot be read; otherwise an ``OSError`` reading either file propagates.
        """
        failures: list[str] = []
        for candidate in (self.path, self.bak_path):
            try:
                value = self._decode_file(candidate)
            except ConfigFileError as exc:
                failures.append(f"{candidate.name}: {exc}")
                continue
            except OSError as exc:
                if not failures:
                    raise
                # The main file's content does not decode and its .bak cannot be read: nothing to start from, so
                # this is no read error of the file a caller may start without (the name server's kvConfig.json:
                # namesrv/src/main/java/org/apache/rocketmq/namesrv/kvconfig/KVConfigManager.java ``load`` logs only
                # the IOException of reading it, while content that does not parse stops the start).
                failures.append(f"{candidate.name}: {exc}")
                continue
            if value is not None:
                return value
        if failures:
            raise ConfigFileError(f"cannot load {self.path}: " + "; ".join(failures))
        return None

    def load_main(self) -> T | None:
        """The main file alone, never its ``.bak``: ``None`` when it is missing or empty; :class:`ConfigFileError`
        when its content does not decode (the message names the file); any other ``OSError`` reading it propagates."""
        try:
            return self._decode_file(self.path)
        except ConfigFileError as exc:
            raise ConfigFileError(f"cannot load {self.path}: {exc}") from None

    def load_as_config_manager(self) -> T | None:
        """The file's content as common/src/main/java/org/apache/rocketmq/common/ConfigManager.java ``load`` reads
        it: a main file that does not decode is logged ("load <file> failed, and try to load backup file") and the
        ``.bak`` read instead (``loadBak``); ``None`` (start with an empty table) when the ``.bak`` is missing or
        empty too. Raises :class:`ConfigFileError` only when the content read last, the ``.bak``, does not decode:
        ``loadBak`` then returns false and the broker does not start."""
        try:
            value = self._decode_file(self.path)
        except ConfigFileError as exc:
            log.error("load %s failed, and try to load backup file: %s", self.path, exc)
            value = None
        if value is not None:
            return value
        try:
            return self._decode_file(self.bak_path)
        except ConfigFileError as exc:
            log.error("load %s failed: %s", self.bak_path, exc)
            raise ConfigFileError(f"cannot load {self.path} nor {self.bak_path.name}: {exc}") from None

    def save(self, value: T, *, sync: bool = True) -> None:
        """Persist ``value`` atomically: after a crash at any point, ``load`` returns either it or the previous one.

        ``sync=False`` skips the ``fsync`` calls: the file then survives the process being killed (the page cache
        keeps it), as Java's ``MixAll.string2File`` does, but not a power loss until a synced save follows."""
        data = self.encode(value)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.tmp_path, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        # Only a loadable main file becomes the backup: a torn or corrupt one must not replace a good .bak.
        try:
            keep_backup = self._decode_file(self.path) is not None
        except ConfigFileError:
            keep_backup = False
        if keep_backup:
            # A crash while copying leaves a torn .bak, but the main file is still intact at that point.
            shutil.copyfile(self.path, self.bak_path)
        os.replace(self.tmp_path, self.path)
        if sync:
            fsync_directory(self.path.parent)

    def _decode_file(self, path: Path) -> T | None:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        return self.decode(data) if data.strip() else None


def topics_file(config_dir: Path) -> ConfigFile[TopicConfigTable]:
    return ConfigFile(config_dir / "topics.json", encode_topics, decode_topics)


def consumer_offset_file(config_dir: Path) -> ConfigFile[ConsumerOffsetTable]:
    return ConfigFile(config_dir / "consumerOffset.json", encode_consumer_offsets, decode_consumer_offsets)


#: ``lmqConsumerOffset.json`` (broker/.../offset/LmqConsumerOffsetManager.java, written with ``enableLmq``): the
#: ordinary table as ``offsetTable``, ``"topic@group"`` -> offset of the LMQ groups (any queue) as ``lmqOffsetTable``.
LmqOffsets = tuple[ConsumerOffsetTable, dict[str, int]]


def encode_lmq_consumer_offsets(value: LmqOffsets) -> bytes:
    table, lmq = value
    return dump_json({
        "offsetTable": {key: _int_map_out(table[key]) for key in sorted(table)},
        "lmqOffsetTable": {key: lmq[key] for key in sorted(lmq)},
    })  # fmt: skip


@_config_errors
def decode_lmq_consumer_offsets(data: bytes) -> LmqOffsets:
    root = _expect_map(parse_json(data), "lmqConsumerOffset.json")
    table = {
        key: _int_map_in(v, key)
        for key, v in _expect_map(root.get("offsetTable"), "offsetTable").items()
        if v is not None
    }
    lmq = {
        key: to_int(v, key) for key, v in _expect_map(root.get("lmqOffsetTable"), "lmqOffsetTable").items()
        if v is not None
    }  # fmt: skip
    return table, lmq


def lmq_consumer_offset_file(config_dir: Path) -> ConfigFile[LmqOffsets]:
    return ConfigFile(config_dir / "lmqConsumerOffset.json", encode_lmq_consumer_offsets, decode_lmq_consumer_offsets)


def delay_offset_file(config_dir: Path) -> ConfigFile[DelayOffsetTable]:
    return ConfigFile(config_dir / "delayOffset.json", encode_delay_offsets, decode_delay_offsets)


def subscription_group_file(config_dir: Path) -> ConfigFile[SubscriptionGroupTable]:
    return ConfigFile(config_dir / "subscriptionGroup.json", encode_subscription_groups, decode_subscription_groups)


def kv_config_file(path: Path) -> ConfigFile[KvConfigTable]:
    """The name server's file; ``path`` is the full file path (default ``$HOME/namesrv/kvConfig.json``)."""
    return ConfigFile(path, encode_kv_config, decode_kv_config)


def replace_atomically(path: Path, data: bytes, tmp: Path, *, keep_mode: bool = False) -> None:
    """Put ``data`` at ``path`` so that after a crash it holds either the old or the new bytes: write ``tmp``, fsync,
    rename over ``path``, fsync the directory. ``keep_mode`` gives the new file the old one's permissions (``tmp`` is
    made owner-only until then, so a file kept private is never readable by others while it is written)."""
    keep_mode = keep_mode and path.exists()
    with open(tmp, "wb", opener=_owner_only if keep_mode else None) as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    if keep_mode:
        shutil.copymode(path, tmp)
    os.replace(tmp, path)
    fsync_directory(path.parent)


def _owner_only(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)


def fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def dump_json(obj: object) -> bytes:
    """Standard JSON with 2-space indent, keys in the order given: the encoders build every map with sorted keys
    (int-keyed maps in numeric order, as fastjson's sorted output has them)."""
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def parse_json(data: bytes | str) -> Any:
    """Parse strict JSON or fastjson output with unquoted numeric keys; raises :class:`ConfigFileError`."""
    try:
        return loads(data)
    except CodecError as exc:
        raise ConfigFileError(str(exc)) from None


def _int_map_out(table: Mapping[int, int]) -> dict[str, int]:
    return {str(k): table[k] for k in sorted(table)}


def _int_map_in(obj: object, what: str) -> dict[int, int]:
    m = _expect_map(obj, what)
    return {to_int(k, what): to_int(v, what) for k, v in m.items() if v is not None}


def _expect_map(obj: object, what: str) -> dict[str, Any]:
    """``obj`` as a JSON object; ``None`` (an absent or null field) reads as an empty one."""
    return {} if obj is None else expect_object(obj, what)
