"""Seeds on which the simulator caught DLedger 0.3.1.2's own rules (``faithful=True``) breaking Raft, kept as ordinary
tests: each fails with the symptom it showed under DLedger's rules and passes under ours. ``faithful`` switches every
departure listed in dledger/node.py at once, so a seed does not say which one it needs; the single-rule tests are in
test_core_replication.py (a late TRUNCATE, a deposed leader's waiting appends, lost acknowledgements).

- seed 32: a committed entry ended up held by one member only (safety);
- seeds 6 and 20: a member claimed a committed index past the end of its log (safety);
- seed 1: a member never caught up with the leader once the faults stopped (liveness).

(Seeds 4, 7, 8 and 0 showed these until a candidate held the pushes it got, as DLedger's does, instead of answering
405: the runs took other paths.)"""

from __future__ import annotations

import pytest

from dledger.simulation import SimConfig, SimulationFailure, run_seed


@pytest.mark.parametrize(
    ("seed", "dledger_failure"),
    [
        (32, "is held by only 1 members"),
        (6, "committed 28 but its log ends at 27"),
        (20, "committed 16 but its log ends at 15"),
        (1, "have not caught up with the leader"),
    ],
)
def test_a_seed_that_broke_dledgers_rules_passes_ours(seed: int, dledger_failure: str) -> None:
    with pytest.raises(SimulationFailure, match=dledger_failure):
        run_seed(seed, SimConfig(faithful=True))
    run_seed(seed, SimConfig())
