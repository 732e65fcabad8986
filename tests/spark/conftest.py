"""Spark test fixtures: one SparkSession (``local[2]``, UI off, 2 shuffle partitions) and one embedded cluster for
the whole run.

The cluster runs on a Trio loop in a background thread (:class:`tests.client.conftest.ThreadedCluster`) on
127.0.0.1 port 0; Spark's Python workers reach it over real sockets. Every test uses its own topics.

Without pyspark or Java >= 17 these tests fail with the reason: ``make test`` installs both (the ``dev`` extra and,
through ``scripts/setup-system``, Debian's ``openjdk-17-jre-headless``), so a missing one is a broken set-up.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.threaded_cluster import ThreadedCluster


def _java_major() -> int | None:
    java = shutil.which("java")
    if java is None:
        return None
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    found = re.search(r'version "(\d+)', out.stderr + out.stdout)
    return int(found.group(1)) if found else None


def _missing() -> str | None:
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        return f"pyspark/pyarrow not installed ({exc}); pip install -e '.[spark]'"
    major = _java_major()
    if major is None or major < 17:
        return f"PySpark 4 needs Java >= 17; found {major or 'no java'}"
    return None


@pytest.fixture(scope="session")
def pyspark_ready() -> None:
    """Fail when pyspark, pyarrow or Java >= 17 is missing."""
    reason = _missing()
    if reason is not None:
        pytest.fail(f"Spark tests cannot run: {reason}")


@pytest.fixture(scope="session")
def spark(pyspark_ready: None) -> Iterator[Any]:
    """The session's SparkSession with the ``rocketmq`` source registered."""
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # Spark's Python workers unpickle the tests' own data source classes (tests.spark.flaky) by module name.
    root = str(Path(__file__).resolve().parents[2])
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    from spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("rocketrio-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def rocketmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedCluster]:
    """A name server and a broker for every Spark test."""
    threaded = ThreadedCluster(tmp_path_factory.mktemp("spark-cluster")).start()
    try:
        yield threaded
    finally:
        threaded.stop()


@pytest.fixture
def checkpoint(tmp_path: Path) -> str:
    return str(tmp_path / "checkpoint")
