"""GET_BROKER_HA_STATUS (907) and ``mqadmin haStatus``, as RocketMQ 5.3.3: an embedded master and slave on
127.0.0.1 (real sockets) answer their replication state, a lone master an empty master view, and the command prints
Java's lines."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import trio
from click.testing import CliRunner

from broker.embedded import EmbeddedCluster
from client import Admin, Message, Producer
from client.mqadmin import main as mqadmin
from client.mqadmin_ha import _print_status
from client.mqadmin_support import Output
from processors.ha_status import ha_runtime_info
from remoting.client import RemotingClient
from remoting.codec.bodies.ha import HAClientRuntimeInfo, HARuntimeInfo
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from store.store_config import BrokerRole
from tests.conftest import SMALL_STORE
from tests.replication.ha_helpers import ha_store, reported, wait_until
from tests.store.store_helpers import message

TOPIC = "HaStatusTopic"


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[EmbeddedCluster]:
    async with EmbeddedCluster(tmp_path / "c", slaves=1, broker_role="SYNC_MASTER", **SMALL_STORE) as cluster:
        async with Admin(cluster.namesrv_addr) as admin:
            await admin.create_topic(TOPIC, broker_addr=cluster.broker_addr)
        async with Producer("pg", cluster.namesrv_addr) as producer:
            await producer.send(Message(TOPIC, b"x" * 1000))
        await cluster.wait_replicated()
        yield cluster


async def _raw_status(addr: str) -> dict[str, Any]:
    async with RemotingClient() as client:
        answer = await client.invoke(addr, request(RequestCode.GET_BROKER_HA_STATUS), 5)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    body: dict[str, Any] = json.loads(bytes(answer.body))
    return body


async def _synced_master_status(addr: str) -> dict[str, Any]:
    """The master's body once its slave acknowledged the whole log (the report follows the copy)."""
    with trio.fail_after(30):
        while True:
            body = await _raw_status(addr)
            connections = body["haConnectionInfo"]
            if connections and connections[0]["diff"] == 0:
                return body
            await trio.sleep(0.05)


async def test_master_and_slave_answer_their_replication_state(pair: EmbeddedCluster) -> None:
    end = pair.controller.context.store.commitlog.max_offset
    master = await _synced_master_status(pair.broker_addr)
    assert master["master"] is True and master["masterCommitLogMaxOffset"] == end
    assert master["inSyncSlaveNums"] == 1
    (connection,) = master["haConnectionInfo"]
    assert connection["slaveAckOffset"] == end and connection["inSync"] is True
    assert connection["transferFromWhere"] == end and connection["addr"].startswith("127.0.0.1:")
    assert set(connection) == {"addr", "slaveAckOffset", "diff", "inSync", "transferredByteInSecond",
                               "transferFromWhere"}  # fmt: skip
    slave = await _raw_status(pair.slave_addrs[0])
    assert slave["master"] is False
    client = slave["haClientRuntimeInfo"]
    assert client["masterAddr"] == pair.controller.context.config.ha_server_addr
    assert client["maxOffset"] == end
    assert client["lastReadTimestamp"] > 0 and client["lastWriteTimestamp"] > 0
    assert set(client) == {"masterAddr", "transferredByteInSecond", "maxOffset", "lastReadTimestamp",
                           "lastWriteTimestamp", "masterFlushOffset"}  # fmt: skip


async def test_a_lone_master_answers_an_empty_master_view(tmp_path: Path) -> None:
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE) as cluster:
        body = await _raw_status(cluster.broker_addr)
    assert body["master"] is True and body["haConnectionInfo"] == [] and body["inSyncSlaveNums"] == 0


async def test_admin_decodes_the_status(pair: EmbeddedCluster) -> None:
    await _synced_master_status(pair.broker_addr)
    async with Admin(pair.namesrv_addr) as admin:
        info = await admin.ha_status(pair.broker_addr)
        slave = await admin.ha_status(pair.slave_addrs[0])
    assert info.master and len(info.ha_connection_info) == 1 and info.in_sync_slave_nums == 1
    assert info.ha_connection_info[0].diff == 0 and info.ha_connection_info[0].in_sync
    assert not slave.master and slave.ha_client_runtime_info.max_offset == info.master_commit_log_max_offset


