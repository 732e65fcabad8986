"""The body CRC is the same value whichever implementation computes it, on either side of the size crossover."""

from __future__ import annotations

import zlib

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting.codec.crc import ISAL_FROM, body_crc, crc32
from remoting.codec.errors import MessageDecodeError
from remoting.codec.message import decode_record, encode_record
from tests.codec.test_message import KNOWN

SIZES = st.one_of(st.integers(0, 2 * ISAL_FROM), st.integers(ISAL_FROM, 70_000))


@given(size=SIZES, seed=st.integers(0, 255), skip=st.integers(0, 7))
def test_crc32_equals_zlib_for_bytes_and_unaligned_views(size: int, seed: int, skip: int) -> None:
    data = bytes((seed + i * 7) & 0xFF for i in range(size + skip))
    view = memoryview(bytearray(data))[skip:]
    assert crc32(data[skip:]) == zlib.crc32(data[skip:])
    assert crc32(view) == zlib.crc32(view)
    assert body_crc(view) == zlib.crc32(view) & 0x7FFFFFFF


def test_large_body_record_round_trips_with_its_crc_checked() -> None:
    body = bytes(range(256)) * 64  # 16 KiB: the ISA-L side of the crossover
    record = encode_record(attrs.evolve(KNOWN, body=body))
    assert decode_record(record, check_crc=True).body == body
    corrupt = bytearray(record)
    corrupt[len(record) // 2] ^= 0x01
    with pytest.raises(MessageDecodeError, match="CRC"):
        decode_record(bytes(corrupt), check_crc=True)
