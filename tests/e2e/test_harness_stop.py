"""``Agent.stop`` against real child processes: a clean stop, the C++ core's known abort in ``shutdown()``, and any
other death, which must still fail the scenario."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

from tests.e2e.harness import NATIVE_SHUTDOWN_ABORT, Agent, ScenarioError, kill_all

# A stand-in driver: says ready, then on "stop" either answers and exits, or prints a line to stderr and aborts.
_DRIVER = """
import json, os, signal, sys
print(json.dumps({"ev": "ready"}), flush=True)
cmd = json.loads(sys.stdin.readline())
if sys.argv[1] == "clean":
    print(json.dumps({"ev": "done", "id": cmd["id"]}), flush=True)
    sys.exit(0)
print(sys.argv[2], file=sys.stderr, flush=True)
os.kill(os.getpid(), signal.SIGABRT)
"""


async def _stop(tmp_path: Path, *how: str) -> Agent:
    agent = Agent("driver", [sys.executable, "-c", _DRIVER, *how], tmp_path / "driver.log")
    try:
        async with trio.open_nursery() as nursery:
            await agent.started(nursery, timeout=30)
            await agent.stop(timeout=30)
        return agent
    finally:
        await kill_all()


async def test_a_clean_stop_is_not_an_abort(tmp_path: Path) -> None:
    agent = await _stop(tmp_path, "clean")
    assert not agent.shutdown_aborted and not agent.client_errors()


async def test_the_cpp_cores_abort_in_shutdown_is_recorded_not_raised(tmp_path: Path) -> None:
    agent = await _stop(tmp_path, "abort", NATIVE_SHUTDOWN_ABORT)
    assert agent.shutdown_aborted
    assert agent.client_errors() == ["aborted in its own shutdown()"]  # the session's report lists it


async def test_any_other_death_before_the_answer_fails_the_stop(tmp_path: Path) -> None:
    with pytest.RaisesGroup(pytest.RaisesExc(ScenarioError, match="before answer to stop")):
        await _stop(tmp_path, "abort", "Segmentation fault in something else")
