"""What ACL costs on the gRPC send path: the official 5.x Python client (``rocketmq-python-client``) sending to two
``mqbroker --enable-proxy`` processes in one run, one with ACL off (empty credentials) and one with ``aclEnable`` and
``bench.security``'s ``plain_acl.yml`` (an account with PUB|SUB on the topic): every request signed by the client,
checked by the broker (header parse, one HMAC-SHA1, the permission lookup). One JSON object per line::

    {"bench": "grpc_acl", "round": 1, "mode": "plain", "inflight": 16, "msgs_per_s": ...}
    {"bench": "grpc_acl", "round": 1, "mode": "acl", ...}
    {"bench": "grpc_acl", "summary": "check_alone", "us_per_check": ...}
    {"bench": "grpc_acl", "summary": "acl_vs_plain", "ratios": [...], "median": ...,
     "broker_cpu_us_per_msg": {"plain": ..., "acl": ...}, "broker_cpu_ratio": ...}

Each round sends ``messages`` messages of ``size`` bytes with ``inflight`` sends in flight (``send_async``) through
one producer per mode; a first round warms both brokers up and is not counted, later rounds alternate the order.
``ratios`` are acl / plain throughput per round; ``broker_cpu_ratio`` is the broker's CPU per message without ACL over
with it (the throughput ratio a CPU-bound broker would show: steadier than wall-clock rates on a shared machine).
``check_alone`` times :meth:`proxy.acl.GrpcAcl.check` of one signed send in this process, without gRPC.

    python -m bench.grpc_acl [--rounds 4] [--messages 2000] [--size 128] [--inflight 16]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from bench.grpc_clients import emit, start
from bench.rpc import process_cpu_seconds
from bench.security import ACCOUNT, ADMIN, PLAIN_ACL, TOPIC
from client import Admin
from client.config import ClientConfig


def start_pair(data: Path, extra: list[str]) -> tuple[list[Any], str, str, int]:
    """A name server and a broker with the gRPC endpoint: (processes, name server, gRPC endpoint, broker pid)."""
    namesrv_proc, (namesrv,) = start([sys.executable, "-m", "namesrv.cli", "--listenPort", "0"], 1)
    argv = [sys.executable, "-m", "broker.cli", "--enable-proxy", "-n", namesrv, "--listenPort", "0"]
    argv += ["--grpcServerPort", "0", "--storePathRootDir", str(data / "store"), "--brokerIP1", "127.0.0.1", *extra]
    broker_proc, found = start(argv, 2)
    return [broker_proc, namesrv_proc], namesrv, f"127.0.0.1:{found[0]}", broker_proc.pid


async def create_topic(namesrv: str, keys: tuple[str, str] | None) -> None:
    access_key, secret_key = keys or (None, None)
    async with Admin(config=ClientConfig(namesrv_addr=namesrv, access_key=access_key, secret_key=secret_key)) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=4, write_queue_nums=4)


def producer(endpoint: str, keys: tuple[str, str] | None) -> Any:
    from rocketmq import ClientConfiguration, Credentials, Producer

    credentials = Credentials(*keys) if keys else Credentials()
    started = Producer(ClientConfiguration(endpoint, credentials, request_timeout=10), (TOPIC,))
    started.startup()
    return started


def send_rate(client: Any, messages: int, body: bytes, inflight: int) -> float:
    from tests.proxy.official import make_message

    pending: list[Any] = []
    began = time.perf_counter()
    for _ in range(messages):
        pending.append(client.send_async(make_message(TOPIC, body)))
        if len(pending) >= inflight:
            pending.pop(0).result()
    for future in pending:
        future.result()
    return messages / (time.perf_counter() - began)


def check_cost(home: Path, checks: int = 20000) -> None:
    """The check alone, in this process: :meth:`proxy.acl.GrpcAcl.check` of one signed SendMessageRequest."""
    from broker.acl.manager import AclFiles, AclManager
    from proxy.acl import GrpcAcl
    from proxy.auth_header import authorization_header
    from proxy.common import PEER_KEY
    from proxy.pb import definition, service

    manager = AclManager(AclFiles(home))
    manager.load()
    acl = GrpcAcl(manager)
    date = time.strftime("%Y%m%dT%H%M%SZ")
    md = {PEER_KEY: "ipv4:127.0.0.1:40000", "x-mq-date-time": date,
          "authorization": authorization_header(*ACCOUNT, date)}  # fmt: skip
    request = service.SendMessageRequest(messages=[definition.Message(topic=definition.Resource(name=TOPIC))])
    began = time.perf_counter()
    for _ in range(checks):
        acl.check(request, md)
    emit(
        {
            "bench": "grpc_acl",
            "summary": "check_alone",
            "us_per_check": round((time.perf_counter() - began) / checks * 1e6, 1),
        }
    )


def measure(args: argparse.Namespace) -> None:
    body = b"x" * args.size
    with tempfile.TemporaryDirectory(prefix="bench-grpc-acl-") as tmp:
        home = Path(tmp) / "home"
        (home / "conf").mkdir(parents=True)
        (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
        check_cost(home)
        plain_procs, plain_ns, plain_ep, plain_pid = start_pair(Path(tmp) / "plain", [])
        acl_procs, acl_ns, acl_ep, acl_pid = start_pair(
            Path(tmp) / "acl", ["--aclEnable", "true", "--rocketmqHome", str(home)]
        )
        clients: dict[str, Any] = {}
        try:
            trio.run(create_topic, plain_ns, None)
            trio.run(create_topic, acl_ns, ADMIN)
            clients = {"plain": producer(plain_ep, None), "acl": producer(acl_ep, ACCOUNT)}
            pids = {"plain": plain_pid, "acl": acl_pid}
            for client in clients.values():  # warm-up, not counted
                send_rate(client, args.messages, body, args.inflight)
            rates: dict[str, list[float]] = {"plain": [], "acl": []}
            cpu = {"plain": 0.0, "acl": 0.0}
            for round_no in range(1, args.rounds + 1):
                for mode in ("plain", "acl") if round_no % 2 else ("acl", "plain"):
                    cpu0 = process_cpu_seconds(pids[mode])
                    rate = send_rate(clients[mode], args.messages, body, args.inflight)
                    cpu[mode] += process_cpu_seconds(pids[mode]) - cpu0
                    rates[mode].append(rate)
                    emit({"bench": "grpc_acl", "round": round_no, "mode": mode, "inflight": args.inflight,
                          "msgs_per_s": round(rate)})  # fmt: skip
            ratios = [a / p for a, p in zip(rates["acl"], rates["plain"], strict=True)]
            sent = args.messages * args.rounds
            us = {mode: round(cpu[mode] / sent * 1e6, 1) for mode in cpu}
            emit({"bench": "grpc_acl", "summary": "acl_vs_plain", "inflight": args.inflight,
                  "ratios": [round(r, 3) for r in ratios], "median": round(statistics.median(ratios), 3),
                  "broker_cpu_us_per_msg": us, "broker_cpu_ratio": round(cpu["plain"] / cpu["acl"], 3)})  # fmt: skip
        finally:
            for client in clients.values():
                client.shutdown()
            for proc in (*plain_procs, *acl_procs):
                proc.terminate()
                proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--inflight", type=int, default=16)
    measure(parser.parse_args())


if __name__ == "__main__":
    main()
