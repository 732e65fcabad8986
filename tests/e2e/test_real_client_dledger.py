"""Real clients through the SIGKILL of a DLedger leader (``dledger_group.py``): ali-ons and the C++ core, with their
default route poll, go on producing to the newly elected leader once their route names it, and no message they saw
acknowledged (SEND_OK) is lost. Duplicates are allowed (a send whose answer died with the leader may be stored and
retried), and counted."""

from __future__ import annotations

import pytest
import trio

from tests.e2e.dledger_group import AFTER, DLedgerReport, run_dledger
from tests.e2e.harness import CLIENT_KINDS, require
from tests.e2e.scenarios import duplicates

# Each run takes about 50 s, half of it the wait for the client's next 30 s route poll; its own bound is
# dledger_group.LIMIT.
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module", params=sorted(CLIENT_KINDS))
def dledger_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> DLedgerReport:
    kind = CLIENT_KINDS[request.param]
    require(kind)
    return trio.run(run_dledger, kind, tmp_path_factory.mktemp(f"e2e-dledger-{kind.name}"))


def _require(report: DLedgerReport) -> None:
    if report.error:
        pytest.fail(f"[{report.client}] the DLedger run did not run through: {report.error}\nlogs: {report.log_dir}")


def test_the_producer_goes_on_with_the_new_leader_after_the_kill(dledger_run: DLedgerReport) -> None:
    _require(dledger_run)
    assert dledger_run.new_leader and dledger_run.new_leader != dledger_run.old_leader
    assert len(dledger_run.acked_after_kill()) >= AFTER


def test_every_acknowledged_message_is_consumed_intact(
    dledger_run: DLedgerReport, record_property: pytest.RecordProperty
) -> None:
    _require(dledger_run)
    got = {e["keys"] for e in dledger_run.received}
    lost = sorted(dledger_run.acked() - got)
    assert not lost, f"{len(lost)} acknowledged messages lost, first: {lost[:5]}"
    sent = dledger_run.expected
    altered = [e["keys"] for e in dledger_run.received if e["body"] != sent.get(e["keys"], {}).get("body")]
    assert not altered, altered[:5]
    twice = duplicates(dledger_run.received)
    failed = [e for e in dledger_run.sent if not e.get("ok")]
    record_property("duplicates", len(twice))
    record_property("failed_sends", len(failed))
    record_property("first_ack_after_kill_ms", dledger_run.first_ack_after_kill_ms())
    counts = f"acked {len(dledger_run.acked())}, failed sends {len(failed)}, consumed {len(dledger_run.received)}"
    print(
        f"[{dledger_run.client}] {counts}, duplicated keys {len(twice)}, "
        f"first ack {dledger_run.first_ack_after_kill_ms()} ms after the kill"
    )
