"""The C extension for the tests that exercise it: ``SPEEDUPS`` (``None`` when it is not built) and
``requires_speedups``, their skip marker. The marker also skips under ``ROCKETRIO_PURE_PYTHON=1``, where the encoders
run in Python and these tests, which compare the extension with them, would compare Python with itself. Under
``CI=true`` (CI has a compiler) a missing extension fails at import instead of skipping."""

from __future__ import annotations

import os
from types import ModuleType

import pytest

from remoting.codec import record_batch


def _extension() -> ModuleType | None:
    try:
        from remoting.codec import _speedups
    except ImportError:
        return None
    return _speedups


SPEEDUPS = _extension()
if SPEEDUPS is None and os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
    raise RuntimeError("remoting.codec._speedups is not built: CI has a compiler, `pip install -e .` must build it")
requires_speedups = pytest.mark.skipif(
    not record_batch.NATIVE,
    reason="remoting.codec._speedups is not built (no compiler at install) or ROCKETRIO_PURE_PYTHON=1",
)
