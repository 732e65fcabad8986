"""A ``deleteWhen`` RocketMQ cannot parse in DLedger mode (tests/store/test_delete_when_parse.py for the classic
store): DLedger 0.3.1.2's CleanSpaceService.doWork (``store/file/DLedgerMmapFileStore.java``) sets its disk-full flag,
then ``isTimeToDelete`` (``DLedgerUtils.isItTimeToDo``, Integer.parseInt of each part) throws before its disk checks:
the exception is logged and no entry file goes, not even on a full disk. A mixed store's classic segments go in
RocketMQ's CleanCommitLogService, whose hour check throws the same way before anything else
(store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java): none goes and no manual round is used."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.dledger.test_mixed_commitlog import classic_store, dledger_store
from tests.dledger.test_retention import age, keyed_records, keyed_store
from tests.store.store_helpers import FakeClock
from tests.store.test_delete_when_parse import local_ms
from tests.store.test_retention import Disk


@pytest.mark.parametrize(("when", "deletes"), [("abc", False), ("04;xx", False), ("25", True)])
async def test_an_unparseable_delete_when_deletes_no_entry_file_even_on_a_full_disk(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, when: str, deletes: bool
) -> None:
    """At 13:30 with the disk 95 % used (any age goes): DLedger's flag is set either way; ``abc`` and ``04;xx`` end
    the pass before its disk checks, ``25`` parses and the full disk is cleaned. Ours read an unparseable value as no
    hour and deleted on the full disk."""
    store = keyed_store(tmp_path, now_ms=FakeClock(local_ms(13)), disk_usage_ratio=Disk(0.95), delete_when=when)
    try:
        while len(store.ledger.data.files) < 3:
            keyed_records(store, 8)
        files = len(store.ledger.data.files)
        with caplog.at_level(logging.INFO):
            deleted = await store.retention.check_once()
        assert store.ledger.disk_full is True
        assert (deleted > 0, len(store.ledger.data.files) < files) == (deletes, deletes)
        assert ("CleanSpaceService" in caplog.text) is not deletes
    finally:
        store.close()


@pytest.mark.parametrize(("when", "deletes"), [("abc", False), ("25", True)])
async def test_an_unparseable_delete_when_keeps_a_mixed_stores_classic_segments_and_manual_rounds(
    tmp_path: Path, when: str, deletes: bool
) -> None:
    """A manual delete over expired classic segments, the disk 10 % used: ``abc`` fails the pass before the manual
    round is used; ``25`` lets it delete. Ours deleted with ``abc`` too."""
    classic, _ = classic_store(tmp_path, 60)
    classic.close()
    now = local_ms(13)
    store = dledger_store(tmp_path, now_ms=FakeClock(now), disk_usage_ratio=Disk(0.1), delete_when=when,
                          file_reserved_time=72)  # fmt: skip
    try:
        segments = store.classic_segments()
        for mf in store.commitlog.classic.queue.files:
            age(mf.path, 80, now)  # by the store's clock: by the real one, after 21:30 they were not expired
        store.retention.manual_delete_times = 20
        await store.retention.check_once()
        if deletes:
            assert store.classic_segments() < segments and store.retention.manual_delete_times == 19
        else:
            assert store.classic_segments() == segments and store.retention.manual_delete_times == 20
    finally:
        store.close()
