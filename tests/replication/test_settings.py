"""Replication's settings under RocketMQ's names and defaults: read from ``mqbroker -c`` files and ``--name value``,
carried into the store's settings, RocketMQ's start-up rules for roles and ids, and the live ones changed by
UPDATE_BROKER_CONFIG."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing

from broker.broker_config import BrokerConfig, checked_roles
from broker.cli import build_config
from broker.context import BrokerState, build_context, store_config_of
from store.ha.frames import REPORT_SIZE
from store.store_config import BrokerRole
from tests.conftest import SMALL_STORE
from tests.replication.ha_helpers import read_exactly

REPO = Path(__file__).resolve().parents[2]


def test_defaults_are_rocketmq_s() -> None:
    store = store_config_of(BrokerConfig())
    assert store.broker_role is BrokerRole.ASYNC_MASTER
    assert (store.ha_send_heartbeat_interval, store.ha_housekeeping_interval) == (5000, 20_000)
    assert (store.ha_transfer_batch_size, store.ha_slave_fallbehind_max) == (32 * 1024, 256 * 1024 * 1024)
    assert (store.slave_timeout, store.access_message_in_memory_max_ratio, store.ha_master_address) == (3000, 40, "")
    assert store.ha_listen_port == 10912  # listenPort + 1
    assert BrokerConfig(listen_port=0).ha_bind_port == 0 and BrokerConfig(ha_listen_port=7000).ha_bind_port == 7000
    assert BrokerConfig(broker_ip2="10.0.0.2", listen_port=9000).ha_server_addr == "10.0.0.2:9001"


def test_a_conf_file_and_arguments_set_every_replication_key(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerRole=SLAVE\nbrokerId=2\nhaListenPort=20912\nhaMasterAddress=10.0.0.1:10912\n"
        "haSendHeartbeatInterval=1000\nhaHousekeepingInterval=4000\nslaveReadEnable=true\n"
    )
    args = ["--haTransferBatchSize", "65536", "--haSlaveFallbehindMax=1024", "--slaveTimeout", "500"]
    config = build_config(str(conf), [*args, "--accessMessageInMemoryMaxRatio", "30"], None)
    store = store_config_of(checked_roles(config))
    assert (config.broker_id, config.slave_read_enable) == (2, True)
    assert store.broker_role is BrokerRole.SLAVE and store.is_slave
    assert (store.ha_listen_port, store.ha_master_address) == (20912, "10.0.0.1:10912")
    assert (store.ha_send_heartbeat_interval, store.ha_housekeeping_interval) == (1000, 4000)
    assert (store.ha_transfer_batch_size, store.ha_slave_fallbehind_max, store.slave_timeout) == (65536, 1024, 500)
    assert store.access_message_in_memory_max_ratio == 30


def test_ha_max_gap_not_in_sync_is_rocketmq_5_s_and_reaches_the_store() -> None:
    """RocketMQ 5's ``haMaxGapNotInSync`` (256 MiB), which ``mqadmin haStatus``'s in-sync flag reads, is a
    broker setting like the others and reaches the store's settings."""
    assert store_config_of(BrokerConfig()).ha_max_gap_not_in_sync == 256 * 1024 * 1024
    config = build_config(None, ["--haMaxGapNotInSync", "4096"], None)
    assert store_config_of(checked_roles(config)).ha_max_gap_not_in_sync == 4096


def test_roles_follow_rocketmq_s_start_up_rules() -> None:
    assert checked_roles(BrokerConfig(broker_role="SYNC_MASTER", broker_id=3)).broker_id == 0
    with pytest.raises(ValueError, match="Slave's brokerId must be > 0"):
        checked_roles(BrokerConfig(broker_role="SLAVE", broker_id=0))
    with pytest.raises(ValueError, match="brokerRole"):
        checked_roles(BrokerConfig(broker_role="MASTER"))


def test_mqbroker_refuses_to_start_a_slave_with_id_zero(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "broker.cli", "-n", "127.0.0.1:1", "--brokerRole", "SLAVE", "--brokerId", "0"]
    argv += ["--listenPort", "0", "--storePathRootDir", str(tmp_path)]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 253 and "Slave's brokerId must be > 0" in done.stderr  # BrokerStartup: exit(-3)


async def test_update_broker_config_changes_the_live_replication_settings(tmp_path: Path) -> None:
    broker = build_context(BrokerConfig(store_path_root_dir=str(tmp_path)))
    assert await broker.update_config({"slaveTimeout": "250", "haTransferBatchSize": "4096", "haListenPort": "1"}) == []
    assert (broker.store.config.slave_timeout, broker.store.config.ha_transfer_batch_size) == (250, 4096)
    assert broker.store.config.ha_listen_port == 10912  # a port takes effect at the next start only


@contextlib.asynccontextmanager
async def _slave_of_a_test_master(tmp_path: Path) -> AsyncIterator[tuple[BrokerState, trio.SocketListener]]:
    """A slave broker's store running, its HA client pointed at a listener on which the test plays the master."""
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    config = BrokerConfig(
        store_path_root_dir=str(tmp_path),
        broker_role="SLAVE",
        broker_id=1,
        listen_port=0,
        ha_master_address=f"127.0.0.1:{port}",
        **SMALL_STORE,
    )
    broker = build_context(config)
    broker.store.load()
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.store.run)
        yield broker, listener
        nursery.cancel_scope.cancel()
    broker.store.close()


async def test_a_slave_reports_at_the_heartbeat_interval_set_by_update_broker_config(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ's HAClient reads ``getMessageStoreConfig().getHaSendHeartbeatInterval()`` on every loop: a slave's
    client reports at the interval UPDATE_BROKER_CONFIG set (here in its next session: the first one is closed
    after the update)."""
    async with _slave_of_a_test_master(tmp_path) as (broker, listener):
        first = await listener.accept()
        await read_exactly(first, REPORT_SIZE)  # the slave's first report: it runs with the 5 s default
        assert await broker.update_config({"haSendHeartbeatInterval": "1000"}) == []
        await first.aclose()
        second = await listener.accept()
        await read_exactly(second, REPORT_SIZE)
        start = trio.current_time()
        await read_exactly(second, REPORT_SIZE)  # nothing new to report: the heartbeat report
        interval = trio.current_time() - start
    assert interval == pytest.approx(1.0, abs=0.2)


async def test_a_lowered_heartbeat_interval_takes_effect_within_the_running_session(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ's HAClient loop wakes at least every second (``selector.select(1000)``) and compares against the
    current haSendHeartbeatInterval: an interval lowered from 5 s to 1 s half a second after a report gives the next
    report a second after it, in the same session (not at the deadline the old interval set)."""
    async with _slave_of_a_test_master(tmp_path) as (broker, listener):
        stream = await listener.accept()
        await read_exactly(stream, REPORT_SIZE)  # the first report, at the 5 s default
        start = trio.current_time()
        await trio.sleep(0.5)  # the client waits for its next heartbeat report
        assert await broker.update_config({"haSendHeartbeatInterval": "1000"}) == []
        await read_exactly(stream, REPORT_SIZE)  # same session: the heartbeat report
        elapsed = trio.current_time() - start
    assert elapsed == pytest.approx(1.0, abs=0.2)
