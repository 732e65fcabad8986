"""What DLedger mode refuses at start rather than build half: several data paths in ``storePathDLedgerCommitLog``
(DLedger's multi-path data directories). A store holding a classic CommitLog becomes a mixed one
(tests/dledger/test_mixed_commitlog.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.broker_config import BrokerConfig
from broker.context import store_config_of
from broker.dledger_mode import dledger_store


def test_several_dledger_data_paths_are_refused_at_start(tmp_path: Path) -> None:
    config = BrokerConfig(
        store_path_root_dir=str(tmp_path), enable_dleger_commit_log=True, dleger_self_id="n0",
        dleger_peers="n0-127.0.0.1:1", store_path_dledger_commit_log=f"{tmp_path}/a,{tmp_path}/b",
    )  # fmt: skip
    with pytest.raises(ValueError, match="several data paths"):
        dledger_store(config, store_config_of(config), b"\x7f\x00\x00\x01\x00\x00\x27\x11")
