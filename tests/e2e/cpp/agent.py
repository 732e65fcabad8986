"""Driver for the Apache C++ RocketMQ client (``rocketmq-python-cvs``) in rocketrio's end-to-end tests.

Runs under the interpreter of ``.venv-cvs`` (its module is ``rocketmq``), one producer or one push consumer per
process, steered by JSON commands on stdin and reporting JSON events on stdout, one object per line, in the same
protocol as ``tests/e2e/node/agent.js``::

    python agent.py producer --namesrv 127.0.0.1:9876 --group PG --logs DIR
        stdin  {"op":"produce","id":1,"messages":[{"topic","tags","keys","body","props":{...}}, ...]}
        stdout {"ev":"sent","key","ok","status","msgId","queueOffset","sendTs"} per message, then
               {"ev":"done","id":1,"ok":N,"failed":M}
    python agent.py consumer --namesrv ADDR --group CG --topic T --props seq,origin --logs DIR [--instance NAME]
        stdout {"ev":"recv", ...} per message the callback accepted
        stdin  {"op":"stop","id":2}: stop accepting, shut the consumer down (it persists offsets), {"ev":"done"}

Both emit ``{"ev":"ready"}`` once started. The consumer callback runs on the client's native threads, so output is
serialised by a lock. Every message the callback returns from is reported, including those consumed while the
client shuts down (it joins its consume threads, so a callback cannot be left pending the way the ali-ons driver
leaves one). ``--slow-after N`` makes the callback take 50 ms per message after N messages, so a consumer told to
stop midway does stop midway. stdin closing means stop.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import threading
import time
from typing import Any

from rocketmq.client import (  # type: ignore[import-not-found]  # lives in .venv-cvs only
    Message,
    Producer,
    PushConsumer,
    RecvMessage,
    SendStatus,
)
from rocketmq.exceptions import ffi_check  # type: ignore[import-not-found]
from rocketmq.ffi import dll  # type: ignore[import-not-found]

_out_lock = threading.Lock()


def emit(obj: dict[str, Any]) -> None:
    line = json.dumps(obj, ensure_ascii=False)
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def now_ms() -> int:
    return int(time.time() * 1000)


def _text(value: bytes | str | None) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def describe_received(msg: RecvMessage, prop_names: list[str]) -> dict[str, Any]:
    props = {}
    for name in prop_names:
        value = _text(msg.get_property(name))
        if value:
            props[name] = value
    return {
        "ev": "recv",
        "topic": msg.topic,
        "tags": _text(msg.tags),
        "keys": _text(msg.keys),
        "body": _text(msg.body) or "",
        "props": props,
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "msgId": msg.id,
        "bornTs": msg.born_timestamp,
        "recvTs": now_ms(),
        "reconsumeTimes": msg.reconsume_times,
    }


def read_commands() -> Any:
    for line in sys.stdin:
        if line.strip():
            yield json.loads(line)


def run_producer(args: argparse.Namespace) -> None:
    producer = Producer(args.group)
    producer.set_namesrv_addr(args.namesrv)
    producer.set_log_root_path(args.logs)
    producer.start()
    emit({"ev": "ready"})
    try:
        for cmd in read_commands():
            if cmd["op"] == "stop":
                emit({"ev": "done", "id": cmd.get("id")})
                return
            if cmd["op"] != "produce":
                emit({"ev": "error", "id": cmd.get("id"), "error": f"unknown op {cmd['op']}"})
                continue
            ok = failed = 0
            for spec in cmd["messages"]:
                msg = Message(spec["topic"])
                if spec.get("tags"):
                    msg.set_tags(spec["tags"])
                if spec.get("keys"):
                    msg.set_keys(spec["keys"])
                for name, value in spec.get("props", {}).items():
                    msg.set_property(name, value)
                msg.set_body(spec["body"])
                send_ts = now_ms()
                try:
                    res = producer.send_sync(msg)
                except Exception as exc:  # the client raises its own exception types for every failure
                    failed += 1
                    emit({"ev": "sent", "key": spec.get("keys"), "ok": False, "error": str(exc), "sendTs": send_ts})
                    continue
                good = res.status == SendStatus.OK
                ok += good
                failed += not good
                emit(
                    {
                        "ev": "sent",
                        "key": spec.get("keys"),
                        "ok": good,
                        "status": res.status.name,
                        "msgId": res.msg_id,
                        "queueOffset": res.offset,
                        "sendTs": send_ts,
                    }
                )
            emit({"ev": "done", "id": cmd.get("id"), "ok": ok, "failed": failed})
    finally:
        producer.shutdown()


def run_consumer(args: argparse.Namespace) -> None:
    prop_names = [p for p in args.props.split(",") if p]
    consumer = PushConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    consumer.set_log_root_path(args.logs)
    if args.instance:
        consumer.set_instance_name(args.instance)
    # The 2.1.0 core crashes in shutdown() when message trace is off (it shuts down a trace producer it never
    # created), which would skip the final offset commit; with trace on, that producer exists. The wrapper has no
    # setter, so call the C API directly: CTraceModel OPEN is 0.
    set_trace = dll.SetPushConsumerMessageTrace
    set_trace.argtypes = [ctypes.c_void_p, ctypes.c_int]
    set_trace.restype = ctypes.c_int
    ffi_check(set_trace(consumer._handle, 0))

    accepted = 0
    count_lock = threading.Lock()

    def on_message(msg: RecvMessage) -> None:
        nonlocal accepted
        with count_lock:
            accepted += 1
            slow = args.slow_after and accepted > args.slow_after
        if slow:
            time.sleep(0.05)
        emit(describe_received(msg, prop_names))

    consumer.subscribe(args.topic, on_message)
    consumer.start()
    emit({"ev": "ready"})
    stop_id: object = None
    for cmd in read_commands():
        if cmd["op"] == "stop":
            stop_id = cmd.get("id")
            break
        emit({"ev": "error", "id": cmd.get("id"), "error": f"unknown op {cmd['op']}"})
    consumer.shutdown()
    emit({"ev": "done", "id": stop_id})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("role", choices=["producer", "consumer"])
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", default="")
    parser.add_argument("--props", default="")
    parser.add_argument("--instance", default="")
    parser.add_argument("--slow-after", type=int, default=0)
    parser.add_argument("--logs", required=True, help="directory for the C++ client's own log files")
    args = parser.parse_args()
    os.makedirs(args.logs, exist_ok=True)
    # The consumer ignores SetPushConsumerLogPath and logs under /logs unless this variable names a directory.
    os.environ["ROCKETMQ_CLIENT_LOG_DIR"] = args.logs
    if args.role == "producer":
        run_producer(args)
    else:
        run_consumer(args)
    sys.stdout.flush()
    # The client's native threads may outlive shutdown(); do not wait for them at interpreter exit.
    os._exit(0)


if __name__ == "__main__":
    main()
