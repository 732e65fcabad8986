"""GET_BROKER_RUNTIME_INFO's table: every key RocketMQ 4.9.8 sends (``AdminBrokerProcessor.prepareRuntimeInfo`` over
``DefaultMessageStore.getRuntimeInfo`` over ``StoreStatsService.getRuntimeInfo``), in Java's text formats, because
``mqadmin brokerStatus``, ``mqadmin clusterList`` and rocketmq-exporter parse them (the exporter with no default:
one missing or malformed key loses the broker's whole sample; tests/broker/test_exporter_rules.py holds its rules).

Where each value comes from (docs/protocol.md#412-runtime-info-keys lists them all):

- the statistics (:meth:`processors.context.BrokerStats.runtime_entries`): rates, day totals, put totals, the put
  latency distribution and percentiles, the longest pull;
- the file system (``statvfs`` of the store's directories): ``commitLogDiskRatio[_<path>]``,
  ``consumeQueueDiskRatio`` (Java's ``getDiskPartitionSpaceUsedPercent``: used over used plus available, rounded up
  to a hundredth; -1 for a missing directory) and ``commitLogDirCapacity``;
- the store: offsets, the earliest stored message, the bytes not yet flushed;
- the processor pools: queue sizes, capacities and how long the head request has waited;
- replication (:meth:`store.ha.service.HAService.runtime_info`, ours: RocketMQ 4.x shows none): the HA port, a
  slave's master, offsets and received bytes, a master's connected slaves with their acknowledged offsets and lag.

``commitLogMaxOffset`` is the CommitLog's max offset, in DLedger mode the committed end; ``dispatchBehindBytes`` the
bytes below it not yet dispatched (:meth:`~store.message_store.MessageStore.dispatch_behind_bytes`: 0 on a master,
whose appends write the ConsumeQueue and index entries in the same call).

Constant by construction rather than by omission: ``pageCacheLockTimeMills`` (appends are
synchronous on the one Trio thread, so no append holds the CommitLog while this runs),
``remainTransientStoreBufferNumbs`` (``Integer.MAX_VALUE``: there is no transient store pool, as in Java with the
pool off). ``startAcceptSendRequestTimeStamp`` is the setting's value. Pools other than Java's
send, pull and query ones are reported under their camelCase family names too. Nothing here raises; an unreadable
directory gives Java's -1.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from remoting.codec.codes import CURRENT_VERSION
from remoting.codec.java_format import grouped, human_readable_bytes, java_double
from remoting.codec.java_properties import camel_case
from remoting.dispatch import ProcessorPool

if TYPE_CHECKING:
    from processors.context import BrokerContext

__all__ = ["disk_used_percent", "runtime_table", "runtime_text"]

_INT_MAX: Final = 2**31 - 1


def runtime_text(ms: int) -> str:
    """Java's ``[ D days, H hours, M minutes, S seconds ]`` (``MessageFormat`` groups thousands)."""
    seconds = ms // 1000
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"[ {grouped(days)} days, {grouped(hours)} hours, {grouped(minutes)} minutes, {grouped(secs)} seconds ]"


def disk_used_percent(path: Path) -> float:
    """Java's ``UtilAll.getDiskPartitionSpaceUsedPercent``: used / (used + available to us), rounded up to 0.01;
    -1.0 when ``path`` is missing or unreadable."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    if st.f_blocks <= 0:
        return -1.0
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    return -(-used * 100 // entire) / 100 if entire else -1.0


def _capacity(root: Path) -> str | None:
    try:
        st = os.statvfs(root)
    except OSError:
        return None
    total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    return f"Total : {human_readable_bytes(total)}, Free : {human_readable_bytes(usable)}."


def _store_entries(broker: BrokerContext) -> dict[str, str]:
    store = broker.store
    # In DLedger mode the data directories (getStorePathPhysic); the least used one is the ratio, as in
    # DefaultMessageStore.getRuntimeInfo.
    ratios = {directory: disk_used_percent(directory) for directory in store.commitlog.queue.dirs.writable}
    entries = {
        "commitLogMinOffset": str(store.min_phy_offset),
        "commitLogMaxOffset": str(store.max_phy_offset),
        **{f"commitLogDiskRatio_{directory}": java_double(ratio) for directory, ratio in ratios.items()},
        "commitLogDiskRatio": java_double(min(ratios.values())),
        "consumeQueueDiskRatio": java_double(disk_used_percent(store.config.consume_queue_dir)),
        "remainHowManyDataToFlush": human_readable_bytes(store.unflushed_bytes),
        "remainTransientStoreBufferNumbs": str(_INT_MAX),
        "earliestMessageTimeStamp": str(store.earliest_store_time()),
        "dispatchBehindBytes": str(store.dispatch_behind_bytes()),
        "pageCacheLockTimeMills": "0",
    }
    capacity = _capacity(store.root)
    if capacity is not None:
        entries["commitLogDirCapacity"] = capacity
    return entries


def _pool_entries(pools: Mapping[str, ProcessorPool]) -> dict[str, str]:
    entries = {}
    for family, pool in pools.items():
        name = camel_case(family)
        capacity = str(-1 if pool.queue_capacity == math.inf else int(pool.queue_capacity))
        entries[f"{name}ThreadPoolQueueSize"] = str(pool.queued)
        entries[f"{name}ThreadPoolQueueCapacity"] = capacity
        entries[f"{name}ThreadPoolQueueHeadWaitTimeMills"] = str(pool.head_wait_ms)
        if family == "end_transaction":
            entries["EndTransactionQueueSize"] = str(pool.queued)
            entries["EndTransactionThreadPoolQueueCapacity"] = capacity
    return entries


def runtime_table(broker: BrokerContext, pools: Mapping[str, ProcessorPool], now_ms: int) -> dict[str, str]:
    """The whole KV table at wall-clock ``now_ms`` (see the module docstring)."""
    boot = broker.boot_timestamp
    table = {
        "brokerVersion": str(CURRENT_VERSION),
        "brokerVersionDesc": "V4_9_8",
        "bootTimestamp": str(boot),
        "runtime": runtime_text(now_ms - boot if boot else 0),
        "startAcceptSendRequestTimeStamp": str(broker.config.start_accept_send_request_time_stamp),
        "brokerAddr": broker.broker_addr,
    }
    table.update(_store_entries(broker))
    table.update(broker.store.ha.runtime_info())
    table.update(broker.stats.runtime_entries())
    table.update(_pool_entries(pools))
    table.update(broker.store.runtime_entries())
    return table
