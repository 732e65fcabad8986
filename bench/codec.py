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

Serialize types alternate within each of ``--rounds`` rounds; ``ops_per_s`` is the median over rounds and ``vs_json``
the median of the per-round ratios, so it compares serialize types within one run even on a busy machine. Absolute
numbers vary from machine to machine.
``--profile`` re-runs the same measurement under ``py-spy record`` and writes ``bench/results/codec.svg``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Final

from bench.profiling import py_spy
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
    """Operations per second of ``fn`` over about ``duration`` seconds (each call performs ``ops_per_call``)."""
    calls = 0
    start = time.perf_counter()
    deadline = start + duration
    while True:
        for _ in range(20):
            fn()
        calls += 20
        now = time.perf_counter()
        if now >= deadline:
            return calls * ops_per_call / (now - start)


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


def measure(duration: float, rounds: int) -> None:
    for case, build in (("send_request", send_request), ("send_response", send_response)):
        for op in ("encode", "decode"):
            cmds = {serialize_type: build(serialize_type) for serialize_type in SerializeType}
            fns = {
                serialize_type: encoder(cmd) if op == "encode" else stream_decoder(cmd)
                for serialize_type, cmd in cmds.items()
            }
            per_call = 1 if op == "encode" else FRAMES_PER_FEED
            # Serialize types alternate within each round, so a noisy neighbour hits all of them alike; the
            # reported figures are medians over rounds, and vs_json is the median of per-round ratios.
            samples: dict[SerializeType, list[float]] = {serialize_type: [] for serialize_type in SerializeType}
            ratios: dict[SerializeType, list[float]] = {serialize_type: [] for serialize_type in SerializeType}
            for _ in range(rounds):
                this_round = {st: rate(fn, per_call, duration / rounds) for st, fn in fns.items()}
                for serialize_type, ops in this_round.items():
                    samples[serialize_type].append(ops)
                    ratios[serialize_type].append(ops / this_round[SerializeType.JSON])
            for serialize_type, cmd in cmds.items():
                emit(
                    {
                        "bench": "codec",
                        "case": case,
                        "op": op,
                        "serialize": serialize_type.name,
                        "frame_bytes": len(encode_command(cmd)),
                        "ops_per_s": round(statistics.median(samples[serialize_type])),
                        "vs_json": round(statistics.median(ratios[serialize_type]), 3),
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
        ops = statistics.median(rate(fn, 1, duration / rounds) for _ in range(rounds))
        emit({"bench": "codec", "case": case, "op": "header", "ops_per_s": round(ops)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--duration", type=float, default=0.15, help="seconds per case and serialize type")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per case (medians are reported)")
    parser.add_argument("--profile", action="store_true", help="re-run under py-spy, writing bench/results/codec.svg")
    args = parser.parse_args()
    measure(args.duration, args.rounds)
    if args.profile:
        os.makedirs("bench/results", exist_ok=True)
        argv = [sys.executable, "-m", "bench.codec", "--duration", str(max(args.duration, 0.5)), "--rounds", "1"]
        subprocess.run([py_spy(), "record", "-o", "bench/results/codec.svg", "--", *argv], check=True)


if __name__ == "__main__":
    main()
