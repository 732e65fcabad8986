"""Locating py-spy for the benchmarks' ``--profile`` re-runs."""

from __future__ import annotations

import os
import shutil
import sys


def py_spy() -> str:
    """py-spy from PATH, else the one installed next to this interpreter (a venv that is not activated)."""
    return shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
