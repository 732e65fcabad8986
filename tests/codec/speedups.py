"""The C extension for the tests that exercise it: ``SPEEDUPS`` (``None`` when it is not built) and
``requires_speedups``, their skip marker. The marker also skips under ``ROCKETRIO_PURE_PYTHON=1``, where the encoders
run in Python and these tests, which compare the extension with them, would compare Python with itself. Under
``CI=true`` (CI has a compiler) a missing extension fails at import instead of skipping."""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

import orjson
import pytest
from hypothesis import strategies as st

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


def json_header_variant(
    draw: st.DrawFn,
    base: dict[str, Any],
    ext_keys: st.SearchStrategy[str],
    top_keys: st.SearchStrategy[str],
    ext_values: st.SearchStrategy[object],
    top_values: st.SearchStrategy[object],
) -> dict[str, Any]:
    """``base`` (a JSON header) with some ``extFields`` and top-level values replaced by drawn ones or removed, as
    ``orjson.loads`` would give it (only what a JSON header can hold): the C header readers' property tests."""
    fields: dict[str, Any] = orjson.loads(orjson.dumps(base))
    for key in draw(st.lists(ext_keys, max_size=4)):
        if draw(st.booleans()):
            fields["extFields"][key] = draw(ext_values)
        else:
            fields["extFields"].pop(key, None)
    for key in draw(st.lists(top_keys, max_size=2)):
        if draw(st.booleans()):
            fields[key] = draw(top_values)
        else:
            fields.pop(key, None)
    result: dict[str, Any] = orjson.loads(orjson.dumps(fields))
    return result
