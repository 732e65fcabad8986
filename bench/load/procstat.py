"""What the bench tools read from Linux ``/proc``: another process's CPU time (once, or sampled on a thread by
:class:`CpuSampler` so that it can be read over a window learnt afterwards), resident memory and open descriptors, and
the machine's CPU time (busy and stolen by the hypervisor).

:func:`descriptors` sorts the process's descriptors into sockets, files under a data directory (the store's
segments, which grow with the data as RocketMQ's open ``MappedFile`` channels do) and the rest. A process that is
gone, or descriptors that close while being read, give what could be read; nothing here raises for them.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import threading
import time
from pathlib import Path
from typing import Self

import attrs

#: Seconds between two readings of a :class:`CpuSampler`.
SAMPLE_STEP = 0.05


@attrs.frozen
class Descriptors:
    sockets: int
    store: int
    other: int

    @property
    def files(self) -> int:
        """Open descriptors that are not sockets and not the store's files."""
        return self.other


def process_cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``); ``None`` when unknown."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_of(pids: list[int]) -> float:
    """The CPU seconds of ``pids`` so far, summed (a process gone counts 0)."""
    return sum(process_cpu_seconds(pid) or 0.0 for pid in pids)


class CpuSampler:
    """The CPU seconds of ``pids`` sampled every :data:`SAMPLE_STEP` on a thread while entered, so that the CPU
    between two moments learnt afterwards (a load tool's window, on ``time.monotonic()``) can be read."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def __enter__(self) -> Self:
        self._take()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._take()

    def _take(self) -> None:
        self.samples.append((time.monotonic(), cpu_of(self.pids)))

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_STEP):
            self._take()

    def at(self, moment: float) -> float:
        """The CPU seconds at ``moment``, interpolated between the samples around it (the first or last outside)."""
        i = bisect.bisect_left(self.samples, moment, key=lambda sample: sample[0])
        if i == 0 or i == len(self.samples):
            return self.samples[min(i, len(self.samples) - 1)][1]
        (t0, cpu0), (t1, cpu1) = self.samples[i - 1], self.samples[i]
        return cpu0 + (cpu1 - cpu0) * (moment - t0) / (t1 - t0)

    def between(self, start: float, end: float) -> float:
        return self.at(end) - self.at(start)


def rss_mb(pid: int, field: str = "VmRSS:") -> float:
    """Resident memory of ``pid`` in MB: ``VmRSS`` (all of it) or another ``/proc/<pid>/status`` field such as
    ``RssAnon:`` (anonymous memory: the heap, without mapped files); 0.0 when unreadable."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return 0.0


def descriptors(pid: int, store_dir: str | None = None) -> Descriptors:
    """``pid``'s open descriptors by kind; ``store_dir`` (absolute) marks the store's files."""
    sockets = store = other = 0
    fd_dir = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return Descriptors(0, 0, 0)
    for name in names:
        try:
            target = os.readlink(f"{fd_dir}/{name}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:"):
            sockets += 1
        elif store_dir and target.startswith(store_dir):
            store += 1
        else:
            other += 1
    return Descriptors(sockets, store, other)


def children_of(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (``/proc/*/stat``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def machine_cpu() -> tuple[int, int, int]:
    """The whole machine's CPU time from ``/proc/stat``, in clock ticks: ``(busy, steal, total)``; busy counts user,
    nice, system, irq and softirq, steal is what the hypervisor gave to others. Zeros when it cannot be read."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return 0, 0, 0
    user, nice, system, idle, iowait, irq, softirq, steal = fields + [0] * (8 - len(fields))
    busy = user + nice + system + irq + softirq
    return busy, steal, busy + idle + iowait + steal


def machine_shares(before: tuple[int, int, int], after: tuple[int, int, int]) -> dict[str, float | None]:
    """Busy and stolen shares of the machine's CPU time between two :func:`machine_cpu` readings."""
    total = after[2] - before[2]
    if total <= 0:
        return {"machine_busy": None, "steal": None}
    return {"machine_busy": round((after[0] - before[0]) / total, 3), "steal": round((after[1] - before[1]) / total, 4)}
