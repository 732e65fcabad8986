"""The charts' day files, as rocketmq-dashboard's ``DashboardCollectTask``: every sample of a day is kept in
``<dataPath>/dashboard<yyyy-MM-dd>.json`` (brokers) and ``..._topic.json`` (topics), one JSON object of lines by key;
``?date=`` reads a past day's files, and today's samples survive a restart. The points' wall clock is the sampler's
``wall_ms``, set here to chosen days."""

from __future__ import annotations

import json
import time
from pathlib import Path

import trio

from broker.embedded import EmbeddedCluster
from client import Message, Producer
from dashboard.history import DayFiles
from tests.client.helpers import create_topic
from tests.dashboard.conftest import Dash, open_dash

DAY_ONE = "2026-03-04"
DAY_TWO = "2026-03-05"


def local_noon_ms(day: str) -> int:
    """Noon of ``day`` in the local time zone, the one rocketmq-dashboard's ``SimpleDateFormat`` names days in."""
    return int(time.mktime(time.strptime(day + " 12:00:00", "%Y-%m-%d %H:%M:%S")) * 1000)


def on_day(dash: Dash, day: str, minute: int = 0) -> int:
    at = local_noon_ms(day) + minute * 60_000
    dash.app.state.sampler.wall_ms = lambda: at
    return at


async def sample_twice_with_puts(dash: Dash, day: str, topic: str) -> None:
    on_day(dash, day)
    await dash.app.state.sampler.sample_once()
    async with Producer("history-pg", dash.cluster.namesrv_addr) as producer:
        for _ in range(5):
            await producer.send(Message(topic, b"x"))
    on_day(dash, day, minute=1)
    await dash.app.state.sampler.sample_once()


