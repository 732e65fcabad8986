"""What ACL and TLS cost: send throughput of our producer (32 sends in flight on one connection, 128-byte bodies)
against two embedded clusters in child processes, one with ACL off and one with ACL on, measured interleaved in
rounds in one run; and, on the first cluster (``tls.server.mode`` permissive, test-mode certificate), TLS against
plaintext. One JSON object per line::

    {"bench": "security", "round": 1, "mode": "plain", "inflight": 32, "msgs_per_s": ...}
    {"bench": "security", "round": 1, "mode": "acl", ...}   # every request signed, checked by the broker
    {"bench": "security", "round": 1, "mode": "tls", ...}
    {"bench": "security", "summary": "acl_vs_plain", "ratios": [...], "min": ..., "max": ..., "median": ...,
     "cpu_us_per_msg": {"plain": {"broker": ..., "client": ...}, "acl": {...}}, "cpu_ratio": ...}
    {"bench": "security", "summary": "tls_vs_plain", ...}

``ratios`` are the per-round throughput ratios; ``cpu_ratio`` is total CPU per message (broker process plus this
client process) without the feature over with it, i.e. the throughput ratio a CPU-bound machine would show, which
holds steady on a shared machine where wall-clock rates swing by 2x between rounds.

The ratio compares both sides' cost: with ACL the client signs and the broker verifies (one HMAC-SHA1 each per
request). A first round warms both clusters up and is not counted; each later round runs the modes in a rotated
order. Compare the ratios, not the absolute rates (the machine is shared); docs/PERFORMANCE.md has the figures.

    python -m bench.security [--duration 4] [--rounds 4] [--inflight 32]

``micro`` times, in this process, what ACL adds per request: the client's signing of a producer's send command and the
broker's whole check of it as decoded from the wire (best of 7 timings), one line each::

    python -m bench.security micro [--number 20000]
    {"bench": "security", "micro": "sign", "us_per_request": ...}
    {"bench": "security", "micro": "check", "us_per_request": ...}
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any, Final

import anyio
import trio

from bench.client import client_send_load
from bench.rpc import Completed, process_cpu_seconds
from client.admin import Admin
from client.config import ClientConfig

TOPIC: Final = "BenchSecurity"
ACCOUNT: Final = ("bench-account", "bench-secret")
ADMIN: Final = ("bench-admin", "bench-admin-secret")
PLAIN_ACL: Final = f"""\
accounts:
  - {{accessKey: {ACCOUNT[0]}, secretKey: {ACCOUNT[1]}, defaultTopicPerm: DENY, defaultGroupPerm: SUB,
     topicPerms: [{TOPIC}=PUB|SUB]}}
  - {{accessKey: {ADMIN[0]}, secretKey: {ADMIN[1]}, admin: true}}
