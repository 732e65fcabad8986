"""A ``deleteWhen`` RocketMQ 4.9.8 cannot parse: ``UtilAll.isItTimeToDo`` (common/src/main/java/org/apache/rocketmq/
common/UtilAll.java) splits it on ``;`` (String.split: trailing empty parts dropped) and reads each part with
``Integer.parseInt`` in turn, returning at the first equal to the hour, so a part it reaches that is no int throws
NumberFormatException. CleanCommitLogService.deleteExpiredFiles (store/src/main/java/org/apache/rocketmq/store/
DefaultMessageStore.java) asks ``isTimeToDelete`` first: the exception ends the pass before ``isSpaceToDelete``, so
nothing is deleted, not even on a full disk, and no manual round is used; CleanCommitLogService.run logs it."""

from __future__ import annotations

import datetime
import logging
from pathlib import Path

import pytest

from store.services import is_delete_hour
from tests.store.store_helpers import FakeClock, open_store
from tests.store.test_retention import Disk
from tests.store.test_retention_java_parity import _fill


def local_ms(hour: int) -> int:
    now = datetime.datetime.now().replace(hour=hour, minute=30, second=0, microsecond=0)
    return int(now.timestamp() * 1000)


@pytest.mark.parametrize(
    ("when", "hour", "due"),
    [
        ("04", 4, True),
        ("4", 4, True),
        ("+4", 4, True),
        ("004", 4, True),
        ("03;04", 4, True),
        ("04;", 5, False),
        (";", 4, False),
        ("25", 4, False),
        ("04;xx", 4, True),  # the bad part is never reached
        ("04;xx", 5, None),
        ("xx;04", 4, None),
        ("abc", 4, None),
        ("", 4, None),
        (";04", 4, None),
        (" 04", 4, None),
        ("04 ", 4, None),
        ("99999999999", 4, None),
    ],
)
def test_delete_when_is_read_as_java_s_is_it_time_to_do(when: str, hour: int, due: bool | None) -> None:
    """``None``: Java's NumberFormatException, a ValueError here."""
    if due is None:
        with pytest.raises(ValueError, match="For input string"):
            is_delete_hour(when, local_ms(hour))
    else:
        assert is_delete_hour(when, local_ms(hour)) is due


@pytest.mark.parametrize("when", ["abc", "04;xx", ""])
async def test_an_unparseable_delete_when_deletes_nothing_even_on_a_full_disk(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, when: str
) -> None:
    """At 13:30 with the disk 97 % used: the pass fails at the hour check and is logged; no segment goes, no manual
    round is used. Ours read an unparseable value as no hour and deleted on the full disk."""
    store = open_store(tmp_path, now_ms=FakeClock(local_ms(13)), disk_usage_ratio=Disk(0.97), delete_when=when)
    try:
        files = _fill(store)
        store.retention.manual_delete_times = 20
        with caplog.at_level(logging.WARNING):
            assert await store.retention.check_once() == 0
        assert len(store.commitlog.queue.files) == files and store.retention.manual_delete_times == 20
        assert "CleanCommitLogService service has exception." in caplog.text
    finally:
        store.close()


async def test_a_parseable_delete_when_that_is_no_hour_still_deletes_on_a_full_disk(tmp_path: Path) -> None:
    """``25`` parses and never matches the hour: isSpaceToDelete runs and a full disk is cleaned, as before."""
    store = open_store(tmp_path, now_ms=FakeClock(local_ms(13)), disk_usage_ratio=Disk(0.97), delete_when="25")
    try:
        files = _fill(store)
        assert await store.retention.check_once() == files - 1
    finally:
        store.close()
