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
    python agent.py txproducer --namesrv ADDR --group PG --logs DIR
        as producer, but every message is sent in a transaction (the C API's ``CreateTransactionProducer`` /
        ``SendMessageTransaction``; the Python wrapper has no transactional producer). User properties ``txExecute``
        and ``txCheck`` (``commit``/``rollback``/``unknown``) are what the local-transaction executor and the broker's
        check-back (CHECK_TRANSACTION_STATE, answered by the C++ core) return for that message; each call is reported
        as {"ev":"tx_execute","key","answer"} / {"ev":"tx_check","key","msgId","checkTimes","answer"}.

``--access-key AK --secret-key SK`` sign every request for a broker with ACL on (the wrapper's
``set_session_credentials``, channel ``ALIYUN``).

``--trace 1`` turns a producer's message trace on (the consumer always has it on, see ``run_consumer``).

Orderly and batch sends: a message spec with ``"orderArg": N`` goes through ``SendMessageOrderly`` with a selector
that picks queue ``N % queues``; one with ``"shardingKey": K`` through ``SendMessageOrderlyByShardingKey`` (the
core hashes K to a queue). ``{"op":"produce_batch","id","messages":[...]}`` sends all of them in one
``SendBatchMessage`` (one topic) and reports one {"ev":"sent","keys":[...],"ok","status","msgId","queueOffset"}.
``--orderly 1`` registers the consumer's callback with ``RegisterMessageCallbackOrderly`` (the core then locks its
queues on the broker with LOCK_BATCH_MQ and unlocks them at shutdown); ``--broadcast 1`` sets the message model to
BROADCASTING (offsets kept in a local file under ``$HOME``; ``--home DIR`` sets ``HOME`` for that).

A message spec may carry ``delayLevel`` (the DELAY property, set with ``set_delay_time_level``). ``--fail-times N``
makes the consumer answer RECONSUME_LATER (through the C API: the wrapper turns a raising callback into
CONSUME_SUCCESS) while a message's reconsume count is below N; those deliveries are reported with ``"failed": true``.

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
from types import SimpleNamespace
from typing import Any

from rocketmq.client import (  # type: ignore[import-not-found]  # lives in .venv-cvs only
    Message,
    Producer,
    PushConsumer,
    RecvMessage,
    SendStatus,
)
from rocketmq.exceptions import ffi_check  # type: ignore[import-not-found]
from rocketmq.ffi import MessageModel, _CSendResult, dll  # type: ignore[import-not-found]

# CTransactionStatus of the C API (CTransactionStatus.h).
TX_STATUS = {"commit": 0, "rollback": 1, "unknown": 2}
# The C API's callbacks: (CProducer*, CMessage* or CMessageExt*, void* userData) -> CTransactionStatus.
TX_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
CONSUME_SUCCESS, RECONSUME_LATER = 0, 1

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
        "storeTs": msg.store_timestamp,
    }


def read_commands() -> Any:
    for line in sys.stdin:
        if line.strip():
            yield json.loads(line)


def _text_of(raw: bytes | None) -> str:
    return raw.decode("utf-8", "replace") if raw else ""


