"""Helpers of :mod:`client.mqadmin`: table-or-JSON output, the shared ``-n``/``--json`` options, running one admin
job per command, and the formats RocketMQ's tools print (timestamps, message rows)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import anyio
import click
from rich.console import Console
from rich.table import Table

from client.admin import Admin
from client.errors import MQClientError
from client.message import MessageExt
from remoting.errors import RemotingError

console = Console(soft_wrap=True)

#: A consumer group's retry topic is ``%RETRY%<group>``, its dead-letter topic ``%DLQ%<group>``.
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"


class Output:
    """Collects one command's result as rows and prints a table or JSON."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json

    def table(self, title: str, columns: list[str], rows: list[list[Any]], extra: dict[str, Any] | None = None) -> None:
        if self.as_json:
            doc: dict[str, Any] = {"rows": [dict(zip(columns, row, strict=True)) for row in rows]}
            doc.update(extra or {})
            click.echo(json.dumps(doc, default=str))
            return
        table = Table(title=title)
        for column in columns:
            table.add_column(column)
        for row in rows:
            table.add_row(*("" if v is None else str(v) for v in row))
        console.print(table)
        for key, value in (extra or {}).items():
            console.print(f"{key}: {value}")

    def done(self, message: str, **fields: Any) -> None:
        if self.as_json:
            click.echo(json.dumps({"ok": True, **fields}, default=str))
        else:
            console.print(message)


def run_job(ctx: click.Context, job: Callable[[Admin, Output], Awaitable[None]]) -> None:
    obj = ctx.find_object(dict) or {}
    output = Output(bool(obj.get("json")) or bool(ctx.params.get("as_json")))
    namesrv = ctx.params["namesrv"]

    async def main() -> None:
        async with Admin(namesrv) as admin:
            await job(admin, output)

    try:
        anyio.run(main)
    except (MQClientError, RemotingError, ValueError) as exc:
        click.echo(f"mqadmin: {exc}", err=True)
        sys.exit(1)


def format_ts(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3] if ms > 0 else "-"


def _version_names() -> tuple[str, ...]:
    """The names of RocketMQ 4.9.8's ``MQVersion.Version``, by ordinal (common/src/main/java/org/apache/rocketmq/
    common/MQVersion.java): 3.0.0's pre-releases, then a ``_SNAPSHOT`` and a release per version (3.3 to 3.9 have
    no ``.0``), then ``HIGHER_VERSION``."""
    names = ["V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1", *(f"V3_0_0_BETA{i}" for i in range(1, 6))]
    for i in range(6, 10):
        names += [f"V3_0_0_BETA{i}_SNAPSHOT", f"V3_0_0_BETA{i}"]
    names.append("V3_0_0_FINAL")
    releases = [(3, 0, z) for z in range(1, 16)]
    releases += [(3, y, z) for y in (1, 2) for z in range(10)]
    releases += [(3, y, z) for y in range(3, 10) for z in range(1, 10)]
    releases += [(x, y, z) for x in (4, 5) for y in range(10) for z in range(10)]
    for x, y, z in releases:
        names += [f"V{x}_{y}_{z}_SNAPSHOT", f"V{x}_{y}_{z}"]
    return (*names, "HIGHER_VERSION")


_VERSION_NAMES = _version_names()


def version_desc(version: int) -> str:
    """A client's ``version`` as RocketMQ's tools print it (Java's ``MQVersion.getVersionDesc``): 409 is ``V4_9_8``,
    anything past the last known one ``HIGHER_VERSION``."""
    if version < 0:
        return str(version)
    return _VERSION_NAMES[min(version, len(_VERSION_NAMES) - 1)]


def msg_row(m: MessageExt) -> list[Any]:
    return [
        m.msg_id,
        m.topic,
        m.queue_id,
        m.queue_offset,
        m.tags,
        " ".join(m.keys),
        format_ts(m.store_timestamp),
        m.body.decode("utf-8", "replace")[:80],
    ]


MSG_COLUMNS = ["OffsetMsgId", "Topic", "QueueId", "QueueOffset", "Tags", "Keys", "StoreTime", "Body"]


def common(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option("-n", "--namesrvAddr", "namesrv", required=True, help="name servers, host:port;host:port")(fn)
    fn = click.option("--json", "as_json", is_flag=True, help="print JSON instead of a table")(fn)
    return click.pass_context(fn)


def parse_timestamp(text: str) -> int:
    """``now``, milliseconds, or RocketMQ's ``yyyy-MM-dd#HH:mm:ss:SSS``."""
    if text == "now":
        return int(time.time() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    return int(datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f").timestamp() * 1000)
