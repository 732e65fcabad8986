"""Helpers of :mod:`client.mqadmin`: the shared ``-n``/``--json`` options, running one admin job per command, the
output in RocketMQ's own format (``printf`` lines with ``#``-headed columns, as ``mqadmin`` 4.9.8 prints them) or as
one JSON document for scripts, and the formats RocketMQ's tools print (timestamps, versions, messages).

``-n``/``--namesrvAddr`` falls back to the ``NAMESRV_ADDR`` environment variable, as RocketMQ's tools do
(``common/src/main/java/org/apache/rocketmq/common/utils/NameServerAddressUtils.java``). With ``--json`` a command
prints ``{"rows": [{column: value}], "lines": [...], ...}``: one object per printed row, keyed by the column names
without their ``#``.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import IO, Any, Final

import anyio
import click

from client.admin import BROKER_FAILURES, Admin
from client.config import ClientConfig, default_use_tls
from client.errors import MQClientError
from client.message import MessageExt
from client.tools_config import tools_credentials
from remoting.codec.bodies import PERM_READ, BrokerData, MessageQueue, TopicRouteData
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig, TopicConfig
from remoting.codec.java_format import java_fixed
from remoting.codec.java_hash_order import java_hash_map_order
from remoting.codec.message_properties import java_hash, java_trim
from remoting.errors import RemotingError

NO_NAMESRV: Final = "mqadmin: no name server address: pass -n host:port[;host:port] or set NAMESRV_ADDR"


def java_text(value: Any) -> Any:
    """A value as Java's ``printf`` shows it: ``true``/``false``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def printf(fmt: str, *values: Any) -> str:
    """Java's ``String.format`` for the conversions mqadmin uses (``%-20s``, ``%d``, ``%.2f``, ``%n``). A row's
    ``%-64.64s`` is Java's ``%-64s`` of ``UtilAll.frontStringAtLeast(name, 64)`` (common/src/main/java/org/apache/
    rocketmq/common/UtilAll.java), the name cut to its column, as consumerProgress, topicStatus, topicList -c,
    statsAll, brokerConsumeStats, resetOffsetByTime and skipAccumulatedMessage print topics, groups and brokers; the
    JSON rows keep the whole name. A ``%W.Pf`` figure prints as :func:`java_fixed`, right-aligned in ``W``."""
    fmt = fmt.replace("%n", "\n")
    parts: list[str] = []
    args = [java_text(v) for v in values]
    end = 0
    for i, spec in enumerate(_CONVERSIONS.finditer(fmt)):
        value = values[i] if i < len(values) else None
        if spec["conv"] == "f" and isinstance(value, int | float) and not isinstance(value, bool):
            parts += [fmt[end : spec.start()], f"%{spec['flags']}{spec['width']}s"]
            args[i] = java_fixed(float(value), int(spec["places"] or 6))
            end = spec.end()
    return ("".join(parts) + fmt[end:]) % tuple(args)


#: One ``%`` conversion of a :func:`printf` format (``%%`` is not one).
_CONVERSIONS: Final = re.compile(r"%(?!%)(?P<flags>[-#+ 0]*)(?P<width>\d*)(?:\.(?P<places>\d+))?(?P<conv>[a-zA-Z])")


class JavaSet(list[Any]):
    """A Java ``Set`` for :func:`fastjson_pretty`, its elements in iteration order: fastjson's CollectionCodec
    writes it on one line (``["a","b"]``) even in the pretty format."""


def fastjson_pretty(value: Any) -> str:
    """``value`` as fastjson 1.2.69's ``JSON.toJSONString(value, true)`` writes it (RocketMQ's ``toJson(true)``, as
    ``topicRoute`` prints a route): one tab per level, ``"key":value`` with no space, a dict's entries (a bean's
    fields or a map's string keys, sorted as fastjson's SortField sorts a bean's) one a line, ``null`` ones left out;
    a non-empty list one element a line, a tab deeper (one element too: ``[`` then ``{`` on the next line), a
    :class:`JavaSet` on one line; the ``int`` keys of a ``Long``-keyed map (``BrokerData.brokerAddrs``) written bare
    after ``{`` with no line break before them
    (com/alibaba/fastjson/serializer/JavaBeanSerializer.java, ListSerializer.java and MapSerializer.java)."""
    parts: list[str] = []
    _fastjson_pretty(value, 0, parts)
    return "".join(parts)


