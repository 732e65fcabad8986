"""Real clients across a master's death (``failover.py``): ali-ons and the C++ core keep consuming from the slave
after the SYNC_MASTER is SIGKILLed, exactly the messages left, and go back to the master once it is restarted."""

from __future__ import annotations

import pytest

from tests.e2e.scenarios import SessionReport, duplicates
from tests.e2e.test_real_clients import _require

pytestmark = pytest.mark.timeout(600)


def test_the_consumer_reads_the_rest_from_the_slave_once_the_master_is_killed(session: SessionReport) -> None:
    _require(session, "failover")
    report = session.failover
    assert {e["keys"] for e in report.first} >= report.a1
    # Started after the kill: everything it had before the master came back was read from the slave, and it is the
    # rest (A2), not what the first consumer had already consumed (A1).
    assert report.from_slave >= report.a2
    assert not report.from_slave & report.a1, sorted(report.from_slave & report.a1)[:5]
    assert not duplicates([e for e in report.second if e["keys"] in report.a2])
    assert not report.altered(report.first + report.second)


def test_the_consumer_goes_back_to_the_restarted_master(session: SessionReport) -> None:
    _require(session, "failover")
    report = session.failover
    assert {e["keys"] for e in report.second} >= report.b
