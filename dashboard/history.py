"""The charts' day files, in rocketmq-dashboard's format (``DashboardCollectTask.saveData``,
``DashboardCollectServiceImpl.getBrokerCache``/``getTopicCache``).

A day's samples are two JSON objects of lines by key, in ``rocketmq.config.dataPath``: ``dashboard<yyyy-MM-dd>.json``
(Java joins ``dataPath + "/dashboard"`` and the date with no separator) maps ``brokerName:brokerId`` to
``"<ms>,<tps>"`` lines, ``dashboard<yyyy-MM-dd>_topic.json`` maps a topic to
``"<ms>,<inTps>,<inCount>,<outTps>,<outCount>"`` lines. Days are named in the local time zone, as Java's
``SimpleDateFormat``. Files are never deleted (rocketmq-dashboard has no clean-up either). A file that does not
parse is logged and read as empty; when the day is opened to be written again (:meth:`DayFiles.open_day`) it is first
moved aside to ``<file>.bad`` (``.bad.1``... when taken), so its samples are not overwritten. Each write goes through
a temporary file of its own name, so dashboards sharing a data path never write into each other's.

A file is parsed one key at a time (``raw_decode`` of each key and its lines): one ``json.loads`` of a day's topic
file (67 MB at 1,000 topics) holds the GIL, and so stalls the event loop, even from a worker thread.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import time
import uuid
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
        return self.read_brokers(day), self.read_topics(day)

    def open_day(self, day: str) -> tuple[Lines, Lines]:
        """:meth:`read` before the day is written again: a file that does not parse is moved aside first."""
        return _read(self.brokers_path(day), set_aside=True), _read(self.topics_path(day), set_aside=True)

    def read_brokers(self, day: str) -> Lines:
        return _read(self.brokers_path(day))

    def read_topics(self, day: str) -> Lines:
        return _read(self.topics_path(day))

    def write(self, day: str, brokers: Lines, topics: Lines) -> None:
        """Replace a day's files (each written beside and renamed, so a reader never meets half a file)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        _write(self.brokers_path(day), brokers)
        _write(self.topics_path(day), topics)


def _read(path: Path, *, set_aside: bool = False) -> Lines:
    try:
        return _parse_by_key(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except OSError as exc:
        log.warning("chart history %s not read: %s", path, exc)
    except ValueError as exc:
        log.warning("chart history %s does not parse: %s", path, exc)
        if set_aside:
            _set_aside(path)
    return {}


def _set_aside(path: Path) -> None:
    """Move a damaged ``path`` to the first free ``<path>.bad``, ``.bad.1``..."""
    names = (path.name + ".bad" + (f".{n}" if n else "") for n in itertools.count())
    aside = next(path.with_name(name) for name in names if not path.with_name(name).exists())
    try:
        os.replace(path, aside)
    except OSError as exc:
        log.warning("damaged chart history %s not moved aside: %s", path, exc)
    else:
        log.warning("damaged chart history %s kept as %s", path, aside.name)


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\r\n]+")


def _parse_by_key(text: str) -> Lines:
    """A JSON object of lines by key, decoded one member at a time (members whose value is not a list are
    skipped); a text that is not a JSON object raises ``ValueError``."""
    lines: Lines = {}
    at = _skip(text, 0, "{")
    if text.startswith("}", at):
        return _end(text, at + 1, lines)
    while True:
        key, at = _DECODER.raw_decode(text, at)
        if not isinstance(key, str):
            raise ValueError(f"a key is not a string before character {at}")
        at = _skip(text, at, ":")
        value, at = _DECODER.raw_decode(text, _spaces(text, at))
        if isinstance(value, list):
            lines[str(key)] = [str(line) for line in value]
        at = _spaces(text, at)
        if text.startswith("}", at):
            return _end(text, at + 1, lines)
        at = _skip(text, at, ",")


def _skip(text: str, at: int, expected: str) -> int:
    """The index after ``expected`` (spaces around it skipped), or ``ValueError``."""
    at = _spaces(text, at)
    if not text.startswith(expected, at):
        raise ValueError(f"expected {expected!r} at character {at}")
    return _spaces(text, at + 1)


def _spaces(text: str, at: int) -> int:
    """The index of the first character from ``at`` that is not JSON white space."""
    match = _SPACE.match(text, at)
    return match.end() if match else at


def _end(text: str, at: int, lines: Lines) -> Lines:
    if text[at:].strip():
        raise ValueError(f"extra data at character {at}")
    return lines


def _write(path: Path, lines: Lines) -> None:
    """One key at a time: a whole day's object encoded in one call would hold the GIL, and so stall the event
    loop, for the whole encoding (half a second for 1,000 topics at the end of a day, bench/chart_history.py)."""
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with temporary.open("w", encoding="utf-8") as out:
            out.write("{")
            for i, (key, values) in enumerate(lines.items()):
                out.write(("," if i else "") + json.dumps(key) + ":" + json.dumps(values, separators=(",", ":")))
            out.write("}")
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
