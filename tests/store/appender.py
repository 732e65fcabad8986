"""The store's C append path for the tests that exercise it: ``APPENDER`` (``store._appender``, ``None`` when it is
not built) and ``requires_appender``, their skip marker. The marker also skips when the store does not bind the
extension (``ROCKETRIO_PURE_PYTHON=1``: the encoders, and so the store, run in Python). Under ``CI=true`` (CI has a
compiler) a missing extension fails at import instead of skipping."""

from __future__ import annotations

import os
from types import ModuleType

import pytest

from store import message_store


def _extension() -> ModuleType | None:
    try:
        from store import _appender
    except ImportError:
        return None
    return _appender


APPENDER = _extension()
if APPENDER is None and os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
    raise RuntimeError("store._appender is not built: CI has a compiler, `pip install -e .` must build it")
#: Whether a MessageStore binds the C path as its ``append`` (the extension is built and the encoders are native).
BOUND = APPENDER is not None and message_store._APPENDER is not None
requires_appender = pytest.mark.skipif(
    not BOUND, reason="store._appender is not built (no compiler at install) or ROCKETRIO_PURE_PYTHON=1"
)
