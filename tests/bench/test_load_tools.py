"""bench.load: short real runs against an embedded cluster produce valid summaries (no timing assertions: the
figures are whatever this machine gives), what counts as a success, and what the measured window holds."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from bench import client as bench_client
from bench import replication
from bench.load import run as load_run
from bench.load.cluster import create_topics
from bench.load.producer import Senders
from bench.load.producer import build_parser as producer_parser
from bench.load.producer import main as producer_main
from bench.load.producer import make_load as make_producer_load
from bench.load.profile import ProfileError, render_flamegraph, top_frames
from bench.load.stats import LoadStats, percentile
from broker.embedded import EmbeddedCluster
from tests.conftest import SMALL_STORE

ROOT = Path(__file__).resolve().parents[2]


def run_tool(tool: str, out: Path, *extra: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    argv = [sys.executable, "-m", f"bench.load.{tool}", "--duration", "1", "--quiet", "--out", str(out), *extra]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=90, check=True)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines, done.stderr
    assert lines[-1]["type"] == "summary"
    return lines, json.loads((out / f"{tool}.json").read_text())


def assert_valid_summary(summary: dict[str, Any], tool: str) -> None:
    assert summary["tool"] == tool
    result = summary["result"]
    assert result["ok"] > 0
    assert result["failed"] == 0, summary["last_error"]
    assert result["p50_ms"] <= result["p99_ms"] <= result["max_ms"]
    env = summary["environment"]
    assert env["python"] and env["cpu_count"] and env["versions"]["trio"]
    assert env["flush_disk_type"] == summary["settings"]["flush_disk_type"]


def test_a_one_second_sync_producer_run_writes_a_valid_summary(tmp_path: Path) -> None:
    lines, summary = run_tool("producer", tmp_path, "--keys", "--topics", "2")
    assert_valid_summary(summary, "producer")
    assert any(line["type"] == "window" for line in lines)
    assert summary["settings"]["mode"] == "sync"
    start, end = summary["window_monotonic"]  # what bench.scale reads the brokers' CPU over
    assert start < end


@pytest.mark.parametrize("mode", ["async", "oneway"])
def test_async_and_oneway_producer_runs_count_their_sends(tmp_path: Path, mode: str) -> None:
    _, summary = run_tool("producer", tmp_path, "--mode", mode, "--inflight", "16")
    assert_valid_summary(summary, "producer")


def test_a_batch_producer_under_sync_flush_counts_every_message_of_a_batch(tmp_path: Path) -> None:
    _, summary = run_tool("producer", tmp_path, "--batch", "8", "--flush-disk-type", "SYNC_FLUSH", "--messages", "800")
    assert_valid_summary(summary, "producer")
    assert summary["result"]["ok"] % 8 == 0


def test_the_consumer_measures_end_to_end_latency_of_what_it_receives(tmp_path: Path) -> None:
    _, summary = run_tool("consumer", tmp_path, "--messages", "500")
    assert_valid_summary(summary, "consumer")
    assert summary["result"]["ok"] == 500
    assert summary["result"]["p50_ms"] >= 0


def test_a_prefilled_consumer_run_receives_exactly_the_prefill_and_reports_both_cpus(tmp_path: Path) -> None:
    batch = ("--pull-batch-size", "64", "--max-transfer-count", "64")
    _, summary = run_tool("consumer", tmp_path, "--prefill", "300", "--duration", "30", *batch)
    assert_valid_summary(summary, "consumer")
    assert summary["result"]["ok"] == 300
    assert summary["settings"]["prefill"] == 300
    assert summary["settings"]["max_transfer_count"] == 64
    assert summary["load_cpu_seconds"] > 0
    assert summary["broker_cpu_seconds"] is not None


def test_profile_writes_a_flamegraph_svg_and_speedscope_of_the_broker(tmp_path: Path) -> None:
    _, summary = run_tool("producer", tmp_path, "--profile")
    profile = summary["profile"]
    if "error" in profile:
        # py-spy (a dev dependency) profiles the broker as its child when it may not attach, so only a kernel that
        # lets it read no process at all stops it: a skip here, a failure in CI, which must prove the profile.
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"py-spy cannot profile in CI: {profile['error']}")
        pytest.skip(f"py-spy cannot profile here: {profile['error']}")
    svg = Path(profile["svg"])
    assert svg.read_text().startswith("<svg")
    assert json.loads(Path(profile["speedscope"]).read_text())["profiles"]
    assert profile["top_frames"]


def test_percentiles_and_windows_follow_the_recorded_latencies() -> None:
    stats = LoadStats(messages_per_sample=2)
    for ms in (1.0, 2.0, 3.0, 4.0):
        stats.record(ms)
    stats.fail("boom")  # a failed batch of 2: two messages failed, as two succeed per recorded batch
    window = stats.take_window(2.0)
    assert (window.ok, window.failed, window.max_ms, window.tps) == (8, 2, 4.0, 4.0)
    assert stats.take_window(1.0).ok == 0
    assert stats.total(2.0).ok == 8
    assert percentile([], 0.5) == 0.0


def test_nothing_recorded_after_the_window_closed_counts() -> None:
    stats = LoadStats()
    stats.record(1.0)
    stats.close()
    stats.record(2.0)  # a consumer's listener still running while the consumer shuts down
    stats.fail("late")
    assert (stats.total(1.0).ok, stats.failed, stats.last_error) == (1, 0, None)
    assert stats.take_window(1.0).ok == 1


def test_a_prefilled_consumer_counts_no_receipt_after_its_window(tmp_path: Path) -> None:
    """The consumer's listener goes on receiving after the window (while the live view takes its last line and the
    consumer shuts down, letting its submitted consume tasks finish): none of that counts in the summary's ``ok`` and
    ``tps``. The deadline ends the window mid-drain, so receipts go on past it; every message the summary counts must
    lie in the window, whose seconds the live view's window lines cover."""
    argv = [sys.executable, "-m", "bench.load.consumer", "--prefill", "50000", "--duration", "0.05", "--quiet"]
    done = subprocess.run([*argv, "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    (summary,) = [line for line in lines if line["type"] == "summary"]
    in_windows = sum(line["ok"] for line in lines if line["type"] == "window")
    assert summary["result"]["ok"] <= in_windows, (summary["result"], in_windows)


@pytest.mark.parametrize(
    "pct",
    [
        pytest.param(lambda v, q: percentile(sorted(v), q), id="bench.load.stats.percentile"),
        pytest.param(bench_client.percentile, id="bench.client.percentile"),
        pytest.param(lambda v, q: replication.pct(sorted(v), q * 100), id="bench.replication.pct"),
    ],
)
def test_nearest_rank_percentiles_are_not_one_rank_too_high(pct: Any) -> None:
    """Nearest rank is the ceil(q * n)-th value, not the (floor(q * n) + 1)-th: they differ when q * n is whole."""
    hundred = [float(i) for i in range(1, 101)]
    assert pct(hundred, 0.99) == 99.0  # 99 % of the values are <= 99; the maximum would be one rank too high
    assert pct([float(i) for i in range(1, 11)], 0.5) == 5.0
    assert pct([1.0, 2.0], 0.5) == 1.0
    assert pct(hundred, 0.07) == 7.0  # 0.07 * 100 is 7.000000000000001 in floating point: still the 7th
    assert pct(hundred, 0.0) == 1.0 and pct(hundred, 1.0) == 100.0


def _producer(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "bench.load.producer", "--duration", "3", "--quiet", "--out", str(out), *extra]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=90)


#: 8 x 128-byte bodies exceed a broker's maxMessageSize of 600: each batch is refused (MESSAGE_ILLEGAL).
REFUSED_BATCHES = ("--batch", "8", "--messages", "80", "--broker-property", "maxMessageSize=600")


def test_failed_batches_are_counted_in_messages_like_the_successes(tmp_path: Path) -> None:
    _producer(tmp_path, *REFUSED_BATCHES)
    result = json.loads((tmp_path / "producer.json").read_text())["result"]
    assert (result["ok"], result["failed"]) == (0, 80), result


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_send_answered_slave_not_available_is_a_failure_not_an_ok(tmp_path: Path, mode: str) -> None:
    """A SYNC_MASTER without a slave answers every send SLAVE_NOT_AVAILABLE (stored, not replicated): ``ok`` (and so
    ``tps``, what bench.targets reads) counts SEND_OK answers only, in the sync and the async send paths."""
    argv = ["--broker-property", "brokerRole=SYNC_MASTER", "--messages", "20", "--duration", "20", "--quiet"]
    summary = producer_main([*argv, "--mode", mode, "--inflight", "4", "--out", str(tmp_path)])
    assert (summary["result"]["ok"], summary["result"]["failed"]) == (0, 20), summary["result"]
    assert "SLAVE_NOT_AVAILABLE" in summary["last_error"]


def test_a_run_where_every_send_failed_is_not_reported_as_a_measurement(tmp_path: Path) -> None:
    """bench.targets and bench.scale take a zero exit status as "measured": 0 msg/s must not be a figure."""
    done = _producer(tmp_path, *REFUSED_BATCHES)
    summary = json.loads((tmp_path / "producer.json").read_text())
    assert summary["result"]["ok"] == 0 and summary["result"]["failed"] > 0
    assert summary["error"] and done.returncode == 1
    assert "no message succeeded" in done.stderr


def test_a_spawned_profile_still_reports_the_measured_brokers_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """py-spy refused to attach (a kernel without ptrace rights): the window runs against a broker started under
    py-spy, and the broker CPU is that process's, not the closed first broker's."""

    class NoPtrace(load_run.BrokerProfiler):
        def start(self) -> None:
            raise ProfileError("py-spy could not attach: Operation not permitted")

    monkeypatch.setattr(load_run, "BrokerProfiler", NoPtrace)
    args = producer_parser().parse_args(["--quiet", "--profile", "--duration", "0.3", "--out", str(tmp_path)])

    @contextlib.asynccontextmanager
    async def load(namesrv: str, stats: LoadStats) -> AsyncIterator[load_run.Run]:
        yield lambda budget: trio.sleep(0.3)

    summary = load_run.run_tool("spawned", args, {}, load)
    assert summary["profile"] is not None and summary["profile"].get("mode") == "spawn", summary["profile"]
    assert summary["broker_cpu_seconds"] is not None


def test_the_window_opens_after_the_loads_setup_and_closes_before_its_shutdown(tmp_path: Path) -> None:
    """run_tool measures only the run a load yields: the --duration deadline (with the clock and the CPU readings)
    starts once the setup is done, and the window's seconds end before the shutdown (each a 0.2 s sleep)."""
    marks: dict[str, float] = {}

    @contextlib.asynccontextmanager
    async def load(namesrv: str, stats: LoadStats) -> AsyncIterator[load_run.Run]:
        await trio.sleep(0.2)  # a slow start-up
        marks["ready"] = trio.current_time()

        async def run(budget: load_run.Budget) -> None:
            marks["deadline"] = budget.deadline
            stats.record(1.0)

        yield run
        await trio.sleep(0.2)  # a slow shutdown
        marks["closed"] = trio.current_time()

    args = producer_parser().parse_args(["--quiet", "--duration", "5", "--out", str(tmp_path)])
    seconds = load_run.run_tool("window", args, {}, load)["result"]["seconds"]
    assert marks["deadline"] >= marks["ready"] + 5
    assert seconds <= marks["closed"] - 0.2 - marks["ready"] + 0.0005, marks  # 0.0005: the summary's rounding


async def test_the_producer_tools_setup_starts_every_producer_with_its_routes(tmp_path: Path) -> None:
    """The warm-up sends belong to the setup: once it is done every producer has each topic's route, and the run
    (the window) counts only its own sends."""
    args = producer_parser().parse_args(["--connections", "2", "--topics", "2"])
    topics = load_run.topic_names(args)
    stats = LoadStats()
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE) as cluster:
        await create_topics(cluster.broker_addr, topics, args.queues)
        async with make_producer_load(args)(cluster.namesrv_addr, stats) as run:
            assert isinstance(run, Senders) and len(run.producers) == 2
            assert all(producer.cached_publish_info(topic) for producer in run.producers for topic in topics)
            assert stats.messages == 0
            await run(load_run.Budget(20, 8))
    assert (stats.messages, stats.failed) == (8, 0)


