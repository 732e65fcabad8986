"""Where a log's segments live: RocketMQ's multi-path layout.

A CommitLog (``storePathCommitLog``) or a DLedger data directory (``storePathDLedgerCommitLog``) may name several
directories separated by ``,`` (``MessageStoreConfig.MULTI_PATH_SPLITTER``), typically one per disk. As RocketMQ
4.9.8's ``store/src/main/java/org/apache/rocketmq/store/MultiPathMappedFileQueue.java`` and DLedger 0.3.1.2's
``MultiPathMmapFileList.java`` do:

- loading maps the segments found in every directory, the read-only ones (``readOnlyCommitLogStorePaths``) included;
- a new segment goes to the writable directories (sorted by name, read-only ones left out) picked by the segment's
  number (its start offset over the segment size) modulo their count, leaving out the directories whose disk is
  fuller than the force-clean ratio (retention marks them) unless that leaves none.

Owned by the log's :class:`~store.mapped_file.MappedFileQueue`; pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import attrs

MULTI_PATH_SPLITTER = ","


def split_paths(text: str) -> tuple[Path, ...]:
    """The directories a path setting names (``,``-separated, blanks dropped), ``~`` expanded, in order."""
    parts = (part.strip() for part in text.split(MULTI_PATH_SPLITTER))
    return tuple(dict.fromkeys(Path(part).expanduser() for part in parts if part))


@attrs.frozen
class SegmentDirs:
    """The directories of one log. Raises ``ValueError`` at construction when none is writable."""

    writable: tuple[Path, ...]
    read_only: tuple[Path, ...] = ()

    def __attrs_post_init__(self) -> None:
        if not self.writable:
            raise ValueError("a log needs at least one directory")
        if not set(self.writable) - set(self.read_only):
            names = ",".join(map(str, self.writable))
            raise ValueError(f"every directory of {names} is also read-only: no segment could be written")

    @classmethod
    def of(cls, directory: Path | Iterable[Path], read_only: Iterable[Path] = ()) -> SegmentDirs:
        writable = (directory,) if isinstance(directory, Path) else tuple(directory)
        return cls(writable, tuple(read_only))

    @classmethod
    def from_settings(cls, paths: str, read_only: str, default: Path) -> SegmentDirs:
        """``paths`` as a store path setting gives it (``default`` when empty); the read-only directories count only
        when ``paths`` names several (contains ``,``), as RocketMQ uses the multi-path queue only then."""
        if not paths.strip():
            return cls((default,))
        multi = MULTI_PATH_SPLITTER in paths
        return cls(split_paths(paths), split_paths(read_only) if multi else ())

    @property
    def primary(self) -> Path:
        """The first directory named: the one a single-path log uses for everything."""
        return self.writable[0]

    @property
    def multi(self) -> bool:
        return len(self.writable) > 1 or bool(self.read_only)

    def every(self) -> tuple[Path, ...]:
        """Every directory segments may be found in: the writable ones, then the read-only ones."""
        return tuple(dict.fromkeys(self.writable + self.read_only))

    def for_segment(self, start: int, file_size: int, full: frozenset[Path] = frozenset()) -> Path:
        """The directory a new segment starting at ``start`` goes to (see the module docstring)."""
        if not self.multi:
            return self.writable[0]
        usable = set(self.writable) - set(self.read_only)
        roomy = usable - full
        choices = sorted(roomy or usable, key=str)
        return choices[(start // file_size) % len(choices)]
