"""GET_TIMER_CHECK_POINT's body as RocketMQ 5's ``TimerCheckpoint.encode`` writes it: seven big-endian longs; a body
of the first four only (an older writer) decodes with a zero data version; anything shorter is a CodecError."""

from __future__ import annotations

import struct

import pytest

from remoting.codec.bodies.timer_checkpoint import TimerCheckpointBody
from remoting.codec.errors import CodecError


def test_the_56_byte_layout_round_trips() -> None:
    body = TimerCheckpointBody(1_700_000_000_123, 4096, 17, 18, 3, 1_700_000_000_000, 9)
    raw = body.encode()
    assert raw == struct.pack(">7q", 1_700_000_000_123, 4096, 17, 18, 3, 1_700_000_000_000, 9)
    assert TimerCheckpointBody.decode(raw) == body


def test_a_body_without_the_data_version_decodes_and_a_shorter_one_is_refused() -> None:
    assert TimerCheckpointBody.decode(struct.pack(">4q", 5, 6, 7, 8)) == TimerCheckpointBody(5, 6, 7, 8)
    with pytest.raises(CodecError):
        TimerCheckpointBody.decode(b"\x00" * 31)