def _fastjson_pretty(value: Any, indent: int, parts: list[str]) -> None:
    if isinstance(value, dict):
        if not value:
            parts.append("{}")
            return
        parts.append("{")
        first = True
        for key, item in sorted(value.items(), key=lambda kv: (isinstance(kv[0], str), kv[0])):
            if item is None:
                continue
            if not first:
                parts.append(",")
            first = False
            if isinstance(key, int):  # MapSerializer: a non-string key, no println before it
                parts.append(f"{key}:")
            else:
                parts.append("\n" + "\t" * (indent + 1) + json.dumps(str(key), ensure_ascii=False) + ":")
            _fastjson_pretty(item, indent + 1, parts)
        parts.append("\n" + "\t" * indent + "}")
    elif isinstance(value, JavaSet):
        parts.append("[" + ",".join(fastjson_pretty(item) for item in value) + "]")
    elif isinstance(value, list | tuple):
        if not value:
            parts.append("[]")
            return
        # 1.2.69's ListSerializer takes its pretty branch for any non-empty list, one element too (com/alibaba/
        # fastjson/serializer/ListSerializer.java); only older fastjson kept a single element on the field's line.
        parts.append("[")
        for i, item in enumerate(value):
            parts.append(("," if i else "") + "\n" + "\t" * (indent + 1))
            _fastjson_pretty(item, indent + 1, parts)
        parts.append("\n" + "\t" * indent + "]")
    elif value is None or isinstance(value, bool):
        parts.append(java_text(value))
    elif isinstance(value, int | float):
        parts.append(str(value))
    else:
        parts.append(json.dumps(str(value), ensure_ascii=False))


def java_concurrent_hash_map_order(hashes: Sequence[int]) -> list[int]:
    """The order a default ``java.util.concurrent.ConcurrentHashMap`` iterates distinct keys put in the order of
    their ``hashCode()``s ``hashes`` (java/util/concurrent/ConcurrentHashMap.java), which is not a ``HashMap``'s
    (:func:`java_hash_map_order`): its 16 bins double as soon as it holds 3/4 of them (``addCount``: ``size >=
    sizeCtl``, 12 keys, where a ``HashMap`` waits for 13), a 9th key in a bin of a table under 64 presizes it
    (``treeifyBin`` -> ``tryPresize(n << 1)``: doubling until 3/4 of the table reaches ``tableSizeFor(1.5 * 2n +
    1)``), and ``transfer`` keeps a bin's last run of keys bound for one half in order but puts the keys before it
    at the head of their half, reversed. Bins are iterated by index, a bin's keys head to tail (keys put at a
    bin's tail; a bin of a 64+ table that reaches 9 keys becomes a tree, whose order this does not follow). Checked
    against Java 17's class with jshell. Returns indexes into ``hashes``."""
    spread = [((h & 0xFFFFFFFF) ^ ((h & 0xFFFFFFFF) >> 16)) & 0x7FFFFFFF for h in hashes]
    table: list[list[int]] = [[] for _ in range(16)]

    def transfer() -> None:
        n = len(table)
        grown: list[list[int]] = [[] for _ in range(2 * n)]
        for i, keys in enumerate(table):
            if not keys:
                continue
            last = len(keys) - 1  # lastRun: where the bin's final run of keys bound for one half starts
            while last > 0 and spread[keys[last - 1]] & n == spread[keys[-1]] & n:
                last -= 1
            halves: tuple[list[int], list[int]] = ([], [])
            halves[1 if spread[keys[-1]] & n else 0].extend(keys[last:])
            for k in keys[:last]:
                halves[1 if spread[k] & n else 0].insert(0, k)
            grown[i], grown[i + n] = halves
        table[:] = grown

    for i, h in enumerate(spread):
        keys = table[h & (len(table) - 1)]
        keys.append(i)
        if len(keys) > 8 and len(table) < 64:  # treeifyBin's tryPresize(n << 1)
            wanted = 1 << (3 * len(table)).bit_length()  # tableSizeFor(2n + n + 1)
            while wanted > len(table) * 3 // 4:
                transfer()
        while i + 1 >= len(table) * 3 // 4:
            transfer()
    return [k for keys in table for k in keys]


def java_hash_set(names: Sequence[str], capacity: int = 16) -> list[str]:
    """``names`` as a Java ``HashSet<String>`` (or a ``HashMap``'s keys) of initial ``capacity`` filled in their
    order iterates them (:func:`java_hash_map_order` of their ``String.hashCode()``), duplicates dropped."""
    distinct = list(dict.fromkeys(names))
    return [distinct[i] for i in java_hash_map_order([java_hash(name) for name in distinct], capacity)]


