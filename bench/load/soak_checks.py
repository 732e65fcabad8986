"""The soak's verdicts over its samples: is a series flat after warm-up, did the broker leak, was anything lost.

Pure functions over the sample dictionaries :mod:`bench.load.soak` collects (keys ``phase``, ``t``, ``send_tps``,
``rss_mb``, ``rss_anon_mb``, ``p99_ms``, ``files``, ``sockets``); only the ``soak`` phase's samples are judged (not
the peak before it nor the drain after it). Nothing here does I/O or raises on odd input (too few samples give
``None`` drifts, which count as flat: there is nothing to judge).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: A series is flat when its least-squares line moves by at most this share of its start across the window.
FLAT = 0.10


def drift(points: Sequence[tuple[float, float]]) -> float | None:
    """How much the least-squares line through ``(t, value)`` moves across the points' span, as a share of the
    line's value at the start; ``None`` for fewer than three points or a start value of zero or less."""
    if len(points) < 3:
        return None
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var_t = sum((t - mean_t) ** 2 for t, _ in points)
    if var_t == 0:
        return None
    slope = sum((t - mean_t) * (v - mean_v) for t, v in points) / var_t
    first, last = points[0][0], points[-1][0]
    start = mean_v + slope * (first - mean_t)
    if start <= 0:
        return None
    return slope * (last - first) / start


def after_warmup(samples: Sequence[dict[str, Any]], warmup: float) -> list[dict[str, Any]]:
    """The soak phase's samples taken once ``warmup`` seconds of it had passed."""
    return [s for s in samples if s.get("phase") == "soak" and s["t"] >= warmup]


def with_sends(samples: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The samples whose interval acknowledged a send: one without has no latency (its ``p99_ms`` 0.0 is no
    figure)."""
    return [s for s in samples if s.get("send_tps", 0) > 0]


def flat(samples: Sequence[dict[str, Any]], key: str, limit: float = FLAT) -> dict[str, Any]:
    """The verdict on ``key``: its drift, first / last / min / max, and ``ok`` when ``|drift| <= limit``."""
    values = [(s["t"], float(s[key])) for s in samples]
    moved = drift(values)
    only = [v for _, v in values]
    return {
        "drift": None if moved is None else round(moved, 4),
        "first": only[0] if only else None,
        "last": only[-1] if only else None,
        "min": min(only) if only else None,
        "max": max(only) if only else None,
        "ok": moved is None or abs(moved) <= limit,
    }


def no_leak(baseline: int, settled: int) -> dict[str, Any]:
    """A count (open files, sockets) that must come back to its pre-load ``baseline`` once the load's clients left."""
    return {"baseline": baseline, "settled": settled, "ok": settled <= baseline}


def verdict(
    samples: Sequence[dict[str, Any]],
    warmup: float,
    *,
    acked: int,
    lost: int,
    baseline: dict[str, int],
    settled: dict[str, int],
) -> dict[str, Any]:
    """All the checks and ``ok`` when every one passed. RSS is judged on its anonymous part (the heap: what a leak
    grows); the whole ``VmRSS`` also holds the CommitLog's mapped pages, which grow with the data written until the
    kernel reclaims them, so its drift is reported (``rss_total``) but not judged."""
    steady = after_warmup(samples, warmup)
    total = flat(steady, "rss_mb")
    total.pop("ok")
    checks: dict[str, Any] = {
        "rss_flat": flat(steady, "rss_anon_mb"),
        "p99_flat": flat(with_sends(steady), "p99_ms"),
        "files_no_leak": no_leak(baseline["files"], settled["files"]),
        "sockets_no_leak": no_leak(baseline["sockets"], settled["sockets"]),
        "nothing_lost": {"acked": acked, "lost": lost, "ok": acked > 0 and lost == 0},
    }
    checks["ok"] = all(check["ok"] for check in checks.values())
    checks["rss_total"] = total
    return checks
