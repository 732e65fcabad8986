"""Writing changed properties back to ``broker.conf`` (RocketMQ's ``Configuration.persist`` after an
UPDATE_BROKER_CONFIG), so a restart with the same ``-c`` file keeps them.

Unlike Java, which rewrites the file as a dump of every setting, only the changed keys are touched: each line that
defines one gets the new value (keeping its indentation and separator; a value continued over several lines with
``\\`` becomes one line), keys the file lacks are appended at the end, and every other line (comments, blank lines,
keys we do not know) is kept byte for byte.

The write is atomic: a temp file next to it, fsynced, renamed over the original, then the directory fsynced; a
crash leaves either the old or the new file. Blocking; errors are ``OSError`` (the caller logs them: the running
broker already uses the new values).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from store.metadata_files import replace_atomically

__all__ = ["persist_properties", "rewrite_properties"]


def _logical_lines(lines: list[str]) -> list[tuple[int, int, str]]:
    """``(first, end, text)`` per logical line: physical lines ``[first, end)`` joined where one ends with ``\\``."""
    out = []
    i = 0
    while i < len(lines):
        first = i
        text = lines[i].strip()
        i += 1
        while text.endswith("\\") and not text.startswith(("#", "!")) and i < len(lines):
            text = text[:-1] + lines[i].strip()
            i += 1
        out.append((first, i, text))
    return out


def _key_of(text: str) -> str | None:
    if not text or text[0] in "#!":
        return None
    seps = [i for i in (text.find("="), text.find(":")) if i >= 0]
    return text[: min(seps)].strip() if seps else text.rstrip("\\")


def rewrite_properties(text: str, changes: Mapping[str, str]) -> str:
    """``text`` (a properties file) with each key of ``changes`` set to its value; see the module docstring."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    written: set[str] = set()
    for first, end, logical in _logical_lines(lines):
        key = _key_of(logical)
        if key is None or key not in changes:
            out.extend(lines[first:end])
            continue
        original = lines[first]
        ending = original[len(original.rstrip("\r\n")) :] or "\n"
        # Horizontal whitespace only: "\s" would swallow the line ending of an empty value ("key=\n").
        head = re.match(r"[ \t\f]*" + re.escape(key) + r"[ \t\f]*[=:][ \t\f]*", original)
        prefix = head.group(0) if head else f"{key}="
        out.append(f"{prefix}{changes[key]}{ending}")
        written.add(key)
    missing = [key for key in changes if key not in written]
    if missing and out and not out[-1].endswith(("\n", "\r")):
        out.append("\n")
    out.extend(f"{key}={changes[key]}\n" for key in missing)
    return "".join(out)


def persist_properties(path: Path, changes: Mapping[str, str]) -> None:
    """Apply :func:`rewrite_properties` to the file at ``path`` atomically (a missing file is created)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    data = rewrite_properties(text, changes).encode("utf-8")
    replace_atomically(path, data, path.with_name(f".{path.name}.tmp"), keep_mode=True)