def java_hashtable_order(hashes: Sequence[int]) -> list[int]:
    """The order a default ``java.util.Hashtable`` enumerates distinct keys put in the order of their ``hashCode()``s
    ``hashes`` (java/util/Hashtable.java): 11 buckets, a key's ``(hash & 0x7FFFFFFF) % length``, each new key at
    the head of its bucket's chain; a put finding the table holding its threshold (``(int) (length * 0.75)``, 8 at
    first) first rehashes it to ``2 * length + 1`` buckets, moving the old buckets' keys from the last bucket down,
    each chain head first, to the head of their new chain; ``entrySet()`` walks the buckets from the last one down,
    each chain head first. Checked against Java 17's class with jshell. Returns indexes into ``hashes``."""
    table: list[list[int]] = [[] for _ in range(11)]
    threshold = 8
    for i, h in enumerate(hashes):
        if i >= threshold:  # addEntry: count >= threshold
            n = 2 * len(table) + 1
            grown: list[list[int]] = [[] for _ in range(n)]
            for chain in reversed(table):
                for k in chain:
                    grown[(hashes[k] & 0x7FFFFFFF) % n].insert(0, k)
            table, threshold = grown, n * 3 // 4
        table[(h & 0x7FFFFFFF) % len(table)].insert(0, i)
    return [k for chain in reversed(table) for k in chain]


def java_properties_order(names: Sequence[str]) -> list[str]:
    """``names`` in the order Java's ``Properties.load`` of lines carrying them in this order iterates them
    (``MixAll.string2Properties``: common/src/main/java/org/apache/rocketmq/common/MixAll.java), a later duplicate
    keeping the first one's place: RocketMQ 4.9.8 runs on Java 8, whose ``Properties`` is a ``Hashtable``
    (:func:`java_hashtable_order`; Java 9+ keeps its entries in a ``ConcurrentHashMap`` instead)."""
    distinct = list(dict.fromkeys(names))
    return [distinct[i] for i in java_hashtable_order([java_hash(name) for name in distinct])]


def java_mq_hash(mq: MessageQueue) -> int:
    """Java's ``MessageQueue.hashCode()`` (common/src/main/java/org/apache/rocketmq/common/message/
    MessageQueue.java), 32 bits."""
    return ((31 + java_hash(mq.broker_name)) * 31 + mq.queue_id) * 31 + java_hash(mq.topic)


def java_put_all_order(maps: Sequence[Sequence[MessageQueue]]) -> list[MessageQueue]:
    """The order of a ``new HashMap<MessageQueue, ..>()`` filled by ``putAll`` of each of ``maps`` in turn, each a
    ``HashMap`` fastjson filled with its keys in this order (as DefaultMQAdminExtImpl.resetOffsetByTimestamp gathers
    the brokers' answers): the first ``putAll`` sizes the empty table for its ``s`` keys, ``tableSizeFor((int) (s /
    0.75 + 1))`` buckets (8 for 4 keys, not the default 16), the table then doubling past 3/4 full as usual
    (java/util/HashMap.java ``putMapEntries``)."""
    put: list[MessageQueue] = []
    for keys in maps:
        put += [keys[i] for i in java_hash_map_order([java_mq_hash(mq) for mq in keys])]
    first = next((len(keys) for keys in maps if keys), 0)
    if not first:
        return put
    capacity = 1 << (int(first / 0.75 + 1) - 1).bit_length()  # tableSizeFor
    return [put[i] for i in java_hash_map_order([java_mq_hash(mq) for mq in put], capacity)]


def java_subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """The readable queues of ``route`` in the order Java iterates the ``HashSet`` that
    ``MQClientInstance.topicRouteData2TopicSubscribeInfo`` fills from it, queue data by queue data (client/src/main/
    java/org/apache/rocketmq/client/impl/factory/MQClientInstance.java): by ``MessageQueue.hashCode()`` bucket."""
    built = list(dict.fromkeys(
        MessageQueue(topic, qd.broker_name, q)
        for qd in route.queue_datas
        if qd.perm & PERM_READ
        for q in range(qd.read_queue_nums)
    ))  # fmt: skip
    return [built[i] for i in java_hash_map_order([java_mq_hash(mq) for mq in built])]


async def java_topic_list(admin: Admin) -> list[str]:
    """The name server's topics in the order RocketMQ's tools print them: ``TopicList.topicList`` is a ``HashSet``
    (common/src/main/java/org/apache/rocketmq/common/protocol/body/TopicList.java) that ``topicList``,
    ``consumerProgress``, ``statsAll`` and ``startMonitoring`` iterate."""
    return java_hash_set(await admin.topic_list())


