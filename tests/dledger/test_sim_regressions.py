"""Seeds on which the simulator caught DLedger 0.3.1.2's own rules (``faithful=True``) breaking Raft, kept as ordinary
tests: each fails with the symptom it showed under DLedger's rules and passes under ours. ``faithful`` switches every
departure listed in dledger/node.py at once, so a seed does not say which one it needs; the single-rule tests are in
test_core_replication.py (a late TRUNCATE, a deposed leader's waiting appends, lost acknowledgements).

- seed 4: a committed entry ended up held by one member only (safety);
- seeds 7 and 8: a member claimed a committed index past the end of its log (safety);
- seed 0: a member never caught up with the leader once the faults stopped (liveness)."""

from __future__ import annotations

import pytest

from dledger.simulation import SimConfig, SimulationFailure, run_seed


@pytest.mark.parametrize(
    ("seed", "dledger_failure"),
    [
        (4, "is held by only 1 members"),
        (7, "committed 99 but its log ends at 98"),
        (8, "committed 6 but its log ends at 5"),
        (0, "have not caught up with the leader"),
    ],
)
def test_a_seed_that_broke_dledgers_rules_passes_ours(seed: int, dledger_failure: str) -> None:
    with pytest.raises(SimulationFailure, match=dledger_failure):
        run_seed(seed, SimConfig(faithful=True))
    run_seed(seed, SimConfig())
