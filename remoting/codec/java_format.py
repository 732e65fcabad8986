"""Java's text formats that RocketMQ writes into admin answers, for readers that parse them the Java way (the
runtime info that ``mqadmin brokerStatus`` and rocketmq-exporter read). Pure functions; nothing here raises for a
finite number.

- :func:`java_double`: ``Double.toString`` (``0.0``, ``12.5``, ``1.0E7``, ``1.5E-4``);
- :func:`java_fixed`: ``String.format("%.2f")`` and its kin (``0.13`` for 0.125, ``NaN``), as mqadmin's figures and the
  runtime info's ``putLatency99`` print;
- :func:`human_readable_bytes`: ``MixAll.humanReadableByteCount(bytes, false)`` (``512 B``, ``1.3 KiB``), rounding
  half up as ``String.format("%.1f")`` does;
- :func:`grouped`: a ``long`` as ``java.text.MessageFormat`` prints it (``1,234``).
"""

from __future__ import annotations

import decimal
import math
from typing import Final

_UNITS: Final = "KMGTPE"


def java_double(value: float) -> str:
    """``Double.toString(value)``: plain decimal for 1e-3 <= |x| < 1e7, else ``d.dddE<exp>``; always a fraction
    digit. Both use the shortest digits that read back as the same double."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e7:
        text = repr(value)
        return text if "." in text else text + ".0"
    _, digits, exponent = decimal.Decimal(repr(magnitude)).normalize().as_tuple()
    assert isinstance(exponent, int)
    scientific = len(digits) - 1 + exponent
    rest = "".join(map(str, digits[1:])) or "0"
    return f"{'-' if value < 0 else ''}{digits[0]}.{rest}E{scientific}"


def java_fixed(value: float, places: int) -> str:
    """``String.format("%.<places>f", value)`` as Java prints it: java/util/Formatter.java rounds the digits of
    ``Double.toString(value)`` (jdk/internal/math/FormattedFloatingDecimal.java, the shortest decimal that reads
    back as the double) half up, so 0.125 is ``0.13`` and 1.005 ``1.01`` (Python's ``%.2f`` rounds the exact binary
    value half to even: ``0.12``, ``1.00``); never in exponent form, ``-0.00`` kept, ``NaN``, ``Infinity`` and
    ``-Infinity`` as Java's. mqadmin's TPS, ratio and RT figures print so (tools/src/main/java/org/apache/rocketmq/
    tools/command/cluster/ClusterListSubCommand.java, consumer/ConsumerProgressSubCommand.java,
    stats/StatsAllSubCommand.java, message/CheckMsgSendRTCommand.java, cluster/CLusterSendMsgRTCommand.java), and so
    do the runtime info's ``putLatency99`` and ``putLatency999`` (store/src/main/java/org/apache/rocketmq/store/
    StoreStatsService.java ``getRuntimeInfo``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    shortest = decimal.Decimal(repr(value))
    with decimal.localcontext() as ctx:
        ctx.prec = max(28, shortest.adjusted() + places + 2)
        return format(shortest.quantize(decimal.Decimal(1).scaleb(-places), rounding=decimal.ROUND_HALF_UP), "f")


def human_readable_bytes(count: int) -> str:
    """``MixAll.humanReadableByteCount(count, false)``."""
    if count < 1024:
        return f"{count} B"
    exp = int(math.log(count) / math.log(1024))
    scaled = (decimal.Decimal(count) / decimal.Decimal(1024**exp)).quantize(
        decimal.Decimal("0.1"), rounding=decimal.ROUND_HALF_UP
    )
    return f"{scaled} {_UNITS[exp - 1]}iB"


def grouped(number: int) -> str:
    """``MessageFormat``'s rendering of a ``Long`` argument: thousands separated by commas."""
    return f"{number:,}"