class Output:
    """One command's output: RocketMQ's text, or (``--json``) one JSON document printed when the command ends."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.doc: dict[str, Any] = {}
        self._columns: list[str] = []

    # -- RocketMQ's text --------------------------------------------------------------------------------------------

    def header(self, fmt: str, *columns: str) -> None:
        """A ``#``-headed column line; the rows that follow are keyed by these names in JSON."""
        self._columns = [c.lstrip("#") for c in columns]
        if not self.as_json and fmt:  # an empty format names the JSON keys only (Java prints no header line)
            click.echo(printf(fmt, *columns), nl=False)

    def row(self, fmt: str, *values: Any) -> None:
        if self.as_json:
            self.doc.setdefault("rows", []).append(dict(zip(self._columns, values, strict=False)))
        else:
            click.echo(printf(fmt, *values), nl=False)

    def entry(self, text: str, **row: Any) -> None:
        """Printed ``text`` as is; in JSON the ``row`` instead."""
        if self.as_json:
            self.doc.setdefault("rows", []).append(row)
        else:
            click.echo(text, nl=False)

    def line(self, fmt: str, *values: Any) -> None:
        """Free text (a status line, a key-value pair); in JSON a ``lines`` entry."""
        text = printf(fmt, *values)
        if self.as_json:
            if text.strip():
                self.doc.setdefault("lines", []).append(text.strip("\n"))
        else:
            click.echo(text, nl=False)

    def field(self, key: str, value: Any) -> None:
        """A value only the JSON document carries (the text shows it in a line)."""
        self.doc[key] = value

    def finish(self) -> None:
        if self.as_json:
            click.echo(json.dumps(self.doc, default=str))


#: What RocketMQ 4.9.8's tools (5.3.3's for haStatus) print first on stderr when a command fails, by command name in
#: lower case: each ``execute`` wraps its failure in ``SubCommandException(getClass().getSimpleName() + " command
#: failed")`` and ``MQAdminStartup.main0`` prints its stack trace (tools/src/main/java/org/apache/rocketmq/tools/
#: command/**); Java then exits 0, so scripts look for this line. ``deleteExpiredCommitLog`` words it apart,
#: ``addWritePerm`` and
#: ``queryMsgTraceById`` leave out the space, ``sendMessage`` throws a RuntimeException (:data:`_JAVA_EXCEPTIONS`;
#: message/SendMessageCommand.java); ``queryCq`` catches its own failure and prints only the cause
#: (queue/QueryConsumeQueueCommand.java), so it is not here.
JAVA_FAILURES: Final = {
    "clusteraclconfigversion": "ClusterAclConfigVersionListSubCommand command failed",
    "deleteaclconfig": "DeleteAccessConfigSubCommand command failed",
    "updateaclconfig": "UpdateAccessConfigSubCommand command failed",
    "updateglobalwhiteaddr": "UpdateGlobalWhiteAddrSubCommand command failed",
    "brokerconsumestats": "BrokerConsumeStatsSubCommad command failed",
    "brokerstatus": "BrokerStatusSubCommand command failed",
    "cleanexpiredcq": "CleanExpiredCQSubCommand command failed",
    "cleanunusedtopic": "CleanUnusedTopicCommand command failed",
    "getbrokerconfig": "GetBrokerConfigCommand command failed",
    "hastatus": "HAStatusSubCommand command failed",
    "sendmsgstatus": "SendMsgStatusCommand command failed",
    "updatebrokerconfig": "UpdateBrokerConfigSubCommand command failed",
    "clusterrt": "CLusterSendMsgRTCommand command failed",
    "clusterlist": "ClusterListSubCommand command failed",
    "consumerconnection": "ConsumerConnectionSubCommand command failed",
    "producerconnection": "ProducerConnectionSubCommand command failed",
    "consumerprogress": "ConsumerProgressSubCommand command failed",
    "consumerstatus": "ConsumerStatusSubCommand command failed",
    "consumer": "ConsumerSubCommand command failed",
    "deletesubgroup": "DeleteSubscriptionGroupCommand command failed",
    "getconsumerconfig": "GetConsumerConfigSubCommand command failed",
    "startmonitoring": "StartMonitoringSubCommand command failed",
    "updatesubgroup": "UpdateSubGroupSubCommand command failed",
    "exportconfigs": "ExportConfigsCommand command failed",
    "exportmetadata": "ExportMetadataCommand command failed",
    "exportmetrics": "ExportMetricsCommand command failed",
    "checkmsgsendrt": "CheckMsgSendRTCommand command failed",
    "consumemessage": "ConsumeMessageCommand command failed",
    "decodemessageid": "DecodeMessageIdCommond command failed",
    "printmsgbyqueue": "PrintMessageByQueueCommand command failed",
    "printmsg": "PrintMessageSubCommand command failed",
    "querymsgbyid": "QueryMsgByIdSubCommand command failed",
    "querymsgbykey": "QueryMsgByKeySubCommand command failed",
    "querymsgbyoffset": "QueryMsgByOffsetSubCommand command failed",
    "querymsgbyuniquekey": "QueryMsgByUniqueKeySubCommand command failed",
    "querymsgtracebyid": "QueryMsgTraceByIdSubCommandcommand failed",  # sic: no space in Java
    "sendmessage": "SendMessageCommand command failed",
    "addwriteperm": "AddWritePermSubCommandcommand failed",  # sic: no space in Java
    "deletekvconfig": "DeleteKvConfigCommand command failed",
    "getnamesrvconfig": "GetNamesrvConfigCommand command failed",
    "updatekvconfig": "UpdateKvConfigCommand command failed",
    "updatenamesrvconfig": "UpdateNamesrvConfigCommand command failed",
    "wipewriteperm": "WipeWritePermSubCommand command failed",
    "clonegroupoffset": "CloneGroupOffsetCommand command failed",
    "getconsumerstatus": "GetConsumerStatusCommand command failed",
    "resetoffsetbytime": "ResetOffsetByTimeCommand command failed",
    "resetoffsetbytimeold": "ResetOffsetByTimeOldCommand command failed",
    "skipaccumulatedmessage": "SkipAccumulationSubCommand command failed",
    "producer": "ProducerSubCommand command failed",
    "statsall": "StatsAllSubCommand command failed",
    "allocatemq": "AllocateMQSubCommand command failed",
    "deletetopic": "DeleteTopicSubCommand command failed",
    "topicclusterlist": "TopicClusterSubCommand command failed",
    "topiclist": "TopicListSubCommand command failed",
    "topicroute": "TopicRouteSubCommand command failed",
    "topicstatus": "TopicStatusSubCommand command failed",
    "updateorderconf": "UpdateOrderConfCommand command failed",
    "updatetopicperm": "UpdateTopicPermSubCommand command failed",
    "updatetopic": "UpdateTopicSubCommand command failed",
    "deleteexpiredcommitlog": "DeleteExpiredCommitLogSubCommand command execute failed.",
}
_SUB_COMMAND_EXCEPTION: Final = "org.apache.rocketmq.tools.command.SubCommandException"
#: The commands whose failure Java throws as another class than ``SubCommandException``.
_JAVA_EXCEPTIONS: Final = {"sendmessage": "java.lang.RuntimeException"}


