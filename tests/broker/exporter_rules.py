"""rocketmq-exporter's rules for reading a broker, ported to Python (our code, from reading its source at
apache/rocketmq-exporter e1ab2dd): how ``BrokerRuntimeStats``'s constructor parses the GET_BROKER_RUNTIME_INFO table
(``src/main/java/org/apache/rocketmq/exporter/model/BrokerRuntimeStats.java``), what ``RMQMetricsCollector`` then
reads of it (``collector/RMQMetricsCollector.java``: the 13 distribution buckets) and the VIEW_BROKER_STATS_DATA
queries ``task/MetricsCollectTask.java`` makes. A key it parses without a default that is missing or malformed makes
the exporter drop the broker's whole sample; here it raises :class:`ExporterRejected`.

Java's parsing primitives are reproduced with their strictness: ``Long.parseLong`` takes an optional sign and
decimal digits only, ``Double.parseDouble`` trims ASCII control characters and spaces and takes Java's float grammar
(``NaN``, ``Infinity``, an optional ``f``/``d`` suffix, hex floats; not Python's ``inf`` or ``1_0``), and
``String.split(" ")`` drops trailing empty strings but keeps leading ones.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

import attrs


class ExporterRejected(ValueError):
    """The exporter would throw on this table (NumberFormatException, NullPointerException, index out of bounds)."""


_LONG: Final = re.compile(r"[+-]?[0-9]+")
_DECIMAL: Final = r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_HEX: Final = r"0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+"
_DOUBLE: Final = re.compile(rf"[+-]?(?:NaN|Infinity|(?:{_DECIMAL}|{_HEX})[fFdD]?)")


def _present(text: str | None, what: str) -> str:
    if text is None:
        raise ExporterRejected(f"{what}: null (NullPointerException / NumberFormatException: null)")
    return text


def parse_long(text: str | None, what: str = "value", bits: int = 64) -> int:
    """``Long.parseLong`` (``bits=32``: ``Integer.parseInt``)."""
    text = _present(text, what)
    if not _LONG.fullmatch(text):
        raise ExporterRejected(f"{what}: For input string: {text!r}")
    value = int(text)
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise ExporterRejected(f"{what}: {text!r} is out of range")
    return value


def parse_double(text: str | None, what: str = "value") -> float:
    """``Double.parseDouble``."""
    text = _present(text, what)
    trimmed = text.strip("".join(chr(c) for c in range(33)))
    if not _DOUBLE.fullmatch(trimmed):
        raise ExporterRejected(f"{what}: For input string: {text!r}")
    body = trimmed[:-1] if trimmed[-1] in "fFdD" else trimmed  # a hex float ends in exponent digits
    if "x" in body.lower():
        return float.fromhex(body)
    return float(body.replace("Infinity", "inf"))


def java_split(text: str, separator: str) -> list[str]:
    """``String.split`` with a one-character literal separator: trailing empty strings are removed."""
    parts = text.split(separator)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts if parts != [""] else [""]


def machine_readable_bytes(text: str) -> float:
    """``Utils.machineReadableByteCount``: ``"<number> <unit>"``, unit ``B`` or ``[KMGTPE]...``."""
    parts = java_split(text, " ")
    if len(parts) < 2:
        raise ExporterRejected(f"capacity {text!r}: ArrayIndexOutOfBoundsException")
    base = parse_double(parts[0], "capacity")
    unit = parts[1]
    if unit == "B":
        return base
    if not unit:
        raise ExporterRejected(f"capacity {text!r}: StringIndexOutOfBoundsException")
    return base * 1024.0 ** ("KMGTPE".find(unit[0]) + 1)


@attrs.frozen
class Tps:
    ten: float = 0.0
    sixty: float = 0.0
    six_hundred: float = 0.0


def load_tps(text: str | None, what: str) -> Tps:
    """``loadTps``: up to three doubles separated by single spaces."""
    parts = java_split(_present(text, what), " ")
    values = [parse_double(p, what) for p in parts[:3]]
    return Tps(*values)


def load_distribution(text: str | None) -> dict[str, int]:
    """``loadPutMessageDistributeTime``: ``null`` gives an empty map; items without ``:`` are skipped (logged)."""
    if text is not None and text.lower() == "null":
        return {}
    found: dict[str, int] = {}
    for item in java_split(_present(text, "putMessageDistributeTime"), " "):
        pieces = java_split(item, ":")
        if len(pieces) < 2:
            continue
        key = pieces[0].replace("[", "").replace("]", "")
        found[key] = parse_long(pieces[1], f"putMessageDistributeTime {key}", bits=32)
    return found


def load_capacity(text: str | None) -> tuple[float, float]:
    """``loadCommitLogDirCapacity``: ``Total : <n> <unit>, Free : <n> <unit>.`` -> (total, free) bytes."""
    parts = java_split(_present(text, "commitLogDirCapacity"), " ")
    if len(parts) < 8 or not parts[3] or not parts[7]:
        raise ExporterRejected(f"commitLogDirCapacity {text!r}: index out of bounds")
    total = machine_readable_bytes(f"{parts[2]} {parts[3][:-1]}")
    free = machine_readable_bytes(f"{parts[6]} {parts[7][:-1]}")
    return total, free


#: Keys the constructor reads with ``Long.parseLong`` (no default).
LONG_KEYS: Final = (
    "msgPutTotalTodayNow", "sendThreadPoolQueueHeadWaitTimeMills", "queryThreadPoolQueueHeadWaitTimeMills",
    "msgGetTotalTodayNow", "queryThreadPoolQueueSize", "bootTimestamp", "msgPutTotalYesterdayMorning",
    "msgGetTotalYesterdayMorning", "pullThreadPoolQueueSize", "commitLogMinOffset",
    "pullThreadPoolQueueHeadWaitTimeMills", "dispatchMaxBuffer", "pageCacheLockTimeMills", "commitLogMaxOffset",
    "getMessageEntireTimeMax", "msgPutTotalTodayMorning", "putMessageTimesTotal", "msgGetTotalTodayMorning",
    "sendThreadPoolQueueSize", "startAcceptSendRequestTimeStamp", "putMessageEntireTimeMax",
    "earliestMessageTimeStamp", "remainTransientStoreBufferNumbs", "queryThreadPoolQueueCapacity",
    "dispatchBehindBytes", "putMessageSizeTotal", "sendThreadPoolQueueCapacity", "pullThreadPoolQueueCapacity",
)  # fmt: skip
#: Keys read with ``Double.parseDouble`` (no default).
DOUBLE_KEYS: Final = ("consumeQueueDiskRatio", "commitLogDiskRatio", "putMessageAverageSize")
#: Read with ``Double.parseDouble`` and a default of -1 when absent.
OPTIONAL_DOUBLE_KEYS: Final = ("putLatency99", "putLatency999")
#: What ``RMQMetricsCollector`` reads of a non-empty distribution (a missing one puts null into a cache: NPE).
DISTRIBUTION_KEYS: Final = (
    "<=0ms", "0~10ms", "10~50ms", "50~100ms", "100~200ms", "200~500ms", "500ms~1s", "1~2s", "2~3s", "3~4s", "4~5s",
    "5~10s", "10s~",
)  # fmt: skip


@attrs.frozen
class RuntimeStats:
    """What the exporter keeps of one broker's runtime info."""

    longs: dict[str, int]
    doubles: dict[str, float]
    tps: dict[str, Tps]
    distribution: dict[str, int]
    schedule_offsets: list[tuple[int, int]]
    capacity_total: float
    capacity_free: float
    remain_to_flush: float
    broker_version: int
    runtime: str | None
    version_desc: str | None


