"""Typed store errors. Everything the store raises on bad input, bad files or refused writes is a
:class:`StoreError` subclass, so the broker maps store failures to RocketMQ response codes in one place.

Subclasses live next to the code that raises them (for example ``store.index.IndexFileCorruptError`` and
``store.config_files.ConfigFileError``) or here when several modules share them.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base of every error raised by ``store/``."""
