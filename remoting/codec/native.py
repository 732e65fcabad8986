"""The codec's C extension (``remoting.codec._speedups``) for the modules that have a C twin: loaded once, or None
when it is not built or ``ROCKETRIO_PURE_PYTHON=1`` (every caller then runs its pure-Python twin)."""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["native_module"]


def native_module() -> ModuleType | None:
    """The C extension, unless it is not built or ``ROCKETRIO_PURE_PYTHON=1``."""
    if os.environ.get("ROCKETRIO_PURE_PYTHON") == "1":
        return None
    try:
        from remoting.codec import _speedups
    except ImportError:
        return None
    return _speedups
