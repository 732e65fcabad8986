"""Fixtures shared by every test package: an embedded cluster (name server + broker) on 127.0.0.1 port 0."""

from __future__ import annotations

import errno
import os
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio.testing
from hypothesis import settings

from broker.embedded import EmbeddedCluster
from tests.virtual_clock import thread_patient_clock

# Hypothesis' per-example deadline is a wall-clock threshold; on a loaded 2-core CI machine it fails correct code.
settings.register_profile("rocketrio", deadline=None)
settings.load_profile("rocketrio")

#: Small files that still hold a maximal (4 MiB) message, so no test maps a gigabyte.
SMALL_STORE: dict[str, Any] = {
    "mapped_file_size_commit_log": 8 << 20,
    "mapped_file_size_consume_queue": 10_000 * 20,
    "max_hash_slot_num": 4096,
    "max_index_num": 16_384,
    "mapped_file_size_timer_log": 1 << 20,  # Java's 100 MiB would be taken at a test's first timer message
}

#: For a test that runs for virtual minutes or hours and tests no timer message: the timer saves its checkpoint once
#: a minute, not every second (each save is a worker thread with two fsyncs, and the suite's clock waits for it).
QUIET_TIMER: dict[str, Any] = {"timer_flush_interval_ms": 60_000}
#: :data:`QUIET_TIMER`, and the store's flushes once a minute too instead of every 500 ms and every second.
QUIET_FILES: dict[str, Any] = {
    **QUIET_TIMER,
    "flush_interval_commit_log": 60_000,
    "flush_interval_consume_queue": 60_000,
}


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


#: For tests that listen on ``::1``: skipped on a host without an IPv6 loopback (some containers).
needs_ipv6_loopback = pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback")


@pytest.fixture(params=["unix-socket", "under-a-file"])
def unreadable_conf(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A ``-c`` path that even root cannot read though it is no directory, and the OS's reason (``strerror``): a Unix
    socket (opening it gives ENXIO) or a path under a regular file (ENOTDIR). The socket lives in a short temporary
    directory, as a socket path is limited to 107 bytes."""
    if request.param == "under-a-file":
        (tmp_path / "file").write_text("")
        yield tmp_path / "file" / "broker.conf", os.strerror(errno.ENOTDIR)
        return
    with tempfile.TemporaryDirectory() as short, socket.socket(socket.AF_UNIX) as sock:
        sock.bind(os.path.join(short, "broker.conf"))
        yield Path(short, "broker.conf"), os.strerror(errno.ENXIO)


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    """pytest-trio's fixture of that name, with a clock that holds still while a worker thread is busy
    (tests/virtual_clock.py)."""
    return thread_patient_clock()


@pytest.fixture
async def embedded_cluster(tmp_path: Path) -> AsyncIterator[EmbeddedCluster]:
    """A running name server and broker under ``tmp_path / "cluster"`` with small segments; stopped cleanly after."""
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE) as cluster:
        yield cluster


@pytest.fixture
async def quiet_timer_cluster(tmp_path: Path) -> AsyncIterator[EmbeddedCluster]:
    """:func:`embedded_cluster` whose timer saves its checkpoint once a minute (:data:`QUIET_TIMER`)."""
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE, **QUIET_TIMER) as cluster:
        yield cluster
