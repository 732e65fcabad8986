"""The codec's C extension (``remoting.codec._speedups``) for the modules that have a C twin: loaded once, or None
when it is not built or ``ROCKETRIO_PURE_PYTHON=1`` (every caller then runs its pure-Python twin)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["native_module", "optional_extension"]


def optional_extension(name: str) -> ModuleType | None:
    """C extension ``name``, unless it is not built or ``ROCKETRIO_PURE_PYTHON=1`` (every caller then runs its
    pure-Python twin); the one switch for the codec's and DLedger's extensions."""
    if os.environ.get("ROCKETRIO_PURE_PYTHON") == "1":
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def native_module() -> ModuleType | None:
    """The codec's C extension, unless it is not built or ``ROCKETRIO_PURE_PYTHON=1``."""
    return optional_extension("remoting.codec._speedups")
