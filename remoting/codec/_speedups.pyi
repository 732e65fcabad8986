"""Types of the C extension; the contract is in :mod:`remoting.codec.record_batch`."""

from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet

from remoting.codec.message import MessageExt, MessageRecord

def encode_entries_into(
    buf: object,
    pos: int,
    room: int,
    phy_offset: int,
    first_queue_offset: int,
    clock: Callable[[], int],
    max_body: int,
    topic: bytes,
    sys_flag: int,
    queue_id: int,
    born_timestamp: int,
    born_host: bytes,
    store_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    entries: Sequence[tuple[bytes | memoryview, str, int]],
    /,
) -> tuple[int, bytes, int]: ...
def encode_records_into(
    buf: object,
    pos: int,
    room: int,
    phy_offset: int,
    first_queue_offset: int,
    clock: Callable[[], int],
    max_body: int,
    records: Sequence[MessageRecord],
    /,
) -> tuple[int, bytes, int]: ...
def encode_record_into(
    buf: object,
    pos: int,
    room: int,
    phy_offset: int,
    queue_offset: int,
    clock: Callable[[], int],
    max_body: int,
    record: MessageRecord,
    /,
) -> tuple[int, int, int]: ...
def scan_records(
    buf: object, pos: int, limit: int, base: int, with_index: bool, entries: bool = False, /
) -> tuple[int, int, int, list[tuple[str, int, int, bytes]], list[tuple[int, bytes]]]: ...
def index_put_hashed(
    buf: object, packed: bytes, number: int, limit: int, slots: int, entries_at: int, time_diff: int, /
) -> tuple[int, int]: ...
def crc32(data: bytes | bytearray | memoryview, /) -> int: ...

#: Whether the CRC runs on PCLMULQDQ (else zlib's table loop).
CLMUL_CRC: int

def decode_pull_records(
    data: bytes, pos: int, out: list[MessageExt], extra: dict[str, str] | None, tags: AbstractSet[str] | None, /
) -> int: ...

#: Whether decode_pull_records can run (MessageExt is the slotted class it fills).
PULL_DECODE: int

def send_v2_fields(
    fields: dict[str, object], allowed: AbstractSet[str], /
) -> tuple[int, str, str | None, int, int, int, int, int] | None: ...
def split_stored_entries(
    body: bytes | bytearray | memoryview, suffix: str, /
) -> list[tuple[bytes, str, int]] | None: ...
def encode_batch_parts(entries: list[tuple[bytes, bytes, int]], /) -> bytes | None: ...
