"""The store's flush and clean-up settings (MessageStoreConfig's names) from ``mqbroker -c``: they reach the store,
GET_BROKER_CONFIG shows them, and UPDATE_BROKER_CONFIG changes the running store's where Java reads them live (the
flush services at every round, the clean services at every pass), the others only in the file."""

from __future__ import annotations

from pathlib import Path

import trio

from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.java_properties import parse_properties
from tests.broker.helpers import broker_from_conf, create_topic_request
from tests.processors.conftest import send_request

SETTINGS = {
    "flushIntervalCommitLog": "700",
    "flushCommitLogLeastPages": "8",
    "flushCommitLogThoroughInterval": "20000",
    "flushCommitLogTimed": "false",
    "flushIntervalConsumeQueue": "1500",
    "flushConsumeQueueLeastPages": "3",
    "flushConsumeQueueThoroughInterval": "30000",
    "checkCRCOnRecover": "false",
    "cleanResourceInterval": "5000",
    "deleteConsumeQueueFilesInterval": "50",
    "destroyMapedFileIntervalForcibly": "60000",
}


async def test_flush_and_clean_settings_from_the_conf_file_reach_the_store_and_are_shown(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\n" + "".join(f"{k}={v}\n" for k, v in SETTINGS.items()))
    async with broker_from_conf(conf, tmp_path / "store") as (controller, addr), RemotingClient() as client:
        store = controller.context.store.config
        assert (store.flush_interval_commit_log, store.flush_commit_log_least_pages) == (700, 8)
        assert (store.flush_commit_log_thorough_interval, store.flush_commit_log_timed) == (20_000, False)
        assert (store.flush_interval_consume_queue, store.flush_consume_queue_least_pages) == (1500, 3)
        assert store.flush_consume_queue_thorough_interval == 30_000
        assert store.check_crc_on_recover is False
        assert (store.clean_resource_interval, store.delete_consume_queue_files_interval) == (5000, 50)
        assert store.destroy_maped_file_interval_forcibly == 60_000
        shown = bytes((await client.invoke(addr, request(RequestCode.GET_BROKER_CONFIG), 5)).body).decode()
        props = parse_properties(shown)
        assert {key: props[key] for key in SETTINGS} == SETTINGS


async def test_flush_settings_are_live_and_clean_resource_interval_waits_for_a_restart(tmp_path: Path) -> None:
    """FlushRealTimeService and FlushConsumeQueueService read their settings at every round, CleanConsumeQueueService
    its interval at every pass: UPDATE_BROKER_CONFIG changes them in the running store. cleanResourceInterval is the
    period Java's scheduler was started with, checkCRCOnRecover is read by the recovery: both go to the file only."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\n")
    async with broker_from_conf(conf, tmp_path / "store") as (controller, addr), RemotingClient() as client:
        body = (
            b"flushCommitLogLeastPages=0\nflushIntervalCommitLog=200\nflushConsumeQueueLeastPages=1\n"
            b"deleteConsumeQueueFilesInterval=0\ncleanResourceInterval=1000\ncheckCRCOnRecover=false\n"
        )
        answer = await client.invoke(addr, request(RequestCode.UPDATE_BROKER_CONFIG, body=body), 5)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        store = controller.context.store.config
        assert (store.flush_commit_log_least_pages, store.flush_interval_commit_log) == (0, 200)
        assert (store.flush_consume_queue_least_pages, store.delete_consume_queue_files_interval) == (1, 0)
        assert (store.clean_resource_interval, store.check_crc_on_recover) == (10_000, True)
        assert controller.context.config.clean_resource_interval == 1000
    written = parse_properties(conf.read_text())
    assert (written["cleanResourceInterval"], written["checkCRCOnRecover"]) == ("1000", "false")


#: Upper bound for a condition to become true. A hang guard, not a performance threshold: the wait ends as soon as
#: the condition holds, and a timed loop would only flush after the 600 s interval.
HANG_GUARD = 60.0


async def test_flush_commit_log_timed_false_syncs_each_send_without_waiting_the_interval(tmp_path: Path) -> None:
    """``flushCommitLogTimed=false`` from ``-c``: each SEND_MESSAGE over the socket wakes the CommitLog flush
    (Java's ``waitForRunning`` woken by the put), so with ``flushCommitLogLeastPages=0`` every acknowledged message
    is synced at once, while ``flushIntervalCommitLog`` is ten minutes (timed, the loop sleeps all of it)."""
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "listenPort=0\nlistenHost=127.0.0.1\nflushCommitLogTimed=false\nflushIntervalCommitLog=600000\n"
        "flushCommitLogLeastPages=0\nflushCommitLogThoroughInterval=600000\nflushIntervalConsumeQueue=600000\n"
    )
    async with broker_from_conf(conf, tmp_path / "store") as (controller, addr), RemotingClient() as client:
        created = await client.invoke(addr, create_topic_request("TimedOff"), 5)
        assert created.code == ResponseCode.SUCCESS, created.remark
        store = controller.context.store
        rounds = store.flush_service.rounds
        for i in range(3):
            sent = await client.invoke(addr, send_request("TimedOff", f"message {i}".encode()), 5)
            assert sent.code == ResponseCode.SUCCESS, sent.remark
            with trio.fail_after(HANG_GUARD):  # the round is counted back on the loop, after its sync moved the mark
                while store.flush_watermark < store.max_phy_offset or store.flush_service.rounds < rounds + i + 1:
                    await trio.sleep(0.01)
        assert store.flush_service.rounds >= rounds + 3


async def test_an_updated_sync_flush_timeout_reaches_the_running_store(tmp_path: Path) -> None:
    """4.9.8's CommitLog builds each SYNC_FLUSH put's GroupCommitRequest with ``getSyncFlushTimeout()`` read from the
    live MessageStoreConfig (store/src/main/java/org/apache/rocketmq/store/CommitLog.java ``handleDiskFlush``), which
    Configuration.update sets: the next put waits the new time. The store kept its start-up timeout."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\nflushDiskType=SYNC_FLUSH\n")
    async with broker_from_conf(conf, tmp_path / "store") as (controller, addr), RemotingClient() as client:
        update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"syncFlushTimeout=1234\n")
        answer = await client.invoke(addr, update, 5)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert controller.context.store.config.sync_flush_timeout == 1234
        assert (await client.invoke(addr, create_topic_request("FlushTopic", queues=1), 5)).code == ResponseCode.SUCCESS
        sent = await client.invoke(addr, send_request("FlushTopic", b"synced"), 5)
        assert sent.code == ResponseCode.SUCCESS, sent.remark
