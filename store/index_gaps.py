"""The durable side of the index's gaps (:meth:`store.index.IndexService.gaps`): the record of the index files
:meth:`~store.index.IndexService.load` deleted whose keys are not indexed again yet, and the refill's files until
the refill counts (docs/protocol.md#64-indexfile).

Owned by :class:`~store.index.IndexService` (its owner thread). The steps, so that a crash at any point leaves either
the gap recorded (the next start deletes what the refill wrote and refills again) or the refilled files:

1. ``load`` adds the unusable files' names to ``index/dropped`` (:func:`record_dropped`: replaced atomically and
   fsynced) and only then deletes the files;
2. a refill writes its files as ``<name>.refill`` (:func:`refill_path`) and flushes them;
3. it rewrites the record without the gap's names: from here on the refill counts;
4. it renames its files to ``<name>``.

On the next ``load`` :func:`settle_refills` deletes the files of a refill cut short before step 3 (its gap is still
recorded: it is refilled again) and finishes step 4 for the others. Errors: ``OSError`` propagates.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Collection
from pathlib import Path
from typing import Final

from store.index_file import IndexFile
from store.metadata_files import fsync_directory, replace_atomically

#: The record of deleted files not refilled yet: their names, one a line.
DROPPED_RECORD: Final = "dropped"
#: A refill's file until the refill counts.
REFILL_SUFFIX: Final = ".refill"


def is_index_file_name(name: str) -> bool:
    """Java's index file name: the 17 digits of ``yyyyMMddHHmmssSSS``."""
    return len(name) == 17 and name.isdigit()


def refill_path(directory: Path, name: str) -> Path:
    """Where a refill writes the file it will rename to ``name``."""
    return directory / (name + REFILL_SUFFIX)


def read_dropped(directory: Path) -> set[str]:
    """The names in the record (none when there is no record)."""
    try:
        text = (directory / DROPPED_RECORD).read_text()
    except FileNotFoundError:
        return set()
    return {name for name in text.split() if is_index_file_name(name)}


def record_dropped(directory: Path, names: Collection[str]) -> None:
    """Make the record hold ``names``, durably (no names: no record)."""
    path = directory / DROPPED_RECORD
    if names:
        data = "".join(f"{name}\n" for name in sorted(names)).encode()
        replace_atomically(path, data, path.with_name(DROPPED_RECORD + ".tmp"))
    elif path.exists():
        path.unlink()
        fsync_directory(directory)


def commit_refill(directory: Path, dropped: Collection[str], files: list[IndexFile]) -> None:
    """Steps 2 (the flush) to 4 for a refill's ``files``: the record is left holding ``dropped``."""
    for file in files:
        file.flush()
    record_dropped(directory, dropped)
    for file in files:
        file.rename(directory / file.path.name.removesuffix(REFILL_SUFFIX))
    if files:
        fsync_directory(directory)


def settle_refills(directory: Path, dropped: Collection[str], names: list[str]) -> list[str]:
    """Deal with the ``.refill`` files a crash left: one whose gap is still recorded (the nearest of ``dropped``
    and of the index files ``names`` at or below its name is a dropped one: a refill writes from its gap's first
    name on) is deleted; the others' refill counted, and they are renamed into place. Returns the index file names
    there are now, sorted."""
    leftovers = sorted(directory.glob("*" + REFILL_SUFFIX))
    if not leftovers:
        return names
    marks = sorted(set(dropped) | set(names))
    present = set(names)
    for path in leftovers:
        name = path.name.removesuffix(REFILL_SUFFIX)
        if not is_index_file_name(name):
            continue
        at = bisect.bisect_right(marks, name) - 1
        if at >= 0 and marks[at] in dropped:
            path.unlink()
        else:
            os.replace(path, directory / name)
            present.add(name)
    fsync_directory(directory)
    return sorted(present)
