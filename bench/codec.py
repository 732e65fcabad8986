"""Codec throughput: frames encoded/decoded per second and header classes parsed/built per second.

Cases, each measured for every serialize type (JSON, ROCKETMQ, CBOR):

- ``send_request``: a typical SEND_MESSAGE_V2 request as a Java 4.9.x producer sends it (letters ``a``..``n``, a
  properties string with UNIQ_KEY/WAIT/TAGS, a 128-byte body);
- ``send_response``: the broker's answer (msgId, queueId, queueOffset, MSG_REGION, TRACE_ON).

``encode`` is :func:`encode_command` (the whole frame); ``decode`` feeds a stream of identical frames to one
:class:`FrameDecoder` and drains it, the way a connection's reader task does. Header-class cases time
``parse_send_request_header`` (V2 extFields -> V1 header) and ``SendMessageResponseHeader.to_ext_fields``.

Output: one JSON object per line on stdout, e.g.::

    {"bench": "codec", "case": "send_request", "op": "decode", "serialize": "ROCKETMQ", "ops_per_s": 312000.0,
     "vs_json": 1.21}

``vs_json`` compares serialize types within this one run; absolute numbers vary from machine to machine.
``--profile`` re-runs the same measurement under ``py-spy record`` and writes ``bench/results/codec.svg``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Final

from remoting.codec.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from remoting.codec.command import RemotingCommand
from remoting.codec.frame import FrameDecoder, encode_command
from remoting.codec.headers import SendMessageRequestHeaderV2, SendMessageResponseHeader, parse_send_request_header

SEND_V2_FIELDS: Final = {
    "a": "bench_producer_group",
    "b": "BenchTopic",
    "c": "TBW102",
    "d": "4",
    "e": "1",
    "f": "0",
    "g": "1700000000000",
    "h": "0",
    "i": "UNIQ_KEY\x017F000001000118B4AAC20D5A1C0000\x02WAIT\x01true\x02TAGS\x01TagA",
    "j": "0",
    "k": "false",
    "m": "false",
    "n": "broker-a",
}
SEND_RESPONSE_FIELDS: Final = {
    "msgId": "7F00000100002A9F0000000000001F40",
    "queueId": "1",
    "queueOffset": "8000",
    "MSG_REGION": "DefaultRegion",
    "TRACE_ON": "true",
}
BODY: Final = b"m" * 128
FRAMES_PER_FEED: Final = 64


def send_request(serialize_type: SerializeType) -> RemotingCommand:
    return RemotingCommand(
        code=RequestCode.SEND_MESSAGE_V2,
        opaque=123456,
        language=LanguageCode.JAVA,
        version=409,
        ext_fields=dict(SEND_V2_FIELDS),
        body=BODY,
        serialize_type=serialize_type,
    )


def send_response(serialize_type: SerializeType) -> RemotingCommand:
    return send_request(serialize_type).response(ResponseCode.SUCCESS, ext_fields=dict(SEND_RESPONSE_FIELDS))


def rate(fn: Callable[[], object], ops_per_call: int, duration: float) -> float:
    """Best-of-3 operations per second of ``fn`` (each call performs ``ops_per_call`` operations)."""
    best = 0.0
    for _ in range(3):
        calls = 0
        start = time.perf_counter()
        deadline = start + duration / 3
        while True:
            for _ in range(50):
                fn()
            calls += 50
            now = time.perf_counter()
            if now >= deadline:
                break
        best = max(best, calls * ops_per_call / (now - start))
    return best


def encoder(cmd: RemotingCommand) -> Callable[[], object]:
    return lambda: encode_command(cmd)


def stream_decoder(cmd: RemotingCommand) -> Callable[[], object]:
    stream = encode_command(cmd) * FRAMES_PER_FEED

    def decode_stream() -> None:
        decoder = FrameDecoder()
        decoder.receive_data(stream)
        while decoder.next_command() is not None:
            pass

    return decode_stream


def emit(record: dict[str, object]) -> None:
    print(json.dumps(record), flush=True)


def measure(duration: float) -> None:
    for case, build in (("send_request", send_request), ("send_response", send_response)):
        for op in ("encode", "decode"):
            json_rate = 0.0
            for serialize_type in SerializeType:
                cmd = build(serialize_type)
                if op == "encode":
                    ops = rate(encoder(cmd), 1, duration)
                else:
                    ops = rate(stream_decoder(cmd), FRAMES_PER_FEED, duration)
                if serialize_type is SerializeType.JSON:
                    json_rate = ops
                emit(
                    {
                        "bench": "codec",
                        "case": case,
                        "op": op,
                        "serialize": serialize_type.name,
                        "frame_bytes": len(encode_command(cmd)),
                        "ops_per_s": round(ops),
                        "vs_json": round(ops / json_rate, 3),
                    }
                )

    request_fields = dict(SEND_V2_FIELDS)
    v2 = SendMessageRequestHeaderV2.from_ext_fields(request_fields)
    response = SendMessageResponseHeader.from_ext_fields(SEND_RESPONSE_FIELDS)
    header_cases: list[tuple[str, Callable[[], object]]] = [
        (
            "send_v2_from_ext_fields_to_v1",
            lambda: parse_send_request_header(RequestCode.SEND_MESSAGE_V2, request_fields),
        ),
        ("send_v2_from_ext_fields", lambda: SendMessageRequestHeaderV2.from_ext_fields(request_fields)),
        ("send_v2_to_ext_fields", v2.to_ext_fields),
        ("send_response_to_ext_fields", response.to_ext_fields),
        ("send_response_from_ext_fields", lambda: SendMessageResponseHeader.from_ext_fields(SEND_RESPONSE_FIELDS)),
    ]
    for case, fn in header_cases:
        emit({"bench": "codec", "case": case, "op": "header", "ops_per_s": round(rate(fn, 1, duration))})


def py_spy() -> str:
    """py-spy from PATH, else the one installed next to this interpreter (a venv that is not activated)."""
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return shutil.which("py-spy") or beside


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--duration", type=float, default=0.15, help="seconds per case (best of 3 thirds)")
    parser.add_argument("--profile", action="store_true", help="re-run under py-spy, writing bench/results/codec.svg")
    args = parser.parse_args()
    measure(args.duration)
    if args.profile:
        os.makedirs("bench/results", exist_ok=True)
        argv = [sys.executable, "-m", "bench.codec", "--duration", str(max(args.duration, 0.5))]
        subprocess.run([py_spy(), "record", "-o", "bench/results/codec.svg", "--", *argv], check=True)


if __name__ == "__main__":
    main()
