"""Child process of the crash test: appends under SYNC_FLUSH (or the flush type given) with several concurrent
writers and writes one line per acknowledged put to stdout (``phy size writer run seq queue_offset``) until it is
SIGKILLed.

Run as ``python -m tests.store.crash_child <root> <run> [<storePathCommitLog> [<flushDiskType>]]`` from the
repository root. Under ASYNC_FLUSH the CommitLog's segments are :data:`ASYNC_SEGMENT` bytes, so the periodic flush's
least pages leave an unsynced tail in them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import trio

from store.message_store import MessageStore
from store.store_config import FlushDiskType
from tests.store.store_helpers import STORE_HOST, message, small_config

WRITERS = 8
QUEUES = 4
SYNC_SEGMENT = 16 * 1024
ASYNC_SEGMENT = 256 * 1024


def segment_size(flush: FlushDiskType) -> int:
    return SYNC_SEGMENT if flush is FlushDiskType.SYNC_FLUSH else ASYNC_SEGMENT


def body_for(run: int, writer: int, seq: int) -> bytes:
    return f"{run}:{writer}:{seq}|".encode() * ((seq * 7 + writer) % 40 + 1)


async def main(root: Path, run: int, commit_log_paths: str = "", flush_type: str = "SYNC_FLUSH") -> None:
    flush = FlushDiskType(flush_type)
    config = small_config(root, flush_disk_type=flush, store_path_commit_log=commit_log_paths,
                          mapped_file_size_commit_log=segment_size(flush))  # fmt: skip
    store = MessageStore(config, store_host=STORE_HOST)
    store.load()
    os.write(1, b"ready\n")

    async def writer(w: int) -> None:
        seq = 0
        while True:
            result = await store.put(message(body=body_for(run, w, seq), queue_id=w % QUEUES))
            if result.ok:
                a = result.append
                os.write(1, f"{a.phy_offset} {a.size} {w} {run} {seq} {a.queue_offset}\n".encode())
            seq += 1
            if flush is FlushDiskType.ASYNC_FLUSH:
                await trio.sleep(0)  # an ASYNC_FLUSH put answers at once: let the flush service run

    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        for w in range(WRITERS):
            nursery.start_soon(writer, w)


if __name__ == "__main__":
    trio.run(main, Path(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:5])