def _mqadmin_text(*args: str) -> str:
    result = CliRunner().invoke(mqadmin, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


async def test_mqadmin_ha_status_prints_javas_lines(pair: EmbeddedCluster) -> None:
    body = await _synced_master_status(pair.broker_addr)
    ns, addr = pair.namesrv_addr, pair.broker_addr
    end = body["masterCommitLogMaxOffset"]
    text = await trio.to_thread.run_sync(_mqadmin_text, "haStatus", "-n", ns, "-b", addr)
    lines = text.splitlines()
    assert lines[:5] == ["", f"#MasterAddr\t{addr}", f"#MasterCommitLogMaxOffset\t{end}", "#SlaveNum\t1",
                         "#InSyncSlaveNum\t1"]  # fmt: skip
    assert lines[5].split() == ["#SlaveAddr", "#SlaveAckOffset", "#Diff", "#TransferSpeed(KB/s)", "#Status",
                                "#TransferFromWhere"]  # fmt: skip
    row = lines[6]
    assert row.split()[1:3] == [str(end), "0"] and row.split()[4:] == ["OK", str(end)]
    # -c lists the cluster's masters only.
    assert await trio.to_thread.run_sync(_mqadmin_text, "haStatus", "-n", ns, "-c", "DefaultCluster") == text
    slave_text = await trio.to_thread.run_sync(_mqadmin_text, "haStatus", "-n", ns, "-b", pair.slave_addrs[0])
    slave_lines = slave_text.splitlines()
    assert slave_lines[:3] == ["", f"#MasterAddr\t{pair.controller.context.config.ha_server_addr}",
                               f"#CommitLogMaxOffset\t{end}"]  # fmt: skip
    assert [line.split("\t")[0] for line in slave_lines[3:]] == [
        "#TransferSpeed(KB/s)",
        "#LastReadTime",
        "#LastWriteTime",
        "#MasterFlushOffset",
    ]


async def test_bytes_per_second_show_a_burst_then_fall_back_to_zero(tmp_path: Path) -> None:
    """The figures are the bytes of the last whole second (RocketMQ's ``FlowMonitor``): a burst shows on both sides
    within a second or two of it, and an idle second after it shows 0 (bounded waits, no timing assertion)."""
    master = ha_store(tmp_path / "master", BrokerRole.ASYNC_MASTER)
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        slave = ha_store(tmp_path / "slave", BrokerRole.SLAVE, master)
        await nursery.start(slave.run)
        await wait_until(lambda: reported(master), what="the slave's first report")
        for i in range(50):
            master.append(message(body=bytes(500), queue_id=0, keys=f"k{i}"))
        (connection,) = master.ha.connections
        client = slave.ha.client
        assert client is not None
        await wait_until(lambda: connection.sent_rate.per_second > 0, what="the master's rate")
        await wait_until(lambda: client.received_rate.per_second > 0, what="the slave's rate")
        await wait_until(lambda: connection.sent_rate.per_second == 0, what="the master's idle second")
        await wait_until(lambda: client.received_rate.per_second == 0, what="the slave's idle second")
        nursery.cancel_scope.cancel()


async def test_mqadmin_ha_status_repeats_with_i_and_prints_help_without_a_target(tmp_path: Path) -> None:
    """``-i`` repeats the listing (``--rounds``, ours, ends it); neither ``-b`` nor ``-c`` prints the options, as
    Java's ``printCommandLineHelp``."""
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE) as cluster:
        ns, addr = cluster.namesrv_addr, cluster.broker_addr
        text = await trio.to_thread.run_sync(
            _mqadmin_text, "haStatus", "-n", ns, "-b", addr, "-i", "0", "--rounds", "2"
        )
        usage = await trio.to_thread.run_sync(_mqadmin_text, "haStatus", "-n", ns)
    assert text.count(f"#MasterAddr\t{addr}\n#MasterCommitLogMaxOffset") == 2 and text.count("#SlaveNum\t0") == 2
    assert "--brokerAddr" in usage and "#MasterAddr" not in usage


def _mqadmin_result(*args: str) -> Any:
    return CliRunner().invoke(mqadmin, list(args), catch_exceptions=False)


@pytest.mark.parametrize("interval", ["-1", "2147484"])
async def test_mqadmin_ha_status_fails_after_one_round_when_the_wait_is_negative(tmp_path: Path, interval: str) -> None:
    """Java sleeps ``flushSecond * 1000`` ms, an ``int``: a negative product (a negative interval, or one past
    2147483 s, which overflows) makes ``Thread.sleep`` throw after the first listing, and the command fails with
    HAStatusSubCommand's line. Ours failed on -1 with its own line and slept 2147484 s (``--rounds 1`` ends it here)."""
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE) as cluster:
        ns, addr = cluster.namesrv_addr, cluster.broker_addr
        result = await trio.to_thread.run_sync(
            _mqadmin_result, "haStatus", "-n", ns, "-b", addr, "-i", interval, "--rounds", "1"
        )
    assert result.exit_code == 1, result.output
    assert result.stdout.count("#MasterAddr") == 1, result.stdout
    assert result.stderr.splitlines()[0] == (
        "org.apache.rocketmq.tools.command.SubCommandException: HAStatusSubCommand command failed"
    ), result.stderr


def test_mqadmin_ha_status_failure_says_javas_line() -> None:
    """A broker that cannot be reached fails the command with HAStatusSubCommand's SubCommandException line, as
    Java's ``execute`` wraps every failure (tools/.../command/ha/HAStatusSubCommand.java)."""
    closed = _closed_address()
    result = _mqadmin_result("haStatus", "-n", closed, "-b", closed)
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[0] == (
        "org.apache.rocketmq.tools.command.SubCommandException: HAStatusSubCommand command failed"
    ), result.stderr


