"""A flush that was in flight while the segment's end moved back (``MappedFile.cut``, ``MappedFileQueue.truncate_to``)
records no flushed position: it synced the bytes before the cut, not those written at the same place since."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from store import mapped_file
from store.mapped_file import MappedFile, MappedFileQueue


def _flush_while(mf: MappedFile, meanwhile: Callable[[], None], monkeypatch: pytest.MonkeyPatch) -> int:
    real_sync = mapped_file.os.fdatasync

    def sync_then_cut(fd: int) -> None:
        real_sync(fd)
        meanwhile()

    monkeypatch.setattr(mapped_file.os, "fdatasync", sync_then_cut)
    try:
        return mf.flush()
    finally:
        monkeypatch.setattr(mapped_file.os, "fdatasync", real_sync)


def test_a_cut_during_a_flush_leaves_the_rewritten_bytes_to_the_next_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mf = MappedFile(tmp_path / "00000000000000000000", 0, 1 << 16)
    mf.wrote_position = 400

    def cut_and_rewrite() -> None:
        mf.cut(100)
        mf.buf[100:400] = b"n" * 300
        mf.wrote_position = 400

    assert _flush_while(mf, cut_and_rewrite, monkeypatch) == 0
    assert mf.flush() == 400  # the next flush syncs them
    mf.close()


def test_a_truncation_during_a_flush_keeps_its_own_position(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    queue = MappedFileQueue(tmp_path, 1 << 16)
    queue.load()
    mf = queue.roll(0)
    mf.wrote_position = 400
    assert _flush_while(mf, lambda: queue.truncate_to(100), monkeypatch) == 100
    queue.close()