def say_failure(ctx: click.Context, exc: BaseException) -> None:
    """A failed command's error on stderr: Java's ``SubCommandException`` line for the command (see
    :data:`JAVA_FAILURES`), then the cause; the caller exits with status 1."""
    java = java_failure_line(ctx)
    if java is not None:
        click.echo(java, err=True)
    click.echo(f"mqadmin: {exc}", err=True)


def java_failure_line(ctx: click.Context | None) -> str | None:
    """The first stderr line of Java's failure of ``ctx``'s command (see :data:`JAVA_FAILURES`), or None."""
    name = "" if ctx is None else (ctx.command.name or "").lower()
    java = JAVA_FAILURES.get(name)
    return None if java is None else f"{_JAVA_EXCEPTIONS.get(name, _SUB_COMMAND_EXCEPTION)}: {java}"


def run_job(ctx: click.Context, job: Callable[[Admin, Output], Awaitable[None]]) -> None:
    """Run ``job`` with an :class:`Admin` on the command's name servers; errors print on stderr and exit 1."""
    obj = ctx.find_object(dict) or {}
    output = Output(bool(obj.get("json")) or bool(ctx.params.get("as_json")))
    namesrv = ctx.params.get("namesrv")
    if not namesrv:
        click.echo(NO_NAMESRV, err=True)
        sys.exit(1)
    config = client_config(obj, namesrv)

    async def main() -> None:
        async with Admin(namesrv, config=config) as admin:
            await job(admin, output)

    try:
        anyio.run(main)
    except (MQClientError, RemotingError, ValueError, OSError) as exc:
        say_failure(ctx, exc)
        sys.exit(1)
    output.finish()


def security_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The group's ``--accessKey`` / ``--secretKey`` / ``--tls`` / ``--tlsCaFile`` options."""
    fn = click.option("--tlsCaFile", "tls_ca_file", help="CA file to check the servers' certificates (with TLS)")(fn)
    fn = click.option("--tls", "tls", is_flag=True, help="connect with TLS (default: TLS_ENABLE)")(fn)
    fn = click.option("--secretKey", "secret_key", help="ACL secret key")(fn)
    return click.option("--accessKey", "access_key", help="ACL access key (else conf/tools.yml)")(fn)


def client_config(obj: dict[str, Any], namesrv: str) -> ClientConfig:
    """The admin's config: the group's security options, else the keys of ``$ROCKETMQ_HOME/conf/tools.yml``; without
    ``--tls``, TLS as ``TLS_ENABLE`` says (:func:`~client.config.default_use_tls`), as Java's tools read
    ``tls.enable``."""
    access_key, secret_key = obj.get("access_key"), obj.get("secret_key")
    if not access_key:
        access_key, secret_key = tools_credentials(os.environ.get("ROCKETMQ_HOME", "")) or (None, None)
    return ClientConfig(
        namesrv_addr=namesrv,
        access_key=access_key,
        secret_key=secret_key,
        tls=bool(obj.get("tls")) or default_use_tls(),
        tls_ca_file=obj.get("tls_ca_file"),
    )


