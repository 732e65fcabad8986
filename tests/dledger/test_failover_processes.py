"""Real processes (bench/dledger_failover.py): a name server and three ``mqbroker`` processes in DLedger mode under 8
producers; the leader is killed with SIGKILL in one round and SIGSTOPped past the election timeout in the next, and
every acknowledged message must then be at its queue offset on every member once they have caught up, with no
offset holding two messages; once more with the members started from copies of a classic broker's store.
The CI version uses shorter DLedger timings (heartbeats every 500 ms) so it takes seconds, not minutes; the
10-round run with DLedger's default timings is ``python -m bench.dledger_failover``; one SIGSTOP round runs with them
here, to show the followers asking the paused leader instead of waiting for the heartbeat leak."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.dledger_failover import run
from tests.dledger.ports import FAST


@pytest.mark.timeout(240)
@pytest.mark.parametrize("classic", [0, 400], ids=["new_stores", "from_a_classic_store"])
async def test_kill_and_pause_the_leader_under_eight_producers(tmp_path: Path, classic: int) -> None:
    """``from_a_classic_store``: the members start from copies of a classic broker's store (RocketMQ's mixed
    CommitLog); its messages must stay at their offsets on every member through both faults."""
    results, summary = await run(tmp_path, rounds=2, producers=8, warm=1.5, pause=4.0, timings=FAST, classic=classic)
    assert summary["classic"] == classic
    assert [r["kind"] for r in results] == ["kill", "stop"]
    assert all(r["new_leader"] != r["old_leader"] for r in results), results
    assert summary["acked"] > 100, summary
    # check() raised unless every acknowledged message is on a majority and no member holds another one there; once
    # the members have caught up, every member holds every one of them.
    assert summary["caught_up"] and summary["missing"] == {"n0": 0, "n1": 0, "n2": 0}, summary
    # mqadmin clusterList shows the group's leader as brokerId 0 with its term, the others as followers.
    rows = summary["cluster_list"]
    leaders = [r for r in rows if r["DLedgerRole"] == "LEADER"]
    assert len(leaders) == 1 and str(leaders[0]["BID"]) == "0" and int(leaders[0]["Term"]) >= 2, rows
    assert {r["DLedgerRole"] for r in rows} == {"LEADER", "FOLLOWER"}, rows
    # SPACE: the used ratio of the disk under the DLedger data directory, as RocketMQ's getStorePathPhysic gives it.
    assert all(0 < float(r["SPACE"]) <= 1 for r in rows), rows


@pytest.mark.timeout(240)
async def test_a_paused_leader_is_replaced_before_the_heartbeat_leak_with_dledgers_default_timings(
    tmp_path: Path,
) -> None:
    """DLedger's default timings (heartbeats every 2 s, a leak of 3): a follower whose SIGSTOPped leader's heartbeat
    is overdue asks it (METADATA), gets no answer and campaigns. The members' own logs show the mechanism: the follower
    gave up on the leader's term while its last heartbeat was younger than the 6 s leak, the new leader leads a later
    term (the next one unless the two followers split their first vote), and nobody waited for the leak."""
    results, summary = await run(tmp_path, rounds=1, producers=8, warm=1.5, pause=1.0, timings={}, kinds=("stop",))
    [result] = results
    old, new = result["old_leader"], result["new_leader"]
    assert new != old and summary["caught_up"], (results, summary)
    logs = "".join((tmp_path / f"n{i}.log").read_text() for i in range(3))
    gave_up = re.findall(rf"dledger n\d: leader {old} of term (\d+) gave no answer within \d+ ms, (\d+) ms after its "
                         r"last heartbeat: electing", logs)  # fmt: skip
    assert gave_up, logs
    leak_ms = 2000 * 3
    assert all(int(age) < leak_ms for _, age in gave_up), gave_up
    new_terms = {int(t) for t in re.findall(rf"dledger {new} is LEADER of term (\d+)", logs)}
    assert any(led > int(term) for term, _ in gave_up for led in new_terms), (gave_up, new_terms)
    assert f"no heartbeat from leader {old}" not in logs
