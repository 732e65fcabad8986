"""The DLedger member's C extension (``dledger._entries``, dledger/_entries.c): loaded once, or None when it is not
built or ``ROCKETRIO_PURE_PYTHON=1`` (dledger/messages.py and dledger/file_store.py then run their Python twins)."""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["entries_module"]


def entries_module() -> ModuleType | None:
    """The C extension, unless it is not built or ``ROCKETRIO_PURE_PYTHON=1``."""
    if os.environ.get("ROCKETRIO_PURE_PYTHON") == "1":
        return None
    try:
        from dledger import _entries
    except ImportError:
        return None
    return _entries