async def test_a_days_samples_are_written_in_rocketmq_dashboards_day_files(
    embedded_cluster: EmbeddedCluster, nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Java's ``saveData``: ``dashboard<day>.json`` maps ``brokerName:brokerId`` to ``"<ms>,<tps>"`` lines,
    ``dashboard<day>_topic.json`` maps a topic to ``"<ms>,<inTps>,<inCount>,<outTps>,<outCount>"`` lines."""
    await create_topic(embedded_cluster.namesrv_addr, "HistoryTopic", queues=2)
    async for dash in open_dash(embedded_cluster, nursery, data_path=str(tmp_path)):
        await sample_twice_with_puts(dash, DAY_ONE, "HistoryTopic")
    brokers = json.loads((tmp_path / f"dashboard{DAY_ONE}.json").read_text())
    lines = brokers["broker-a:0"]
    assert [int(line.split(",")[0]) for line in lines] == [local_noon_ms(DAY_ONE), local_noon_ms(DAY_ONE) + 60_000]
    assert all(float(line.split(",")[1]) >= 0 for line in lines)
    topics = json.loads((tmp_path / f"dashboard{DAY_ONE}_topic.json").read_text())
    [line] = topics["HistoryTopic"]
    ms, in_tps, in_count, out_tps, out_count = line.split(",")
    assert int(ms) == local_noon_ms(DAY_ONE) + 60_000 and float(in_tps) > 0 and int(in_count) == 5
    assert float(out_tps) == 0 and int(out_count) == 0


async def test_a_past_day_is_read_from_its_files_and_today_survives_a_restart(
    embedded_cluster: EmbeddedCluster, nursery: trio.Nursery, tmp_path: Path
) -> None:
    """``/dashboard/broker.query?date=`` and ``topic.query?date=``: a past day from its files, today (no date)
    from memory; a restart reads today's files back, as Java's ``writeFile`` merges the file and memory."""
    await create_topic(embedded_cluster.namesrv_addr, "PastTopic", queues=1)
    async for dash in open_dash(embedded_cluster, nursery, data_path=str(tmp_path)):
        await sample_twice_with_puts(dash, DAY_ONE, "PastTopic")
        on_day(dash, DAY_TWO)
        await dash.app.state.sampler.sample_once()
        past = await dash.get(f"/api/charts/brokers?date={DAY_ONE}")
        assert len(past["series"]["broker-a:0"]["t"]) == 2 and past["date"] == DAY_ONE
        assert len((await dash.get("/api/charts/brokers"))["series"]["broker-a:0"]["t"]) == 1
        topic = await dash.get(f"/api/charts/topics?date={DAY_ONE}&topic=PastTopic")
        assert topic["series"]["put"][0] > 0 and "PastTopic" in topic["topics"]
        assert (await dash.get("/api/charts/brokers?date=2020-01-01"))["series"] == {}
        await dash.get("/api/charts/brokers?date=../../etc/passwd", status=400)
    async for dash in open_dash(embedded_cluster, nursery, data_path=str(tmp_path)):
        on_day(dash, DAY_TWO, minute=1)
        assert len((await dash.get("/api/charts/brokers"))["series"]["broker-a:0"]["t"]) == 1
        await dash.app.state.sampler.sample_once()
        assert len((await dash.get("/api/charts/brokers"))["series"]["broker-a:0"]["t"]) == 2


async def test_a_past_day_is_read_once_and_each_query_reads_only_its_own_file(
    embedded_cluster: EmbeddedCluster, nursery: trio.Nursery, tmp_path: Path
) -> None:
    """A past day's files never change, so each is parsed once (a day's topic file is tens of megabytes at
    1,000 topics); ``broker.query`` reads only the brokers' file, ``topic.query`` only the topics'."""
    at = local_noon_ms(DAY_ONE)
    files = DayFiles(tmp_path)
    files.write(DAY_ONE, {"broker-z:0": [f"{at},3.0,4.0,1.0"]}, {"OnceTopic": [f"{at},4.0,240,1.0,60"]})
    files.topics_path(DAY_ONE).write_text("{not json")  # a query that read it would log and answer nothing
    async for dash in open_dash(embedded_cluster, nursery, data_path=str(tmp_path)):
        on_day(dash, DAY_TWO)
        assert list((await dash.get(f"/api/charts/brokers?date={DAY_ONE}"))["series"]) == ["broker-z:0"]
        files.write(DAY_ONE, {}, {"OnceTopic": [f"{at},4.0,240,1.0,60"]})
        assert (await dash.get(f"/api/charts/topics?date={DAY_ONE}"))["topics"] == ["OnceTopic"]
        files.brokers_path(DAY_ONE).unlink()
        files.topics_path(DAY_ONE).unlink()
        assert list((await dash.get(f"/api/charts/brokers?date={DAY_ONE}"))["series"]) == ["broker-z:0"]
        assert (await dash.get(f"/api/charts/topics?date={DAY_ONE}"))["topics"] == ["OnceTopic"]


def test_a_day_file_in_javas_layout_with_spaces_reads_key_by_key(tmp_path: Path) -> None:
    """The reader parses one key at a time; a file written by another writer (spaces, newlines) reads the same."""
    files = DayFiles(tmp_path)
    files.brokers_path(DAY_ONE).write_text('{ "b:0" : [ "1,2" ,"3,4" ] ,\n "c:1": [] }')
    files.topics_path(DAY_ONE).write_text("{}")
    assert files.read_brokers(DAY_ONE) == {"b:0": ["1,2", "3,4"], "c:1": []}
    assert files.read_topics(DAY_ONE) == {}


async def test_a_damaged_day_file_is_kept_aside_and_a_stale_temporary_file_is_no_obstacle(
    embedded_cluster: EmbeddedCluster, nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Today's file that does not parse is moved to ``<file>.bad`` before the day is written again (it was read as
    empty and overwritten, its samples lost for good); each write goes through a temporary file of its own, so a
    ``<file>.tmp`` left by another dashboard sharing the data path (here one that cannot be written) is no
    obstacle."""
    files = DayFiles(tmp_path)
    files.topics_path(DAY_ONE).write_text('{"Damaged": ["1,2,3,4,5"')
    files.brokers_path(DAY_ONE).with_name(files.brokers_path(DAY_ONE).name + ".tmp").mkdir()
    async for dash in open_dash(embedded_cluster, nursery, data_path=str(tmp_path)):
        on_day(dash, DAY_ONE)
        await dash.app.state.sampler.sample_once()
    assert (tmp_path / f"dashboard{DAY_ONE}_topic.json.bad").read_text() == '{"Damaged": ["1,2,3,4,5"'
    assert "broker-a:0" in files.read_brokers(DAY_ONE)
    assert "Damaged" not in files.read_topics(DAY_ONE)