def test_options_that_would_be_ignored_are_refused() -> None:
    with pytest.raises(SystemExit) as batch:  # --batch sends sync batches: it cannot honour --mode async
        producer_main(["--batch", "8", "--mode", "async"])
    assert batch.value.code == 2
    namesrv = ["--namesrv", "127.0.0.1:1", "--broker", "127.0.0.1:2"]
    foreign = producer_parser().parse_args([*namesrv, "--flush-disk-type", "SYNC_FLUSH"])
    with pytest.raises(SystemExit, match="--flush-disk-type"):  # that broker flushes as it was configured
        load_run.check_target(foreign)
    own = producer_parser().parse_args(namesrv)
    load_run.check_target(own)
    assert load_run.broker_settings(own) == {"flush_disk_type": None, "max_transfer_count": None}
    embedded = producer_parser().parse_args([])
    assert load_run.broker_settings(embedded) == {"flush_disk_type": "ASYNC_FLUSH", "max_transfer_count": 32}


def test_top_frames_and_flamegraph_read_a_speedscope_file(tmp_path: Path) -> None:
    speedscope = tmp_path / "p.json"
    frames = [{"name": "main", "file": "a.py", "line": 1}, {"name": "hot", "file": "b.py", "line": 2}]
    profile = {"type": "sampled", "samples": [[0, 1], [0, 1], [0, 1], [0]], "weights": [1, 1, 1, 1]}
    speedscope.write_text(json.dumps({"shared": {"frames": frames}, "profiles": [profile]}))
    top = top_frames(speedscope)
    assert (top[0].name, top[0].self_share, top[0].total_share) == ("hot", 0.75, 0.75)
    assert (top[1].name, top[1].total_share) == ("main", 1.0)
    svg = tmp_path / "p.svg"
    render_flamegraph(speedscope, svg)
    assert "hot (b.py:2)" in svg.read_text()
