"""Smoke test for bench.compare: one short run yields rocketrio rows with figures and, for each peer, either a
measurement or a skip reason (never an invented number). Nothing is installed by the test (``--no-install``)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.compare import drivers, servers
from bench.compare.drivers import Measurement
from bench.load.cluster import create_topics
from broker.embedded import EmbeddedCluster
from client import Message, Producer
from tests.conftest import SMALL_STORE

ROOT = Path(__file__).resolve().parents[2]


def test_a_short_comparison_reports_rocketrio_and_measures_or_skips_each_peer(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "bench.compare", "--duration", "0.5", "--max-messages", "2000", "--no-install"]
    argv += ["--drain-timeout", "10", "--only", "redis", "--out", str(tmp_path)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["system"] for r in rows] == [
        "rocketrio SYNC_FLUSH",
        "redis appendfsync always",
        "rocketrio ASYNC_FLUSH",
        "redis appendfsync everysec",
        "rocketrio SYNC_MASTER + slave",
        "redis + replica, WAIT 1",
    ]
    for row in rows:
        if row["system"].startswith("rocketrio"):
            assert row["published"] > 0 and row["consumed"] >= row["published"]
            assert row["drained"] and "drain_incomplete" not in row
        elif "skipped" in row:
            assert row["skipped"]
        else:
            assert row["published"] > 0 and row["consumed"] == row["published"]
            assert row["publish_ratio"] > 0
    if servers.find_binary("redis-server") and importlib.util.find_spec("redis"):
        assert all("skipped" not in r for r in rows), rows
    assert json.loads((tmp_path / "compare.json").read_text())["rows"] == rows
    if importlib.util.find_spec("matplotlib"):
        assert (tmp_path / "compare.png").read_bytes().startswith(b"\x89PNG")


def test_a_drain_cut_short_by_its_timeout_is_flagged() -> None:
    cut = Measurement(100, 1.0, 1.0, 2.0, consumed=60, consume_seconds=20.0, expected=100)
    assert (cut.drained, cut.consume_rps) == (False, 3.0)
    assert Measurement(100, 1.0, 1.0, 2.0, consumed=101, consume_seconds=2.0, expected=101).drained


def test_a_missing_peer_binary_is_a_reason_not_a_number() -> None:
    assert servers.missing("no-such-broker-server") == (
        "no-such-broker-server is not installed (package no-such-broker-server)"
    )


def test_the_publishers_cpu_is_measured_over_what_was_acknowledged() -> None:
    argv = [sys.executable, "-m", "bench.compare.publish_cpu", "--seconds", "0.5", "--inflight", "4"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    (row,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert row["published"] > 0 and row["publish_rps"] > 0
    assert row["client_us"] > 0 and row["broker_us"] > 0


async def test_a_rocketrio_publish_answered_other_than_send_ok_fails_the_row(tmp_path: Path) -> None:
    """A SYNC_MASTER without its slave answers SLAVE_NOT_AVAILABLE: no second process has the message, so the row
    fails, as Redis' ``WAIT`` that no replica answered does (drivers.redis_replicated): at the driver's warm-up send
    and inside the publish loop, which raises the send's own error (the row's reason), not an ExceptionGroup."""
    async with EmbeddedCluster(tmp_path / "c", broker_role="SYNC_MASTER", **SMALL_STORE) as cluster:
        await create_topics(cluster.broker_addr, [drivers.TOPIC], 4)
        w = drivers.Workload(size=16, inflight=2, duration=10.0, max_messages=10, drain_timeout=10.0)
        with pytest.raises(RuntimeError, match="SLAVE_NOT_AVAILABLE"):
            await drivers.rocketrio(cluster.namesrv_addr, w)
        async with Producer("bench_compare_pg", cluster.namesrv_addr) as producer:
            with pytest.raises(RuntimeError, match="SLAVE_NOT_AVAILABLE"):
                await drivers.publish_loop(lambda: drivers.send_ok(producer, Message(drivers.TOPIC, b"r")), w)