def format_ts(ms: int) -> str:
    """Java's ``UtilAll.timeMillisToHumanString2``: ``yyyy-MM-dd HH:mm:ss,SSS``; ``-`` for none (ours)."""
    return java_time_text(ms) if ms > 0 else "-"


def java_time_text(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString2`` of any time, 0 (the epoch, local time) included."""
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]


def format_date(ms: int) -> str:
    """``yyyy-MM-dd HH:mm:ss`` (Java's ``UtilAll.YYYY_MM_DD_HH_MM_SS``)."""
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


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


class JavaNumberError(click.BadParameter):
    """A number Java's parse refuses: the command fails (exit status 1), as Java's NumberFormatException inside the
    command's try ends it with "command failed"."""

    exit_code = 1

    def show(self, file: IO[Any] | None = None) -> None:
        # Java's first stderr line comes first, as for any failure (:func:`say_failure`); clusterList parses -i
        # before its try, so MQAdminStartup prints the NumberFormatException itself
        # (tools/src/main/java/org/apache/rocketmq/tools/command/cluster/ClusterListSubCommand.java).
        if self.ctx is not None and self.ctx.command.name == "clusterList":
            java: str | None = f"java.lang.NumberFormatException: {self.message}"
        else:
            java = java_failure_line(self.ctx)
        if java is not None:
            click.echo(java, file=file, err=True)
        super().show(file)


class JavaNumber(click.ParamType[int]):
    """An option read as Java's ``Integer.parseInt`` (32 bits) or ``Long.parseLong`` (64 bits) reads it, after the
    ``trim()`` Java's commands apply: an optional sign and decimal digits within the type's range. Python's ``int()``
    also takes ``1_0`` (10); Java refuses it, and any value past its type, with NumberFormatException."""

    name = "integer"

    def __init__(self, bits: int) -> None:
        self.bits = bits

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = java_trim(str(value))  # the command trims the value first (String.trim)
        digits = text[1:] if text[:1] in ("+", "-") else text
        limit = 1 << (self.bits - 1)
        if not digits.isdecimal() or len(digits.lstrip("0")) > 19 or not -limit <= int(text) < limit:
            raise JavaNumberError(f'For input string: "{text}"', ctx=ctx, param=param)
        return int(text)


#: Options Java reads with ``Integer.parseInt`` and ``Long.parseLong``.
JAVA_INT: Final = JavaNumber(32)
JAVA_LONG: Final = JavaNumber(64)


def java_bool(text: str | None, default: bool = False) -> bool:
    """Java's ``Boolean.parseBoolean`` of the trimmed value (``true`` in any case is true, anything else false);
    ``default`` if absent."""
    return default if text is None else java_trim(text).lower() == "true"


def message_text(m: MessageExt, broker_name: str) -> str:
    """A pulled message as Java's ``MessageExt.toString()`` prints it (``printMsg``, ``consumeMessage``;
    common/src/main/java/org/apache/rocketmq/common/message/MessageExt.java): first the ``brokerName`` of the queue
    it was pulled from (PullAPIWrapper.processPullResult sets it), and the body as Message.toString()'s
    ``Arrays.toString(byte[])``, signed bytes."""
    props = java_properties_text(m.properties)[1:-1]
    body = ", ".join(str(b - 256 if b > 127 else b) for b in m.body)
    return (
        f"MessageExt [brokerName={broker_name}, queueId={m.queue_id}, storeSize={m.store_size}, "
        f"queueOffset={m.queue_offset}, "
        f"sysFlag={m.sys_flag}, bornTimestamp={m.born_timestamp}, bornHost=/{m.born_host[0]}:{m.born_host[1]}, "
        f"storeTimestamp={m.store_timestamp}, storeHost=/{m.store_host[0]}:{m.store_host[1]}, msgId={m.msg_id}, "
        f"commitLogOffset={m.commit_log_offset}, bodyCRC={m.body_crc}, reconsumeTimes={m.reconsume_times}, "
        f"preparedTransactionOffset={m.prepared_transaction_offset}, toString()=Message{{topic='{m.topic}', "
        f"flag={m.flag}, properties={{{props}}}, body=[{body}], transactionId='null'}}]"
    )


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
    """``-n``/``--namesrvAddr`` (or ``NAMESRV_ADDR``) and ``--json`` on a command, which gets the click context and
    its option values trimmed as Java reads each, ``getOptionValue(..).trim()``: ``String.trim`` drops the characters up
    to U+0020 at both ends, control characters too, and keeps a no-break or ideographic space (unlike ``str.strip``)."""

    @functools.wraps(fn)
    def trimmed(ctx: click.Context, /, **options: Any) -> Any:
        return fn(ctx, **{k: java_trim(v) if isinstance(v, str) else v for k, v in options.items()})

    namesrv = click.option(
        "-n", "--namesrvAddr", "namesrv", envvar="NAMESRV_ADDR", help="name servers, host:port;host:port"
    )
    as_json = click.option("--json", "as_json", is_flag=True, help="print JSON instead of RocketMQ's text")
    return click.pass_context(as_json(namesrv(trimmed)))


@contextmanager
def broker_may_fail(addr: str, *, go_on: bool = True) -> Iterator[None]:
    """One broker's step of a command that goes on past a broker that fails it (Java wraps such a step in its own
    try/catch): the failure is said on stderr and the rest of the step skipped. With ``go_on`` false the failure
    fails the command instead."""
    if not go_on:
        yield
        return
    try:
        yield
    except BROKER_FAILURES as exc:
        click.echo(f"mqadmin: {addr}: {exc}", err=True)


def print_result(out: Output, ok: bool) -> None:
    """Java's ``printf(result ? "success" : "false")`` of the store-maintenance commands, whose result is the last
    broker's answer: ``false`` when no broker was asked (a ``-c`` cluster the name server does not know)."""
    out.line("success" if ok else "false")
    out.field("ok", ok)


#: DefaultMQAdminExtImpl.examineConsumeStats' error for a group without offsets
#: (tools/src/main/java/org/apache/rocketmq/tools/admin/DefaultMQAdminExtImpl.java).
NO_CONSUME_STATS: Final = (
    "Not found the consumer group consume stats, because return offset table is empty, maybe the consumer not consume "
    "any message"
)

#: DefaultMQAdminExtImpl.examineTopicStats' error when the topic's brokers list no queue
#: (tools/src/main/java/org/apache/rocketmq/tools/admin/DefaultMQAdminExtImpl.java).
NO_TOPIC_STATS: Final = "Not found the topic stats info"

#: DefaultMQAdminExtImpl.examineProducerConnectionInfo's error when the broker lists no connection of the group
#: (tools/src/main/java/org/apache/rocketmq/tools/admin/DefaultMQAdminExtImpl.java).
NO_PRODUCER_CONNECTION: Final = "Not found the producer group connection"

#: Java's CommandUtil.ERROR_MESSAGE, printed for a ``-c`` cluster the name server does not know.
UNKNOWN_CLUSTER: Final = "Make sure the specified clusterName exists or the name server connected to is correct."


async def cluster_brokers(admin: Admin, out: Output, cluster: str) -> list[BrokerData]:
    """The brokers of ``cluster`` in the order Java's CommandUtil helpers go over them: the cluster's broker names
    as fastjson fills ``ClusterInfo.clusterAddrTable``'s ``Set``, a ``HashSet``
    (tools/src/main/java/org/apache/rocketmq/tools/command/CommandUtil.java). None, with Java's error line (printed
    without a newline, as Java's ``System.out.print``; a ``lines`` entry with ``--json``), when the name server does
    not know it."""
    info = await admin.cluster_info()
    names = info.cluster_addr_table.get(cluster)
    if names is None:
        out.line("[error] %s", UNKNOWN_CLUSTER)
        return []
    return [info.broker_addr_table[name] for name in java_hash_set(list(names)) if name in info.broker_addr_table]


async def cluster_broker_names(admin: Admin, cluster: str) -> list[str]:
    """The broker names of ``cluster`` as Java's CommandUtil.fetchBrokerNameByClusterName hands them back (the
    ``HashSet`` fastjson fills); fails, as Java's NullPointerException on an unknown cluster and its exception on an
    empty one do."""
    names = (await admin.cluster_info()).cluster_addr_table.get(cluster)
    if not names:
        raise ValueError(UNKNOWN_CLUSTER)
    return java_hash_set(list(names))


async def cluster_masters(admin: Admin, out: Output, cluster: str) -> list[str]:
    """The masters of ``cluster`` (Java's CommandUtil.fetchMasterAddrByClusterName: a ``HashSet`` of them)."""
    return java_hash_set([bd.master_addr for bd in await cluster_brokers(admin, out, cluster) if bd.master_addr])


async def cluster_addrs(admin: Admin, out: Output, cluster: str) -> list[str]:
    """Every master and slave of ``cluster`` (Java's CommandUtil.fetchMasterAndSlaveAddrByClusterName: a
    ``HashSet`` of them)."""
    brokers = await cluster_brokers(admin, out, cluster)
    return java_hash_set([addr for bd in brokers for _, addr in sorted(bd.broker_addrs.items())])


async def cluster_masters_and_slaves(admin: Admin, out: Output, cluster: str) -> list[tuple[str, list[str]]]:
    """Each master of ``cluster`` with its slaves (Java's CommandUtil.fetchMasterAndSlaveDistinguish): the masters
    as its ``new HashMap<>(4)`` iterates them, a master's slaves by broker id (its ``brokerAddrs`` map)."""
    slaves = {
        bd.master_addr: [addr for bid, addr in sorted(bd.broker_addrs.items()) if bid != 0]
        for bd in await cluster_brokers(admin, out, cluster)
        if bd.master_addr
    }
    return [(master, slaves[master]) for master in java_hash_set(list(slaves), capacity=4)]


async def maintenance_targets(admin: Admin, addr: str | None, cluster: str | None) -> list[str]:
    """``-b``, else every broker of ``-c``, else of every cluster, slaves included, in the order Java's clean/delete
    commands (``cleanExpiredCQ``, ``deleteExpiredCommitLog``, ``cleanUnusedTopic``) ask them:
    ``ClusterInfo.retrieveAllAddrByCluster`` of each cluster of ``clusterAddrTable`` (a ``HashMap``), the cluster's
    broker names as the ``HashSet`` fastjson fills iterates them, each broker's addresses by id
    (common/src/main/java/org/apache/rocketmq/common/protocol/body/ClusterInfo.java,
    tools/src/main/java/org/apache/rocketmq/tools/admin/DefaultMQAdminExtImpl.java)."""
    if addr:
        return [addr]
    info = await admin.cluster_info()
    clusters = [cluster] if cluster else java_hash_set(list(info.cluster_addr_table))
    return [
        broker_addr
        for name in (n for c in clusters for n in java_hash_set(list(info.cluster_addr_table.get(c, ()))))
        if (data := info.broker_addr_table.get(name)) is not None
        for _, broker_addr in sorted(data.broker_addrs.items())
    ]


def parse_timestamp(text: str) -> int:
    """``now``, milliseconds, or RocketMQ's ``yyyy-MM-dd#HH:mm:ss:SSS``."""
    if text == "now":
        return int(time.time() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    # SimpleDateFormat's SSS is a count of milliseconds (":5" is 5 ms), not a decimal fraction as strptime's %f.
    seconds, _, millis = text.rpartition(":")
    if not millis.isdigit():
        raise ValueError(f"time data {text!r} does not match yyyy-MM-dd#HH:mm:ss:SSS")
    return int(datetime.strptime(seconds, "%Y-%m-%d#%H:%M:%S").timestamp() * 1000) + int(millis)


def parse_time_arg(text: str) -> int:
    """Java's ``timestampFormat`` of printMsg and consumeMessage: milliseconds or ``yyyy-MM-dd#HH:mm:ss:SSS``."""
    return int(text) if text.strip().lstrip("-").isdigit() else parse_timestamp(text.strip())


def split_addrs(text: str) -> Sequence[str]:
    return [a.strip() for a in text.split(";") if a.strip()]


def perm_text(perm: int) -> str:
    """Java's ``PermName.perm2String``: ``RW-``, ``R--``, ``RWX``."""
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")


def topic_config_text(tc: TopicConfig) -> str:
    """Java's ``TopicConfig.toString()``."""
    return tc.java_text()


def group_config_text(g: SubscriptionGroupConfig) -> str:
    """Java's ``SubscriptionGroupConfig.toString()``."""
    return (
        f"SubscriptionGroupConfig [groupName={g.group_name}, consumeEnable={java_text(g.consume_enable)}, "
        f"consumeFromMinEnable={java_text(g.consume_from_min_enable)}, "
        f"consumeBroadcastEnable={java_text(g.consume_broadcast_enable)}, retryQueueNums={g.retry_queue_nums}, "
        f"retryMaxTimes={g.retry_max_times}, brokerId={g.broker_id}, "
        f"whichBrokerWhenConsumeSlowly={g.which_broker_when_consume_slowly}, "
        f"notifyConsumerIdsChangedEnable={java_text(g.notify_consumer_ids_changed_enable)}]"
    )


def java_properties_text(properties: dict[str, str]) -> str:
    """A message's properties as Java prints them, ``{k1=v1, k2=v2}``: ``MessageDecoder.string2messageProperties``
    reads them into a ``HashMap`` (common/src/main/java/org/apache/rocketmq/common/message/MessageDecoder.java), so
    ``toString()`` lists them by hash bucket (:func:`java_hash_set` of the keys in the order the message carried
    them), not in that order."""
    return "{" + ", ".join(f"{k}={java_text(properties[k])}" for k in java_hash_set(list(properties))) + "}"


def java_map_text(table: dict[Any, Any]) -> str:
    """A Java ``HashMap.toString()``: ``{k1=v1, k2=v2}``."""
    return "{" + ", ".join(f"{k}={java_text(v)}" for k, v in table.items()) + "}"
