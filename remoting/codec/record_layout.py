"""The message record's byte layout (docs/protocol.md#51-record-layout, docs/protocol.md#52-message-sysflag): magic
words, sysFlag bits, limits and the shared structs.

Owned here so the record encoder (:mod:`remoting.codec.message`), the record decoder
(:mod:`remoting.codec.record_decode`), the batch body (:mod:`remoting.codec.batch_body`) and the pull-body fast path
agree on one definition. Constants only: nothing here raises or performs I/O.
"""

from __future__ import annotations

import struct
from typing import Final

MAGIC_V1: Final = 0xDAA320A7
BLANK_MAGIC: Final = 0xCBD43194

SYSFLAG_COMPRESSED: Final = 0x1
SYSFLAG_MULTI_TAGS: Final = 0x2
SYSFLAG_TRANSACTION_MASK: Final = 0xC
SYSFLAG_TRANSACTION_NOT_TYPE: Final = 0x0
SYSFLAG_TRANSACTION_PREPARED: Final = 0x4
SYSFLAG_TRANSACTION_COMMIT: Final = 0x8
SYSFLAG_TRANSACTION_ROLLBACK: Final = 0xC
SYSFLAG_BORNHOST_V6: Final = 0x10
SYSFLAG_STOREHOST_V6: Final = 0x20

MAX_TOPIC_BYTES: Final = 127
MAX_PROPERTIES_BYTES: Final = 32767
#: Fixed bytes of a record with IPv4 hosts; each IPv6 host adds 12.
RECORD_OVERHEAD_V4: Final = 91

#: Fixed positions (independent of the host sizes): magic @4, queue offset @20, physical offset @28, sysFlag @36.
POS_MAGIC: Final = 4

#: The big-endian int16 length field before the properties (records and batch entries).
SHORT: Final = struct.Struct(">h")

#: Precomputed per (born host length, store host length): everything up to and including the body length.
FIXED: Final = {(b, s): struct.Struct(f">iIiiiqqiq{b}sq{s}siqi") for b in (8, 20) for s in (8, 20)}

#: :data:`FIXED` split for batches: the fields each record has of its own (size to physical offset) ...
HEAD: Final = struct.Struct(">iIiiiqq")
#: ... and the rest, equal across a batch's records with one template and body length (sysFlag to body length).
MIDDLE: Final = {(b, s): struct.Struct(f">iq{b}sq{s}siqi") for b in (8, 20) for s in (8, 20)}
