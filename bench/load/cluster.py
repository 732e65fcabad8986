"""The broker the load tools measure: an embedded cluster in a child process, or an existing one.

``python -m bench.load.cluster --data DIR --flush-disk-type SYNC_FLUSH`` serves a name server and a broker on
127.0.0.1 port 0 and prints ``NAMESRV BROKER PID`` on one line once both listen. :class:`ClusterProcess` starts and
stops that child (its pid is what ``--profile`` attaches py-spy to). :func:`create_topics` makes topics with ``queues``
read and write queues on a broker.

Errors: a child that exits before its address line raises :class:`ClusterStartError`; a refused topic creation
raises :class:`TopicSetupError`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from types import TracebackType
from typing import Self

import trio

from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request

FLUSH_MODES = ("ASYNC_FLUSH", "SYNC_FLUSH")


class ClusterStartError(RuntimeError):
    """The embedded cluster's process exited before it printed its addresses."""


class TopicSetupError(RuntimeError):
    """The broker refused UPDATE_AND_CREATE_TOPIC."""


async def serve(
    data_dir: str, flush_disk_type: str, max_transfer_count: int = 32, properties: tuple[str, ...] = ()
) -> None:
    from broker.embedded import EmbeddedCluster, broker_overrides_of

    args = [part for prop in properties for part in ("--" + prop.partition("=")[0], prop.partition("=")[2])]
    async with EmbeddedCluster(
        data_dir,
        flush_disk_type=flush_disk_type,
        mapped_file_size_commit_log=256 << 20,
        max_transfer_count_on_message_in_memory=max_transfer_count,
        **broker_overrides_of(args),
    ) as cluster:
        print(cluster.namesrv_addr, cluster.broker_addr, os.getpid(), flush=True)
        await trio.sleep_forever()


class ClusterProcess:
    """A child process serving an embedded cluster over a temporary data directory it owns and removes."""

    def __init__(
        self,
        flush_disk_type: str = "ASYNC_FLUSH",
        wrap: list[str] | None = None,
        max_transfer_count: int = 32,
        properties: tuple[str, ...] = (),
    ) -> None:
        """``wrap`` prefixes the child's command line (``py-spy record ... --``); the pid is still the broker's.
        ``max_transfer_count`` is the broker's ``maxTransferCountOnMessageInMemory`` (most messages per pull);
        ``properties`` are more broker settings as ``name=value`` (RocketMQ's names)."""
        if flush_disk_type not in FLUSH_MODES:
            raise ValueError(f"flush mode must be one of {FLUSH_MODES}, not {flush_disk_type!r}")
        self.flush_disk_type = flush_disk_type
        self.namesrv = ""
        self.broker = ""
        self._proc: subprocess.Popen[str] | None = None
        self._data = ""
        self._wrap = wrap or []
        self._pid = 0
        self.max_transfer_count = max_transfer_count
        self.properties = properties

    @property
    def pid(self) -> int:
        if not self._pid:
            raise RuntimeError("the cluster is not running")
        return self._pid

    @property
    def data_dir(self) -> str:
        """The broker's data directory (the child's ``--data``), removed at close."""
        return self._data

    def __enter__(self) -> Self:
        self._data = tempfile.mkdtemp(prefix="bench-load-")
        argv = [sys.executable, "-m", "bench.load.cluster", "--data", self._data]
        argv = [*self._wrap, *argv, "--flush-disk-type", self.flush_disk_type]
        argv += ["--max-transfer-count", str(self.max_transfer_count)]
        argv += [part for prop in self.properties for part in ("--property", prop)]
        self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        line: list[str] = []
        while len(line) != 3 or line[0].startswith("py-spy"):  # a wrapping py-spy prints its banner first
            raw = self._proc.stdout.readline()
            if not raw:
                break
            line = raw.split()
        if len(line) != 3 or line[0].startswith("py-spy"):
            self.close()
            raise ClusterStartError(f"the embedded cluster exited with {self._proc.poll()} before listening")
        self.namesrv, self.broker, pid = line
        self._pid = int(pid)
        return self

    def close(self) -> None:
        if self._proc is not None:
            # the broker itself, not a wrapping py-spy: py-spy writes its profile when its target exits
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid or self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        shutil.rmtree(self._data, ignore_errors=True)

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


async def create_topics(broker: str, topics: list[str], queues: int) -> None:
    """Create (or update) ``topics`` with ``queues`` queues each on ``broker``."""
    async with RemotingClient() as remoting:
        for topic in topics:
            fields = {
                "topic": topic,
                "defaultTopic": "TBW102",
                "readQueueNums": str(queues),
                "writeQueueNums": str(queues),
                "perm": "6",
                "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": "0",
                "order": "false",
            }
            response = await remoting.invoke(broker, request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields), 10)
            if response.code != ResponseCode.SUCCESS:
                raise TopicSetupError(f"{topic}: {response.remark}")
    # the broker registers new topics with the name server on its own schedule; clients route via the name server
    await trio.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve an embedded cluster for the load tools")
    parser.add_argument("--data", required=True)
    parser.add_argument("--flush-disk-type", default="ASYNC_FLUSH", choices=FLUSH_MODES)
    parser.add_argument("--max-transfer-count", type=int, default=32, help="maxTransferCountOnMessageInMemory")
    parser.add_argument("--property", action="append", default=[], help="a broker setting, name=value")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(serve, args.data, args.flush_disk_type, args.max_transfer_count, tuple(args.property))


if __name__ == "__main__":
    main()