"""


async def send_load(cfg: ClientConfig, inflight: int, duration: float) -> Completed:
    """Sends of our producer (128-byte bodies, ``inflight`` concurrent senders, one connection) and their seconds."""
    return await client_send_load(cfg.namesrv_addr[0], TOPIC, inflight, duration, cfg)


def emit(record: dict[str, object]) -> None:
    print(json.dumps(record), flush=True)


async def serve(data_dir: str, acl_home: str | None) -> None:
    from broker.embedded import EmbeddedCluster

    overrides: dict[str, Any] = {"mapped_file_size_commit_log": 256 << 20}
    if acl_home:
        overrides.update(acl_enable=True, rocketmq_home=acl_home)
    async with EmbeddedCluster(data_dir, **overrides) as cluster:
        print(cluster.namesrv_addr, cluster.broker_addr, flush=True)
        await trio.sleep_forever()


def start(data_dir: str, acl_home: str | None) -> tuple[subprocess.Popen[str], str]:
    argv = [sys.executable, "-m", "bench.security", "serve", "--data", data_dir]
    proc = subprocess.Popen(argv + (["--acl-home", acl_home] if acl_home else []), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    namesrv, _broker = proc.stdout.readline().split()
    return proc, namesrv


def config(namesrv: str, *, keys: tuple[str, str] | None = None, tls: bool = False) -> ClientConfig:
    access_key, secret_key = keys or (None, None)
    return ClientConfig(namesrv_addr=namesrv, access_key=access_key, secret_key=secret_key, tls=tls)


async def create_topic(cfg: ClientConfig) -> None:
    async with Admin(config=cfg) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=4, write_queue_nums=4)
        with anyio.fail_after(30):
            while True:
                try:
                    if (await admin.topic_route(TOPIC)).queue_datas:
                        return
                except Exception:
                    pass
                await anyio.sleep(0.1)


class Tally:
    """Per mode: the round rates, the messages sent, and CPU seconds of the broker process and of this (client)
    process."""

    def __init__(self) -> None:
        self.rates: list[float] = []
        self.messages = 0
        self.broker_cpu = 0.0
        self.client_cpu = 0.0

    def run(self, broker_pid: int, cfg: ClientConfig, inflight: int, duration: float) -> float:
        broker0, client0 = process_cpu_seconds(broker_pid), time.process_time()
        sent: Completed = anyio.run(send_load, cfg, inflight, duration)
        self.broker_cpu += process_cpu_seconds(broker_pid) - broker0
        self.client_cpu += time.process_time() - client0
        self.rates.append(sent.rate)
        self.messages += sent.count
        return sent.rate

    def us_per_msg(self) -> dict[str, float]:
        return {
            "broker": round(self.broker_cpu / self.messages * 1e6, 1),
            "client": round(self.client_cpu / self.messages * 1e6, 1),
        }

    @property
    def cpu_per_msg(self) -> float:
        return (self.broker_cpu + self.client_cpu) / self.messages


def summary(name: str, feature: Tally, base: Tally, feature_mode: str) -> None:
    ratios = [f / b for f, b in zip(feature.rates, base.rates, strict=True)]
    emit(
        {
            "bench": "security",
            "summary": name,
            "ratios": [round(r, 3) for r in ratios],
            "min": round(min(ratios), 3),
            "max": round(max(ratios), 3),
            "median": round(statistics.median(ratios), 3),
            "cpu_us_per_msg": {"plain": base.us_per_msg(), feature_mode: feature.us_per_msg()},
            "cpu_ratio": round(base.cpu_per_msg / feature.cpu_per_msg, 3),
        }
    )


def measure(duration: float, rounds: int, inflight: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-security-") as tmp:
        home = Path(tmp) / "home"
        (home / "conf").mkdir(parents=True)
        (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
        plain_proc, plain_ns = start(str(Path(tmp) / "plain"), None)
        acl_proc, acl_ns = start(str(Path(tmp) / "acl"), str(home))
        try:
            anyio.run(create_topic, config(plain_ns))
            anyio.run(create_topic, config(acl_ns, keys=ADMIN))
            modes = {
                "plain": config(plain_ns),
                "acl": config(acl_ns, keys=ACCOUNT),
                "tls": config(plain_ns, tls=True),
            }
            for cfg in modes.values():  # warm-up, not counted
                anyio.run(send_load, cfg, inflight, min(duration, 2.0))
            pids = {"plain": plain_proc.pid, "acl": acl_proc.pid, "tls": plain_proc.pid}
            tallies = {mode: Tally() for mode in modes}
            names = list(modes)
            for round_no in range(1, rounds + 1):
                shift = round_no % len(names)
                for mode in names[shift:] + names[:shift]:
                    rate = tallies[mode].run(pids[mode], modes[mode], inflight, duration)
                    emit({"bench": "security", "round": round_no, "mode": mode, "inflight": inflight,
                          "msgs_per_s": round(rate)})  # fmt: skip
            summary("acl_vs_plain", tallies["acl"], tallies["plain"], "acl")
            summary("tls_vs_plain", tallies["tls"], tallies["plain"], "tls")
        finally:
            for proc in (plain_proc, acl_proc):
                proc.terminate()
                proc.wait(30)


def micro(number: int) -> None:
    """Per-request cost of signing and checking (see the module docstring): a 12-field SEND_MESSAGE_V2 header as our
    producer builds it, 128-byte body, the bench's account and ``plain_acl.yml``."""
    from broker.acl.manager import AclFiles, AclManager
    from remoting.codec.acl_signing import SessionCredentials, sign
    from remoting.codec.codes import RequestCode
    from remoting.codec.command import request
    from remoting.codec.frame import FrameDecoder, encode_command

    born = str(time.time_ns() // 10**6)
    properties = "UNIQ_KEY\x017F0000011A2B3C4D5E6F000000001234\x02WAIT\x01true\x02"
    fields = {"a": "bench-group", "b": TOPIC, "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": born, "h": "0",
              "i": properties, "j": "0", "k": "false", "n": "broker-a"}  # fmt: skip
    cmd = request(RequestCode.SEND_MESSAGE_V2, fields, b"x" * 128)
    credentials = SessionCredentials(*ACCOUNT)
    decoder = FrameDecoder()
    decoder.receive_data(encode_command(sign(cmd, credentials)))
    received = decoder.next_command()
    assert received is not None
    with tempfile.TemporaryDirectory(prefix="bench-security-") as home:
        (Path(home) / "conf").mkdir()
        (Path(home) / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
        manager = AclManager(AclFiles(Path(home)))
        manager.load()
        manager.validate("127.0.0.1", received)  # raises if the bench's account could not send
        timings = {
            "sign": timeit.repeat(lambda: sign(cmd, credentials), number=number, repeat=7),
            "check": timeit.repeat(lambda: manager.validate("127.0.0.1", received), number=number, repeat=7),
        }
    for name, times in timings.items():
        emit({"bench": "security", "micro": name, "us_per_request": round(min(times) / number * 1e6, 2)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("role", nargs="?", default="measure", choices=["measure", "serve", "micro"])
    parser.add_argument("--data")
    parser.add_argument("--acl-home")
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--inflight", type=int, default=32)
    parser.add_argument("--number", type=int, default=20000, help="calls per timing (micro)")
    args = parser.parse_args()
    if args.role == "serve":
        trio.run(serve, args.data, args.acl_home)
    elif args.role == "micro":
        micro(args.number)
    else:
        measure(args.duration, args.rounds, args.inflight)


if __name__ == "__main__":
    main()
