"""What DLedger mode refuses at start rather than build half: a store that already holds a classic CommitLog
(RocketMQ's mixed CommitLog: ``mqbroker`` exits with a clear error instead of serving ConsumeQueues whose offsets the
DLedger log would reuse), and several data paths in ``storePathDLedgerCommitLog``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from broker.broker_config import BrokerConfig
from broker.context import store_config_of
from broker.dledger_mode import dledger_store
from tests.dledger.ports import free_ports, peers_string
from tests.store.store_helpers import message, open_store

REPO = Path(__file__).resolve().parents[2]


def mqbroker_in_dledger_mode(root: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "broker.cli", "-n", "127.0.0.1:1", "--listenPort", "0"]
    argv += ["--storePathRootDir", str(root), "--enableDLegerCommitLog", "true"]
    argv += ["--dLegerPeers", peers_string(free_ports(1)), "--dLegerSelfId", "n0"]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60)


def test_dledger_mode_refuses_a_store_with_a_classic_commitlog(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.append(message())
    store.close()
    done = mqbroker_in_dledger_mode(tmp_path)
    assert done.returncode == 1
    assert "holds a classic CommitLog" in done.stderr and "empty storePathRootDir" in done.stderr
    assert not (tmp_path / "dledger-n0" / "data").exists()  # nothing of a DLedger log was started


def test_several_dledger_data_paths_are_refused_at_start(tmp_path: Path) -> None:
    config = BrokerConfig(
        store_path_root_dir=str(tmp_path), enable_dleger_commit_log=True, dleger_self_id="n0",
        dleger_peers="n0-127.0.0.1:1", store_path_dledger_commit_log=f"{tmp_path}/a,{tmp_path}/b",
    )  # fmt: skip
    with pytest.raises(ValueError, match="several data paths"):
        dledger_store(config, store_config_of(config), b"\x7f\x00\x00\x01\x00\x00\x27\x11")