def parse_runtime_stats(table: Mapping[str, str]) -> RuntimeStats:
    """``new BrokerRuntimeStats(kvTable)`` then the collector's distribution reads; raises
    :class:`ExporterRejected` where the exporter throws."""
    schedule = []
    for key, value in table.items():
        if key.startswith("scheduleMessageOffset"):
            parts = java_split(value, ",")
            if len(parts) < 2:
                raise ExporterRejected(f"{key} {value!r}: ArrayIndexOutOfBoundsException")
            schedule.append((parse_long(parts[0], key), parse_long(parts[1], key)))
    distribution = load_distribution(table.get("putMessageDistributeTime"))
    tps = {key: load_tps(table.get(key), key) for key in ("putTps", "getMissTps", "getTotalTps", "getFoundTps")}
    transferred = "getTransferredTps" if "getTransferredTps" in table else "getTransferedTps"
    tps["getTransferedTps"] = load_tps(table.get(transferred), transferred)
    total, free = load_capacity(table.get("commitLogDirCapacity"))
    flush = java_split(_present(table.get("remainHowManyDataToFlush"), "remainHowManyDataToFlush"), " ")[0]
    longs = {key: parse_long(table.get(key), key) for key in LONG_KEYS}
    doubles = {key: parse_double(table.get(key), key) for key in DOUBLE_KEYS}
    doubles.update({key: parse_double(table.get(key, "-1"), key) for key in OPTIONAL_DOUBLE_KEYS})
    if distribution:
        missing = [key for key in DISTRIBUTION_KEYS if key not in distribution]
        if missing:
            raise ExporterRejected(f"putMessageDistributeTime lacks {missing}: null put into a cache")
    return RuntimeStats(
        longs=longs,
        doubles=doubles,
        tps=tps,
        distribution=distribution,
        schedule_offsets=schedule,
        capacity_total=total,
        capacity_free=free,
        remain_to_flush=parse_double(flush, "remainHowManyDataToFlush"),
        broker_version=parse_long(table.get("brokerVersion"), "brokerVersion", bits=32),
        runtime=table.get("runtime"),
        version_desc=table.get("brokerVersionDesc"),
    )


#: VIEW_BROKER_STATS_DATA queries of ``collectBrokerStatsTopic`` / ``collectBrokerStats``: statistic -> key kind,
#: and which field of ``statsMinute`` the exporter reports.
STATS_QUERIES: Final = {
    "TOPIC_PUT_NUMS": ("topic", "tps"),
    "TOPIC_PUT_SIZE": ("topic", "tps"),
    "GROUP_GET_NUMS": ("topic@group", "tps"),
    "GROUP_GET_SIZE": ("topic@group", "tps"),
    "SNDBCK_PUT_NUMS": ("topic@group", "sum"),
    "BROKER_PUT_NUMS": ("cluster", "tps"),
    "BROKER_GET_NUMS": ("cluster", "tps"),
}