def transaction_producer(group: str) -> tuple[Any, Any]:
    """A wrapper ``Producer`` around the C API's transactional producer, and its send function."""
    dll.CreateTransactionProducer.argtypes = [ctypes.c_char_p, TX_CALLBACK, ctypes.c_void_p]
    dll.CreateTransactionProducer.restype = ctypes.c_void_p
    dll.SendMessageTransaction.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        TX_CALLBACK,
        ctypes.c_void_p,
        ctypes.POINTER(_CSendResult),
    ]
    dll.SendMessageTransaction.restype = ctypes.c_int
    dll.GetOriginMessageKeys.argtypes = [ctypes.c_void_p]
    dll.GetOriginMessageKeys.restype = ctypes.c_char_p
    dll.GetOriginMessageProperty.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    dll.GetOriginMessageProperty.restype = ctypes.c_char_p

    def execute(_producer: int, cmsg: int, _data: int) -> int:
        key = _text_of(dll.GetOriginMessageKeys(cmsg))
        answer = _text_of(dll.GetOriginMessageProperty(cmsg, b"txExecute")) or "commit"
        emit({"ev": "tx_execute", "key": key, "answer": answer, "ts": now_ms()})
        return TX_STATUS[answer]

    def check(_producer: int, cmsg: int, _data: int) -> int:
        msg = RecvMessage(cmsg)
        key = _text(msg.keys) or ""
        answer = _text(msg.get_property("txCheck")) or "unknown"
        times = _text(msg.get_property("TRANSACTION_CHECK_TIMES"))
        emit({"ev": "tx_check", "key": key, "msgId": msg.id, "checkTimes": times, "answer": answer, "ts": now_ms()})
        return TX_STATUS[answer]

    checker, executor = TX_CALLBACK(check), TX_CALLBACK(execute)
    handle = dll.CreateTransactionProducer(group.encode(), checker, None)
    if not handle:
        raise RuntimeError("CreateTransactionProducer returned null")
    producer = Producer.__new__(Producer)
    producer._handle = handle
    producer._callback_refs = [checker, executor]  # the C side keeps calling these; keep them alive

    def send(msg: Message) -> Any:
        cres = _CSendResult()
        ffi_check(dll.SendMessageTransaction(handle, msg, executor, None, ctypes.pointer(cres)))
        return SimpleNamespace(status=SendStatus(cres.sendStatus), msg_id=cres.msgId.decode(), offset=cres.offset)

    return producer, send


def send_retrying_route(send: Any, msg: Message) -> Any:
    """``send(msg)``, asked again (up to 3 times, 1 s apart) when it fails with "No route info": the core looks a
    topic's route up on its first send and gives up, without retrying, when that name-server call times out, as it
    can on a loaded machine while the route is there."""
    for attempt in range(3):
        try:
            return send(msg)
        except Exception as exc:
            if "No route info" not in str(exc) or attempt == 2:
                raise
            time.sleep(1)
    raise AssertionError("unreachable")


def sharding_key_sender(producer: Any) -> Any:
    """``SendMessageOrderlyByShardingKey`` of the C API (the wrapper has none): ``send(msg, key)``."""
    dll.SendMessageOrderlyByShardingKey.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.POINTER(_CSendResult),
    ]
    dll.SendMessageOrderlyByShardingKey.restype = ctypes.c_int

    def send(msg: Message, key: str) -> Any:
        cres = _CSendResult()
        ffi_check(dll.SendMessageOrderlyByShardingKey(producer._handle, msg, key.encode(), ctypes.pointer(cres)))
        return SimpleNamespace(status=SendStatus(cres.sendStatus), msg_id=cres.msgId.decode(), offset=cres.offset)

    return send


def build_message(spec: dict[str, Any]) -> Message:
    msg = Message(spec["topic"])
    if spec.get("tags"):
        msg.set_tags(spec["tags"])
    if spec.get("keys"):
        msg.set_keys(spec["keys"])
    for name, value in spec.get("props", {}).items():
        msg.set_property(name, value)
    if spec.get("delayLevel"):
        msg.set_delay_time_level(int(spec["delayLevel"]))
    msg.set_body(spec["body"])
    return msg


def send_batch(producer: Any, cmd: dict[str, Any]) -> None:
    """One ``SendBatchMessage`` of every message in ``cmd``; one ``sent`` event, then ``done``."""
    keys = [spec.get("keys") for spec in cmd["messages"]]
    send_ts = now_ms()
    try:
        res = producer.send_batch([build_message(spec) for spec in cmd["messages"]])
    except Exception as exc:  # the client raises its own exception types for every failure
        emit({"ev": "sent", "keys": keys, "ok": False, "error": str(exc), "sendTs": send_ts})
        emit({"ev": "done", "id": cmd.get("id"), "ok": 0, "failed": 1})
        return
    good = res.status == SendStatus.OK
    emit(
        {
            "ev": "sent",
            "keys": keys,
            "ok": good,
            "status": res.status.name,
            "msgId": res.msg_id,
            "queueOffset": res.offset,
            "sendTs": send_ts,
        }
    )
    emit({"ev": "done", "id": cmd.get("id"), "ok": int(good), "failed": int(not good)})


