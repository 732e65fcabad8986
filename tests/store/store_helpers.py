"""Shared helpers for the store tests: small-geometry configs, message builders, file snapshots and strategies."""

from __future__ import annotations

import contextlib
import os
import re
import resource
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from remoting.codec.message import MessageRecord
from remoting.codec.message_properties import encode_properties
from remoting.codec.msgid import pack_socket_address
from store.message_store import MessageStore
from store.store_config import StoreConfig

STORE_HOST = pack_socket_address("10.0.0.9", 10911)
BORN_HOST = pack_socket_address("10.0.0.7", 40000)
#: Batches of ConsumeQueue entries ``(phy offset, size, tags code)``, for comparing ConsumeQueue write paths.
CQ_ENTRY_BATCHES = st.lists(
    st.lists(st.tuples(st.integers(0, 2**40), st.integers(1, 5000), st.integers(-(2**63), 2**63 - 1)),
             min_size=1, max_size=11), min_size=1, max_size=6)  # fmt: skip


class FakeClock:
    """A settable millisecond clock for store timestamps and file ages."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        self.now += 1
        return self.now


def dirty_kib(path: Path) -> int:
    """Unsynced KiB of ``path``'s mappings in this process (``/proc/self/smaps``)."""
    total, current = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                current = line.split()[-1] == str(path)
            elif current and line.startswith(("Private_Dirty:", "Shared_Dirty:")):
                total += int(line.split()[1])
    return total


@contextlib.contextmanager
def no_descriptor_left() -> Iterator[None]:
    """The next file this process opens fails with EMFILE (every segment keeps its descriptor open: a ConsumeQueue
    file that cannot be made; a full disk's ENOSPC fails the same place)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowest_free = os.open(os.devnull, os.O_RDONLY)
    os.close(lowest_free)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def small_config(root: Path, **overrides: Any) -> StoreConfig:
    values: dict[str, Any] = {
        "mapped_file_size_commit_log": 4096,
        "mapped_file_size_consume_queue": 8 * 20,
        "max_hash_slot_num": 64,
        "max_index_num": 256,
    }
    values.update(overrides)
    return StoreConfig(root, **values)


def open_store(root: Path, **overrides: Any) -> MessageStore:
    store = MessageStore(small_config(root, **overrides), store_host=STORE_HOST)
    store.load()
    return store


def message(
    topic: str = "TopicTest",
    body: bytes = b"hello",
    queue_id: int = 0,
    tags: str | None = None,
    keys: str | None = None,
    **extra: Any,
) -> MessageRecord:
    props: dict[str, str | None] = {"TAGS": tags, "KEYS": keys}
    return MessageRecord(
        topic=topic,
        body=body,
        queue_id=queue_id,
        properties=encode_properties(props),
        born_timestamp=1_700_000_000_000,
        born_host=BORN_HOST,
        store_host=STORE_HOST,
        **extra,
    )


def files_of(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` by relative path, with its bytes: two stores written alike compare equal."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def python_append(store: MessageStore) -> MessageStore:
    """Make ``store.append`` and ``store.append_batch`` the Python methods (store/message_store.py), not the C path the
    store binds over them."""
    vars(store).pop("append", None)
    vars(store).pop("append_batch", None)
    return store
