"""The DLedger member's C extension (``dledger._entries``, dledger/_entries.c): loaded once, or None when it is not
built or ``ROCKETRIO_PURE_PYTHON=1`` (dledger/messages.py and dledger/file_store.py then run their Python twins)."""

from __future__ import annotations

from types import ModuleType

from remoting.codec.native import optional_extension

__all__ = ["entries_module"]


def entries_module() -> ModuleType | None:
    """The C extension, unless it is not built or ``ROCKETRIO_PURE_PYTHON=1``."""
    return optional_extension("dledger._entries")
