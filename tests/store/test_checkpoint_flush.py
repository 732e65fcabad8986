"""The checkpoint's flush (``fdatasync`` on its own fd) persists the fields, and closing it twice leaves any other
file alone (its fd number may have been reused in between)."""

from __future__ import annotations

import os
from pathlib import Path

from store.checkpoint import Checkpoint


def test_flushed_fields_are_read_back_by_a_new_checkpoint(tmp_path: Path) -> None:
    cp = Checkpoint(tmp_path / "checkpoint")
    cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp, cp.safe_offset = 11, 22, 33, 4096
    cp.flush()
    cp.close()
    again = Checkpoint(tmp_path / "checkpoint")
    try:
        fields = (again.physic_msg_timestamp, again.logics_msg_timestamp, again.index_msg_timestamp)
        assert fields == (11, 22, 33) and again.safe_offset == 4096
    finally:
        again.close()


def test_closing_twice_does_not_close_a_reused_fd(tmp_path: Path) -> None:
    cp = Checkpoint(tmp_path / "checkpoint")
    cp.close()
    other = os.open(tmp_path / "other", os.O_RDWR | os.O_CREAT, 0o644)  # likely the checkpoint's old fd number
    try:
        cp.close()
        os.fstat(other)  # still open
    finally:
        os.close(other)
