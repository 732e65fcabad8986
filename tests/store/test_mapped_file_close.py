"""Closing a mapped segment is idempotent: a second close (``destroy`` after ``close``) leaves alone whatever file
reused its fd number, and a flush of a closed segment syncs nothing instead of another file."""

from __future__ import annotations

import os
from pathlib import Path

from store.mapped_file import MappedFile


def test_destroy_after_close_does_not_close_a_reused_fd(tmp_path: Path) -> None:
    mf = MappedFile(tmp_path / "00000000000000000000", 0, 1 << 16)
    mf.close()
    other = os.open(tmp_path / "other", os.O_RDWR | os.O_CREAT, 0o644)  # likely the segment's old fd number
    try:
        mf.destroy()
        os.fstat(other)  # still open
        assert not mf.path.exists()
    finally:
        os.close(other)


def test_flush_of_a_closed_segment_syncs_nothing(tmp_path: Path) -> None:
    mf = MappedFile(tmp_path / "00000000000000000000", 0, 1 << 16)
    mf.buf[0:4] = b"abcd"
    mf.wrote_position = 4
    assert mf.flush() == 4
    mf.wrote_position = 8
    mf.close()
    assert mf.flush() == 4
