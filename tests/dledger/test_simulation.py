"""The deterministic simulation of the Raft core (dledger/simulation.py): 1,450 seeds of 70 s of virtual time each,
so CI stays within a minute (``python -m dledger.simulation --seeds N`` runs the full 100 s): 800 of the default fault
mix, 200 with a preferred leader (leadership transfers), and more with power loss (crashes lose unflushed data,
acknowledgements wait for the flush), with five members, batch pushes and appends and answers taken in as the
broker's shell does; a seed replays exactly, and a run that gets stuck fails with its seed."""

from __future__ import annotations

from typing import Any

import pytest

from dledger.simulation import SimConfig, Simulation, SimulationFailure, run_seed

CHUNK = 50
#: the CI length of a seed: 30 s of faults and appends, then 40 s to settle (liveness is checked at the end)
SHORT = {"duration_ms": 30_000, "settle_ms": 40_000}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("first", range(0, 800, CHUNK))
def test_seeds_of_the_default_fault_mix_keep_every_invariant(first: int) -> None:
    for seed in range(first, first + CHUNK):
        summary = run_seed(seed, SimConfig(**SHORT))
        assert summary["checks"] > 1000


@pytest.mark.timeout(600)
@pytest.mark.parametrize("first", range(0, 200, CHUNK))
def test_leadership_handed_to_a_preferred_member(first: int) -> None:
    """``preferredLeaderIds=n1``: whoever else leads hands the leadership to n1 once it has matched n1's log
    (LEADERSHIP_TRANSFER, then n1 campaigns), so n1 leads once the faults stopped; half the seeds with appends and
    answers taken in as the broker's shell does."""
    config = SimConfig(preferred_leader_ids="n1", shell_passes=first >= 100, **SHORT)
    for seed in range(first, first + CHUNK):
        sim = Simulation(seed, config).run()
        leaders = [i for i, m in sim.members.items() if m.node is not None and m.node.member.is_leader]
        assert leaders == ["n1"], f"seed {seed}: {leaders} lead after the settling, not the preferred n1"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("first", range(0, 100, CHUNK))
def test_power_loss_with_acknowledgements_after_the_flush(first: int) -> None:
    config = SimConfig(power_loss=True, sync_before_ack=True, **SHORT)
    for seed in range(first, first + CHUNK):
        run_seed(seed, config)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("first", range(0, 50, CHUNK))
def test_five_members_with_batch_pushes(first: int) -> None:
    config = SimConfig(members=5, enable_batch_push=True, **SHORT)
    for seed in range(first, first + CHUNK):
        run_seed(seed, config)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("first", range(0, 200, CHUNK))
def test_appends_and_answers_taken_in_as_the_broker_runs_them(first: int) -> None:
    """The broker's shell hands a member its appends, the pushes it read and the answers it got once a scheduler pass
    (RaftNode.defer_push, handle_request(defer=True), RaftNode.handle_responses): half the seeds with batch pushes (a
    broker with enableBatchPush=true and ASYNC_FLUSH), a quarter without, a quarter with power loss and
    acknowledgements after the flush."""
    power_loss = first >= 150
    config = SimConfig(shell_passes=True, enable_batch_push=first < 100, power_loss=power_loss,
                       sync_before_ack=power_loss, **SHORT)  # fmt: skip
    for seed in range(first, first + CHUNK):
        run_seed(seed, config)


def test_a_seed_replays_exactly() -> None:
    one, two = Simulation(4242).run(), Simulation(4242).run()
    assert one.trace == two.trace
    assert one.summary() == two.summary()
    assert one.checker.committed == two.checker.committed
    assert Simulation(4243).run().trace != one.trace


def test_dledgers_own_rules_break_an_invariant_the_simulator_reports_with_its_seed() -> None:
    """DLedger 0.3.1.2's behaviour (``faithful``) under the same faults loses or changes committed entries; the
    failure names the seed and how to replay it."""
    failures = []
    for seed in range(20):
        try:
            run_seed(seed, SimConfig(faithful=True))
        except SimulationFailure as exc:
            failures.append(str(exc))
    assert failures
    assert all("replay: python -m dledger.simulation --seed" in f for f in failures)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("first", range(0, 100, CHUNK))
def test_batch_pushes_coalesced_as_the_broker_runs_them(first: int) -> None:
    """enableBatchPush as DLedgerServer runs it: appends only queue entries and the next tick pushes them in one batch
    (RaftNode.defer_push), with power loss and acknowledgements after the flush."""
    config = SimConfig(enable_batch_push=True, power_loss=True, sync_before_ack=True, **SHORT)
    for seed in range(first, first + CHUNK):
        run_seed(seed, config)


def test_a_run_whose_virtual_time_stops_fails_with_its_seed_instead_of_hanging() -> None:
    """A member whose timer deadline stays in the past ticks forever at one instant (the broker's timer task would
    spin); the run fails as stuck, naming the seed and how to replay it."""

    class Frozen(Simulation):
        def _step(self, kind: str, args: tuple[Any, ...]) -> None:
            super()._step(kind, args)
            if self.now >= 5000:
                self._at(self.now, "tick", "n0", self.members["n0"].incarnation)

    stuck = r"(?s)seed 7: stuck at 5\d{3} ms.*replay: python -m dledger\.simulation --seed 7 "
    with pytest.raises(SimulationFailure, match=stuck):
        Frozen(7, SimConfig(**SHORT)).run()
