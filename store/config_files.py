"""The broker's ``config/*.json`` files and the name server's ``kvConfig.json``: shapes and atomic persistence.

Shapes follow store.md 8 and protocol.md 6.6/6.8, with Java's field names. The attrs classes here
(:class:`DataVersion`, :class:`TopicConfig`, :class:`SubscriptionGroupConfig`) are the ones the broker managers and
the name server use directly, so every component (de)serializes them through this one module.

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
"""

from __future__ import annotations

import enum
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, Generic, TypeVar, cast

import attrs
import orjson

from store.errors import StoreError

T = TypeVar("T")
F = TypeVar("F")

PERM_PRIORITY: Final = 0x8
PERM_READ: Final = 0x4
PERM_WRITE: Final = 0x2
PERM_INHERIT: Final = 0x1


class ConfigFileError(StoreError):
    """A config file's content does not decode, or neither the file nor its ``.bak`` can be loaded."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _json_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


class _JsonShape:
    """Mixin for flat attrs config classes: each field maps to its camelCase Java name; output keys are sorted.

    Decoding tolerates fastjson's loose typing (numbers as strings, unknown fields) and takes field types from the
    defaults, so a class is only its field list. A field without a default is the table key (``topicName``...), which
    may be supplied by the enclosing map when the object lacks it.
    """

    def to_json(self) -> dict[str, Any]:
        out = {}
        for f in attrs.fields(cast(Any, type(self))):
            value = getattr(self, f.name)
            out[_json_name(f.name)] = value.value if isinstance(value, enum.Enum) else value
        return {k: out[k] for k in sorted(out)}

    @classmethod
    def from_json(cls: type[S], obj: object, name: str | None = None) -> S:
        m = _expect_map(obj, cls.__name__)
        kwargs: dict[str, Any] = {}
        for f in attrs.fields(cast(Any, cls)):
            key = _json_name(f.name)
            if isinstance(f.default, attrs.Factory):  # type: ignore[arg-type]
                kwargs[f.name] = _field(m, key, f.default.factory())
            elif f.default is not attrs.NOTHING:
                kwargs[f.name] = _field(m, key, f.default)
            elif not (value := _field(m, key, "") or name):
                raise ConfigFileError(f"{cls.__name__} without {key}")
            else:
                kwargs[f.name] = value
        return cls(**kwargs)


S = TypeVar("S", bound=_JsonShape)


@attrs.frozen
class DataVersion(_JsonShape):
    """Version stamp of a config table; two versions are equal iff both fields are (protocol.md 6.6)."""

    timestamp: int = attrs.field(factory=now_ms)
    counter: int = 0

    def next_version(self, timestamp: int | None = None) -> DataVersion:
        """The following version: counter + 1, timestamp = now (or the given ms)."""
        return DataVersion(timestamp=now_ms() if timestamp is None else timestamp, counter=self.counter + 1)


class TopicFilterType(enum.Enum):
    SINGLE_TAG = "SINGLE_TAG"
    MULTI_TAG = "MULTI_TAG"


@attrs.frozen
class TopicConfig(_JsonShape):
    """One topic's queue counts and permissions; defaults are Java's for a config built without values."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: TopicFilterType = TopicFilterType.SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False


@attrs.frozen
class SubscriptionGroupConfig(_JsonShape):
    """A consumer group's broker-side settings, defaults as protocol.md 6.8."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True


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


def decode_topics(data: bytes) -> TopicConfigTable:
    root = _expect_map(parse_json(data), "topics.json")
    raw = _expect_map(root.get("topicConfigTable"), "topicConfigTable")
    topics = {name: TopicConfig.from_json(v, name) for name, v in raw.items() if v is not None}
    return TopicConfigTable(topic_config_table=topics, data_version=DataVersion.from_json(root.get("dataVersion")))


def encode_subscription_groups(table: SubscriptionGroupTable) -> bytes:
    groups = {name: table.subscription_group_table[name].to_json() for name in sorted(table.subscription_group_table)}
    return dump_json({"dataVersion": table.data_version.to_json(), "subscriptionGroupTable": groups})


def decode_subscription_groups(data: bytes) -> SubscriptionGroupTable:
    root = _expect_map(parse_json(data), "subscriptionGroup.json")
    raw = _expect_map(root.get("subscriptionGroupTable"), "subscriptionGroupTable")
    groups = {name: SubscriptionGroupConfig.from_json(v, name) for name, v in raw.items() if v is not None}
    return SubscriptionGroupTable(
        subscription_group_table=groups, data_version=DataVersion.from_json(root.get("dataVersion"))
    )


def encode_consumer_offsets(table: ConsumerOffsetTable) -> bytes:
    return dump_json({"offsetTable": {key: _int_map_out(table[key]) for key in sorted(table)}})


def decode_consumer_offsets(data: bytes) -> ConsumerOffsetTable:
    root = _expect_map(parse_json(data), "consumerOffset.json")
    return {
        key: _int_map_in(v, key)
        for key, v in _expect_map(root.get("offsetTable"), "offsetTable").items()
        if v is not None
    }


def encode_delay_offsets(table: DelayOffsetTable) -> bytes:
    return dump_json({"offsetTable": _int_map_out(table)})


def decode_delay_offsets(data: bytes) -> DelayOffsetTable:
    root = _expect_map(parse_json(data), "delayOffset.json")
    return _int_map_in(root.get("offsetTable"), "offsetTable")


def encode_kv_config(table: KvConfigTable) -> bytes:
    sorted_table = {ns: {k: table[ns][k] for k in sorted(table[ns])} for ns in sorted(table)}
    return dump_json({"configTable": sorted_table})


def decode_kv_config(data: bytes) -> KvConfigTable:
    root = _expect_map(parse_json(data), "kvConfig.json")
    out: KvConfigTable = {}
    for namespace, kv in _expect_map(root.get("configTable"), "configTable").items():
        entries = _expect_map(kv, f"namespace {namespace!r}")
        out[namespace] = {k: _field(entries, k, "") for k in entries if entries[k] is not None}
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
        broker in that case rather than silently starting with an empty table).
        """
        failures: list[str] = []
        for candidate in (self.path, self.bak_path):
            try:
                value = self._decode_file(candidate)
            except ConfigFileError as exc:
                failures.append(f"{candidate.name}: {exc}")
                continue
            if value is not None:
                return value
        if failures:
            raise ConfigFileError(f"cannot load {self.path}: " + "; ".join(failures))
        return None

    def save(self, value: T) -> None:
        """Persist ``value`` atomically: after a crash at any point, ``load`` returns either it or the previous one."""
        data = self.encode(value)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.tmp_path, "wb") as f:
            f.write(data)
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


