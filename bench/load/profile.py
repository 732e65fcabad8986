"""``--profile``: py-spy over the broker process for the measured window, as speedscope JSON and a flamegraph SVG.

:class:`BrokerProfiler` attaches ``py-spy record --pid`` to a running broker when the kernel lets it (ptrace rights);
otherwise the caller starts the broker under py-spy (:func:`spawn_argv`) and the profile then also holds the
broker's boot (idle threads are never sampled, so waiting adds nothing). Either way the speedscope JSON is the
source: :func:`render_flamegraph` draws the SVG from it and :func:`top_frames` ranks frames by their share of
samples ("where the time goes").

Errors: :class:`ProfileError` when py-spy is missing, cannot attach, or wrote nothing.
"""

from __future__ import annotations

import html
import json
import os
import signal
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any

import attrs

from bench.profiling import py_spy as find_py_spy


class ProfileError(RuntimeError):
    """py-spy is not installed, could not attach, or produced no profile."""


def py_spy() -> str:
    """py-spy from PATH, else the one next to this interpreter (a venv that is not activated)."""
    found = find_py_spy()
    if not os.path.exists(found):
        raise ProfileError("py-spy is not installed (pip install py-spy)")
    return found


def spawn_argv(speedscope: Path, argv: list[str]) -> list[str]:
    """``argv`` run under py-spy, writing ``speedscope`` when the process exits."""
    return [py_spy(), "record", "--format", "speedscope", "--rate", "200", "-o", str(speedscope), "--", *argv]


class BrokerProfiler:
    """py-spy attached to ``pid`` from :meth:`start` to :meth:`stop` (SIGINT makes py-spy write its file)."""

    def __init__(self, pid: int, speedscope: Path) -> None:
        self.pid = pid
        self.speedscope = speedscope
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [py_spy(), "record", "--pid", str(self.pid), "--nonblocking", "--format", "speedscope"]
        self._proc = subprocess.Popen(
            [*argv, "--rate", "200", "-o", str(self.speedscope)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        time.sleep(0.3)  # a refused attach fails at once; catch it before the window starts
        if self._proc.poll() is not None:
            err = self._proc.stderr.read().decode(errors="replace") if self._proc.stderr else ""
            raise ProfileError(f"py-spy could not attach to {self.pid}: {err.splitlines()[0] if err else '?'}")

    def stop(self) -> None:
        if self._proc is None:
            return
        self._proc.send_signal(signal.SIGINT)
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if not self.speedscope.exists():
            raise ProfileError("py-spy wrote no profile")


@attrs.frozen
class FrameShare:
    """A frame's share of all samples: ``self_share`` on top of the stack, ``total_share`` anywhere in it."""

    name: str
    location: str
    self_share: float
    total_share: float


def _stacks(speedscope: Path) -> tuple[list[dict[str, Any]], list[tuple[list[int], float]]]:
    data = json.loads(speedscope.read_text())
    frames: list[dict[str, Any]] = data["shared"]["frames"]
    stacks: list[tuple[list[int], float]] = []
    for profile in data["profiles"]:
        stacks.extend(zip(profile["samples"], profile["weights"], strict=True))
    return frames, stacks


def top_frames(speedscope: Path, limit: int = 15) -> list[FrameShare]:
    """The ``limit`` frames with the most self time (thread-root frames excluded), from a speedscope file."""
    frames, stacks = _stacks(speedscope)
    total = sum(w for _, w in stacks) or 1.0
    own: dict[int, float] = {}
    inclusive: dict[int, float] = {}
    for stack, weight in stacks:
        if stack:
            own[stack[-1]] = own.get(stack[-1], 0.0) + weight
        for index in set(stack):
            inclusive[index] = inclusive.get(index, 0.0) + weight
    shares = []
    for index, weight in sorted(own.items(), key=lambda kv: -kv[1])[:limit]:
        frame = frames[index]
        location = f"{Path(frame.get('file', '?')).name}:{frame.get('line', 0)}"
        shares.append(FrameShare(frame["name"], location, weight / total, inclusive[index] / total))
    return shares


def render_flamegraph(speedscope: Path, svg: Path, title: str = "rocketrio broker") -> None:
    """An icicle-style flamegraph SVG (roots at the top, width = share of samples, hover for the frame)."""
    frames, stacks = _stacks(speedscope)
    tree: dict[str, Any] = {"w": 0.0, "kids": {}}
    for stack, weight in stacks:
        node = tree
        node["w"] += weight
        for index in stack:
            node = node["kids"].setdefault(index, {"w": 0.0, "kids": {}})
            node["w"] += weight
    width, row = 1200.0, 16
    rects: list[str] = []
    depth_max = 0

    def draw(node: dict[str, Any], x: float, depth: int) -> None:
        nonlocal depth_max
        total = tree["w"] or 1.0
        for index, kid in sorted(node["kids"].items(), key=lambda kv: -kv[1]["w"]):
            w = kid["w"] / total * width
            if w >= 0.5:
                depth_max = max(depth_max, depth)
                frame = frames[index]
                label = html.escape(f"{frame['name']} ({Path(frame.get('file', '?')).name}:{frame.get('line', 0)})")
                tip = f"{label} {kid['w'] / total:.1%}"
                hue = 20 + zlib.crc32(frame["name"].encode()) % 40  # stable colours across runs
                text = label[: int(w / 7)] if w > 40 else ""
                rects.append(
                    f'<g><title>{tip}</title><rect x="{x:.1f}" y="{30 + depth * row}" width="{w:.1f}" '
                    f'height="{row - 1}" fill="hsl({hue},85%,60%)"/>'
                    f'<text x="{x + 3:.1f}" y="{30 + depth * row + 12}">{text}</text></g>'
                )
                draw(kid, x, depth + 1)
            x += w

    draw(tree, 0.0, 0)
    height = 40 + (depth_max + 1) * row
    svg.write_text(
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height}" '
        f'font-family="monospace" font-size="11">'
        f'<text x="4" y="18" font-size="14">{html.escape(title)}: {int(tree["w"])} samples</text>'
        + "".join(rects)
        + "</svg>\n"
    )
