"""Typed store errors. Everything the store raises on bad input, bad files or refused writes is a
:class:`StoreError` subclass, so the broker maps store failures to RocketMQ response codes in one place.

Subclasses live next to the code that raises them (for example ``store.index_file.IndexFileCorruptError`` and
``store.metadata_files.ConfigFileError``) or here when several modules share them.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base of every error raised by ``store/``."""


class PutRefusedError(StoreError):
    """A put was refused before anything was written. ``put_status`` names the RocketMQ put status the broker maps
    to a response code; the message (``str(err)``) is the remark for the client."""

    put_status = "UNKNOWN_ERROR"


class MessageIllegalError(PutRefusedError):
    """Body above ``maxMessageSize``, topic above 127 bytes, record larger than a segment (MESSAGE_ILLEGAL)."""

    put_status = "MESSAGE_ILLEGAL"


class PropertiesSizeExceededError(MessageIllegalError):
    """Properties string above 32767 bytes (PROPERTIES_SIZE_EXCEEDED, answered as MESSAGE_ILLEGAL)."""

    put_status = "PROPERTIES_SIZE_EXCEEDED"


class ServiceNotAvailableError(PutRefusedError):
    """The store refuses writes: disk above the critical ratio, shut down, or opened read-only."""

    put_status = "SERVICE_NOT_AVAILABLE"


class PageCacheBusyError(PutRefusedError):
    """The store cannot take the put now: RocketMQ's OS_PAGECACHE_BUSY, which DLedgerCommitLog reports for any append
    its DLedger server refuses (a leadership transfer, a full pending queue, an entry no data file holds)."""

    put_status = "OS_PAGECACHE_BUSY"


class CreateMappedFileError(PutRefusedError):
    """A new segment could not be made (ENOSPC, permissions): RocketMQ's CREATE_MAPEDFILE_FAILED. The message was not
    written; the log ends where it did."""

    put_status = "CREATE_MAPPED_FILE_FAILED"


class StoreCorruptError(StoreError):
    """On-disk state the store cannot use: a segment of the wrong size or name, an offset gap between segments."""


class OffsetMismatchError(StoreError):
    """A replica append does not start at the CommitLog's current end."""