def test_mqadmin_ha_status_with_i_and_no_target_prints_help_every_round() -> None:
    """Java's loop runs ``innerExec`` each round, which prints the help when neither ``-b`` nor ``-c`` is given:
    with ``-i`` the help repeats (ours stopped after one)."""
    result = _mqadmin_result("haStatus", "-n", "127.0.0.1:1", "-i", "0", "--rounds", "3")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("--brokerAddr") == 3, result.stdout


def _closed_address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


async def test_a_slave_that_never_reached_its_master_shows_when_it_started_and_tried(tmp_path: Path) -> None:
    """5.3.3's DefaultHAClient starts both timestamps at its creation and sets ``lastReadTimestamp`` at each connect
    attempt (store/src/main/java/org/apache/rocketmq/store/ha/DefaultHAClient.java): a slave that never reached its
    master shows times, not 0. Ours said 0 (printed ``-``)."""
    slave = ha_store(tmp_path / "slave", BrokerRole.SLAVE, ha_master_address=_closed_address())
    async with trio.open_nursery() as nursery:
        await nursery.start(slave.run)
        info = ha_runtime_info(slave.ha).ha_client_runtime_info
        nursery.cancel_scope.cancel()
    assert info.last_read_timestamp > 0 and info.last_write_timestamp > 0, info


async def test_a_slave_whose_session_ended_shows_no_last_read(tmp_path: Path) -> None:
    """DefaultHAClient.closeMaster sets ``lastReadTimestamp`` to 0; the next connect attempt sets it again (after
    the back-off, a minute's tenth here). Ours kept the session's last read."""
    master = ha_store(tmp_path / "master", BrokerRole.ASYNC_MASTER)
    async with trio.open_nursery() as outer:
        async with trio.open_nursery() as inner:
            await inner.start(master.run)
            slave = ha_store(tmp_path / "slave", BrokerRole.SLAVE, master, ha_send_heartbeat_interval=60_000)
            await outer.start(slave.run)
            await wait_until(lambda: reported(master), what="the slave's first report")
            client = slave.ha.client
            assert client is not None
            assert ha_runtime_info(slave.ha).ha_client_runtime_info.last_read_timestamp > 0
            inner.cancel_scope.cancel()
        await wait_until(lambda: not client.connected_to, what="the session's end")
        info = ha_runtime_info(slave.ha).ha_client_runtime_info
        outer.cancel_scope.cancel()
    assert info.last_read_timestamp == 0 and info.last_write_timestamp > 0, info


def test_mqadmin_ha_status_prints_a_zero_time_and_no_master_as_java(capsys: pytest.CaptureFixture[str]) -> None:
    """Java prints ``UtilAll.timeMillisToHumanString2(0)``, the epoch in local time, and a null master as
    ``null`` (ours printed ``-`` for 0)."""
    info = HARuntimeInfo(master=False, ha_client_runtime_info=HAClientRuntimeInfo(max_offset=7))
    _print_status(Output(False), "127.0.0.1:10911", info)
    epoch = datetime.fromtimestamp(0).strftime("%Y-%m-%d %H:%M:%S,000")
    assert capsys.readouterr().out.splitlines() == [
        "",
        "#MasterAddr\tnull",
        "#CommitLogMaxOffset\t7",
        "#TransferSpeed(KB/s)\t0.00",
        f"#LastReadTime\t{epoch}",
        f"#LastWriteTime\t{epoch}",
        "#MasterFlushOffset\t0",
    ]


async def test_update_broker_config_moves_the_in_sync_gap_of_a_running_master(pair: EmbeddedCluster) -> None:
    """``haMaxGapNotInSync`` is read at each status (``DefaultHAService.isInSyncSlave`` reads MessageStoreConfig):
    set to 0 by UPDATE_BROKER_CONFIG, a caught-up slave (gap 0, not under 0) is no longer in sync."""
    await _synced_master_status(pair.broker_addr)
    async with Admin(pair.namesrv_addr) as admin:
        await admin.update_broker_config(pair.broker_addr, {"haMaxGapNotInSync": "0"})
        info = await admin.ha_status(pair.broker_addr)
    assert info.in_sync_slave_nums == 0 and not info.ha_connection_info[0].in_sync


def test_mqadmin_ha_status_with_an_empty_b_fails_as_java() -> None:
    """Java tests ``hasOption('b')``, not the value: ``-b ""`` asks broker "" and fails, even beside ``-c``. Ours
    took an empty ``-b`` for none and printed the help."""
    for args in (["-b", ""], ["-b", " ", "-c", "DefaultCluster"]):
        result = _mqadmin_result("haStatus", "-n", _closed_address(), *args)
        assert result.exit_code == 1, result.output
        assert result.stderr.splitlines()[0] == (
            "org.apache.rocketmq.tools.command.SubCommandException: HAStatusSubCommand command failed"
        ), result.stderr