def run_producer(args: argparse.Namespace) -> None:
    if args.role == "txproducer":
        producer, send = transaction_producer(args.group)
    else:
        producer = Producer(args.group)
        send = producer.send_sync
        if args.trace:
            # Message trace (CTraceModel OPEN is 0): the core then writes Pub records to rmq_sys_TRACE_DATA_<region>.
            set_trace = dll.SetProducerMessageTrace
            set_trace.argtypes = [ctypes.c_void_p, ctypes.c_int]
            set_trace.restype = ctypes.c_int
            ffi_check(set_trace(producer._handle, 0))
    producer.set_namesrv_addr(args.namesrv)
    producer.set_log_root_path(args.logs)
    if args.access_key:
        producer.set_session_credentials(args.access_key, args.secret_key, "ALIYUN")
    producer.start()
    by_sharding_key = sharding_key_sender(producer)
    emit({"ev": "ready"})
    try:
        for cmd in read_commands():
            if cmd["op"] == "stop":
                emit({"ev": "done", "id": cmd.get("id")})
                return
            if cmd["op"] == "produce_batch":
                send_batch(producer, cmd)
                continue
            if cmd["op"] != "produce":
                emit({"ev": "error", "id": cmd.get("id"), "error": f"unknown op {cmd['op']}"})
                continue
            ok = failed = 0
            for spec in cmd["messages"]:
                msg = build_message(spec)
                send_ts = now_ms()
                try:
                    if "orderArg" in spec:
                        res = producer.send_orderly(msg, int(spec["orderArg"]))
                    elif "shardingKey" in spec:
                        res = by_sharding_key(msg, spec["shardingKey"])
                    else:
                        res = send_retrying_route(send, msg)
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
    model = MessageModel.BROADCASTING if args.broadcast else MessageModel.CLUSTERING
    consumer = PushConsumer(args.group, orderly=bool(args.orderly), message_model=model)
    consumer.set_namesrv_addr(args.namesrv)
    consumer.set_log_root_path(args.logs)
    if args.access_key:
        consumer.set_session_credentials(args.access_key, args.secret_key, "ALIYUN")
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

    def on_raw_message(_consumer: int, cmsg: int) -> int:
        msg = RecvMessage(cmsg)
        event = describe_received(msg, prop_names)
        if msg.reconsume_times < args.fail_times:
            emit({**event, "failed": True})
            return RECONSUME_LATER
        emit(event)
        return CONSUME_SUCCESS

    if args.fail_times:
        ffi_check(dll.Subscribe(consumer._handle, args.topic.encode(), b"*"))
        consumer._register_callback(on_raw_message)
    else:
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
    parser.add_argument("role", choices=["producer", "txproducer", "consumer"])
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", default="")
    parser.add_argument("--props", default="")
    parser.add_argument("--instance", default="")
    parser.add_argument("--slow-after", type=int, default=0)
    parser.add_argument("--fail-times", type=int, default=0)
    parser.add_argument("--access-key", default="", help="ACL account (session credentials, channel ALIYUN)")
    parser.add_argument("--secret-key", default="")
    parser.add_argument("--trace", type=int, default=0, help="producer: 1 turns the core's message trace on")
    parser.add_argument("--orderly", type=int, default=0, help="consumer: 1 registers an orderly callback")
    parser.add_argument("--broadcast", type=int, default=0, help="consumer: 1 sets the BROADCASTING model")
    parser.add_argument("--home", default="", help="HOME for the core's local offset files (broadcasting)")
    parser.add_argument("--logs", required=True, help="directory for the C++ client's own log files")
    args = parser.parse_args()
    os.makedirs(args.logs, exist_ok=True)
    # The consumer ignores SetPushConsumerLogPath and logs under /logs unless this variable names a directory.
    os.environ["ROCKETMQ_CLIENT_LOG_DIR"] = args.logs
    if args.home:
        os.makedirs(args.home, exist_ok=True)
        os.environ["HOME"] = args.home
    if args.role in ("producer", "txproducer"):
        run_producer(args)
    else:
        run_consumer(args)
    sys.stdout.flush()
    # The client's native threads may outlive shutdown(); do not wait for them at interpreter exit.
    os._exit(0)


if __name__ == "__main__":
    main()
