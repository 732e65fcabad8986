"""The charts' day files, in rocketmq-dashboard's format (``DashboardCollectTask.saveData``,
``DashboardCollectServiceImpl.getBrokerCache``/``getTopicCache``).

A day's samples are two JSON objects of lines by key, in ``rocketmq.config.dataPath``: ``dashboard<yyyy-MM-dd>.json``
(Java joins ``dataPath + "/dashboard"`` and the date with no separator) maps ``brokerName:brokerId`` to
``"<ms>,<tps>"`` lines, ``dashboard<yyyy-MM-dd>_topic.json`` maps a topic to
``"<ms>,<inTps>,<inCount>,<outTps>,<outCount>"`` lines. Days are named in the local time zone, as Java's
``SimpleDateFormat``. Files are never deleted (rocketmq-dashboard has no clean-up either). A file that does not
parse is logged and read as empty.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from pathlib import Path

import attrs

log = logging.getLogger(__name__)

Lines = dict[str, list[str]]
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def day_of(ms: int) -> str:
    """The local ``yyyy-MM-dd`` of a wall time in milliseconds."""
    return time.strftime("%Y-%m-%d", time.localtime(ms / 1000))


def is_day(text: str) -> bool:
    """Whether ``text`` is a ``yyyy-MM-dd`` date (anything else could name a file outside the data path)."""
    if not _DAY.fullmatch(text):
        return False
    try:
        time.strptime(text, "%Y-%m-%d")
    except ValueError:
        return False
    return True


@attrs.frozen
class DayFiles:
    """The day files under ``directory`` (rocketmq-dashboard's ``rocketmq.config.dataPath``)."""

    directory: Path

    def brokers_path(self, day: str) -> Path:
        return self.directory / f"dashboard{day}.json"

    def topics_path(self, day: str) -> Path:
        return self.directory / f"dashboard{day}_topic.json"

    def read(self, day: str) -> tuple[Lines, Lines]:
        """A day's broker and topic lines; a day without files has none."""
        return _read(self.brokers_path(day)), _read(self.topics_path(day))

    def write(self, day: str, brokers: Lines, topics: Lines) -> None:
        """Replace a day's files (each written beside and renamed, so a reader never meets half a file)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        _write(self.brokers_path(day), brokers)
        _write(self.topics_path(day), topics)


def _read(path: Path) -> Lines:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("chart history %s not read: %s", path, exc)
        return {}
    if not isinstance(loaded, dict):
        log.warning("chart history %s is not a JSON object", path)
        return {}
    return {str(k): [str(line) for line in v] for k, v in loaded.items() if isinstance(v, list)}


def _write(path: Path, lines: Lines) -> None:
    """One key at a time: a whole day's object encoded in one call would hold the GIL, and so stall the event
    loop, for the whole encoding (half a second for 1,000 topics at the end of a day, bench/chart_history.py)."""
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", encoding="utf-8") as out:
        out.write("{")
        for i, (key, values) in enumerate(lines.items()):
            out.write(("," if i else "") + json.dumps(key) + ":" + json.dumps(values, separators=(",", ":")))
        out.write("}")
    os.replace(temporary, path)
