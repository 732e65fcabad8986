"""``ROCKETRIO_PURE_PYTHON=1`` puts every place the C extensions plug into on its Python code (what a user without a
compiler runs: the whole suite runs once more that way in CI), and without it each place takes the C code when the
extensions are built. Each setting is probed in a child interpreter, so the test holds in either run of the suite."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

#: Prints, for each place the C code can be bound, whether it is.
PROBE = """
import json, sys
from pathlib import Path
from remoting.codec import batch_body, pull_body, record_batch, send_frame, send_header
from store import message_store, results
from dledger import file_store, messages
from tests.store.store_helpers import message, open_store

store = open_store(Path(sys.argv[1]))
print(json.dumps({
    "record_batch encoders": record_batch.NATIVE,
    "encode_entries_into": record_batch._speedups is not None,
    "store's record encoder": message_store.encode_record_into is not record_batch._py_record_into,
    "store's records encoder": message_store.encode_records_into is not record_batch._py_records_into,
    "Appender": message_store._APPENDER is not None,
    "AppendResult": results.AppendResult is not results.PyAppendResult,
    "store.append": type(getattr(store.append, "__self__", None)).__name__ == "Appender",
    "store.append_batch": type(getattr(store.append_batch, "__self__", None)).__name__ == "Appender",
    "an append's result": type(store.append(message())) is not results.PyAppendResult,
    "pull-body decoder": pull_body.NATIVE,
    "producer's send frame and result": send_frame.NATIVE,
    "send fast path's header check": send_header.NATIVE,
    "batch body split": batch_body._native("split_stored_entries") is not None,
    "batch body encoder": batch_body._native("encode_batch_parts") is not None,
    "DLedger push encode and decode": messages._native is not None,
    "DLedger follower write and leader seal": file_store._native is not None,
}))
store.close()
"""


def _built() -> bool:
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("remoting.codec._speedups", "store._appender", "dledger._entries")
    )


@pytest.mark.parametrize("pure", ["1", None], ids=["ROCKETRIO_PURE_PYTHON=1", "unset"])
def test_the_switch_decides_every_c_binding(tmp_path: Path, pure: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ROCKETRIO_PURE_PYTHON"}
    if pure is not None:
        env["ROCKETRIO_PURE_PYTHON"] = pure
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    bound = json.loads(done.stdout)
    native = pure is None and _built()
    assert bound == dict.fromkeys(bound, native)
    assert len(bound) == 16