def delay_offset_file(config_dir: Path) -> ConfigFile[DelayOffsetTable]:
    return ConfigFile(config_dir / "delayOffset.json", encode_delay_offsets, decode_delay_offsets)


def subscription_group_file(config_dir: Path) -> ConfigFile[SubscriptionGroupTable]:
    return ConfigFile(config_dir / "subscriptionGroup.json", encode_subscription_groups, decode_subscription_groups)


def kv_config_file(path: Path) -> ConfigFile[KvConfigTable]:
    """The name server's file; ``path`` is the full file path (default ``$HOME/namesrv/kvConfig.json``)."""
    return ConfigFile(path, encode_kv_config, decode_kv_config)


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
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        text = data.decode() if isinstance(data, bytes) else data
        return orjson.loads(quote_numeric_keys(text))
    except (UnicodeDecodeError, orjson.JSONDecodeError) as exc:
        raise ConfigFileError(f"not JSON: {exc}") from None


# A string literal (kept as is) or a bare numeric key: a number after "{" or "," and before ":". Matching strings
# first keeps digits inside topic names or values untouched; array elements never precede ":".
_STRING_OR_BARE_KEY: Final = re.compile(r'("(?:[^"\\]|\\.)*")|([{,]\s*)(-?\d+)(\s*:)')


def quote_numeric_keys(text: str) -> str:
    """Quote fastjson's bare numeric map keys (``{0:12}`` -> ``{"0":12}``), leaving everything else untouched."""
    return _STRING_OR_BARE_KEY.sub(lambda m: m[1] or f'{m[2]}"{m[3]}"{m[4]}', text)


def _int_map_out(table: Mapping[int, int]) -> dict[str, int]:
    return {str(k): table[k] for k in sorted(table)}


def _int_map_in(obj: object, what: str) -> dict[int, int]:
    m = _expect_map(obj, what)
    return {_to_int(k, what): _to_int(v, what) for k, v in m.items() if v is not None}


def _expect_map(obj: object, what: str) -> dict[str, Any]:
    """``obj`` as a JSON object; ``None`` (an absent or null field) reads as an empty one."""
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise ConfigFileError(f"{what} must be a JSON object, got {type(obj).__name__}")
    return obj


def _to_int(value: object, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise ConfigFileError(f"{what}: {value!r} is not an integer")


def _field(m: Mapping[str, Any], key: str, default: F) -> F:
    """``m[key]`` converted to the type of ``default`` (bool, int, str or an enum); ``default`` when absent."""
    value = m.get(key)
    if value is None:
        return default
    result: object
    if isinstance(default, bool):
        if not isinstance(value, bool) and str(value).lower() not in ("true", "false"):
            raise ConfigFileError(f"{key}: {value!r} is not a boolean")
        result = value if isinstance(value, bool) else str(value).lower() == "true"
    elif isinstance(default, int):
        result = _to_int(value, key)
    elif isinstance(value, dict | list):
        raise ConfigFileError(f"{key}: {value!r} is not a string")
    elif isinstance(default, enum.Enum):
        try:
            result = type(default)(value)
        except ValueError:
            raise ConfigFileError(f"{key}: {value!r} is not a {type(default).__name__}") from None
    else:
        result = value if isinstance(value, str) else str(value)
    return result  # type: ignore[return-value]
