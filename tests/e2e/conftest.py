"""One end-to-end session per real client, shared by every test of that client in every e2e module (see
``scenarios.py``).

A client that is not installed fails its tests with the reason (:func:`tests.e2e.harness.require`): ``make test``
installs both clients (``make e2e-deps``), so a missing one is a broken install, not an optional extra.
"""

from __future__ import annotations

import pytest
import trio

from tests.e2e.harness import CLIENT_KINDS, require
from tests.e2e.scenarios import SessionReport, run_session


@pytest.fixture(scope="session", params=sorted(CLIENT_KINDS))
def session(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> SessionReport:
    kind = CLIENT_KINDS[request.param]
    require(kind)
    work = tmp_path_factory.mktemp(f"e2e-{kind.name}")
    return trio.run(run_session, kind, work)
