"""The broker in DLedger mode (docs/architecture.md#dledger): the store it runs and how its role follows the Raft
role, as RocketMQ 4.9.8's ``broker/src/main/java/org/apache/rocketmq/broker/dledger/DLedgerRoleChangeHandler.java``.

:func:`dledger_store` builds the :class:`~dledger.commitlog_store.DLedgerMessageStore` from the broker's settings
(DLedgerCommitLog's mapping: store base dir = ``storePathRootDir``, data dir = ``storePathDLedgerCommitLog``, one or
several (DLedger's multi-path data directories, with ``readOnlyCommitLogStorePaths`` as its read-only ones), entry
segment size = ``mappedFileSizeCommitLog``). :func:`as_follower` is the role a member starts in. :func:`follow_roles`
makes every role change rewrite ``brokerId`` / ``brokerRole`` in the broker's live config, tell the statistics (which
count incoming messages on a master only) and register at once: the leader as brokerId 0 (SYNC_MASTER) once its log is
committed and dispatched, a follower or candidate as its id's number + 1 (SLAVE), and a follower again whenever it
follows a new term's leader; :func:`reassert_master` repeats the leader's registration. A ``dLegerSelfId`` without a
number after its first character, or data paths that are all read-only, raise ``ValueError`` at start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import attrs
import trio

from broker.broker_config import BrokerConfig
from broker.context import BrokerState
from dledger.codes import Role
from dledger.commitlog_store import DLedgerMessageStore
from dledger.config import DLedgerConfig
from store.store_config import FlushDiskType, StoreConfig

log = logging.getLogger(__name__)


def dledger_config_of(config: BrokerConfig) -> DLedgerConfig:
    return DLedgerConfig(
        group=config.dleger_group or config.broker_name,
        self_id=config.dleger_self_id,
        peers=config.dleger_peers,
        store_base_dir=str(Path(config.store_path_root_dir).expanduser()),
        data_store_path=config.store_path_dledger_commit_log,
        read_only_data_store_dirs=config.read_only_commit_log_store_paths,
        mapped_file_size_for_entry_data=config.mapped_file_size_commit_log,
        preferred_leader_ids=config.preferred_leader_id,
        heart_beat_time_interval_ms=config.heart_beat_time_interval_ms,
        max_heart_beat_leak=config.max_heart_beat_leak,
        min_vote_interval_ms=config.min_vote_interval_ms,
        max_vote_interval_ms=config.max_vote_interval_ms,
        max_wait_ack_time_ms=config.max_wait_ack_time_ms,
        enable_batch_push=config.enable_batch_push,
        sync_before_ack=config.flush_disk_type == FlushDiskType.SYNC_FLUSH.value,
    )


def dledger_store(config: BrokerConfig, store_config: StoreConfig, store_host: bytes) -> DLedgerMessageStore:
    dledger = dledger_config_of(config)
    if dledger.self_id not in dledger.peer_map:
        raise ValueError(f"dLegerSelfId {dledger.self_id!r} is not one of dLegerPeers {dledger.peers!r}")
    return DLedgerMessageStore(store_config, dledger, store_host=store_host)


def follower_id(self_id: str) -> int:
    """DLedgerCommitLog's ``id``: the number after the first character, plus one."""
    return int(self_id[1:]) + 1


def as_follower(config: BrokerConfig) -> BrokerConfig:
    return attrs.evolve(config, broker_role="SLAVE", broker_id=follower_id(config.dleger_self_id))


async def reassert_master(ctx: BrokerState, store: DLedgerMessageStore, reregister: Callable[[], None]) -> None:
    """While this broker leads, register again every election timeout (``heartBeatTimeIntervalMs`` x
    ``maxHeartBeatLeak``): a deposed leader resumed from a pause may register once more as brokerId 0 before it
    hears of the new term, and the name server keeps the last registration (RocketMQ has the same race and waits for
    the next 30 s round). Runs until cancelled."""
    period = ctx.config.heart_beat_time_interval_ms * ctx.config.max_heart_beat_leak / 1000
    while True:
        await trio.sleep(period)
        if store.writable:
            reregister()


def follow_roles(ctx: BrokerState, store: DLedgerMessageStore, reregister: Callable[[], None]) -> None:
    """Keep ``ctx.config``'s brokerId and brokerRole in step with the store's Raft role; ``reregister`` runs after
    every change (an immediate registration round), and when a follower follows a new term's leader (RocketMQ's
    changeToSlave again: the master's address forgotten, the metadata sync rescheduled)."""

    def changed(role: str, term: int) -> None:
        broker_id = 0 if role != "SLAVE" else follower_id(ctx.config.dleger_self_id)
        if ctx.config.broker_role == role and ctx.config.broker_id == broker_id:
            # DLedgerRoleChangeHandler calls changeToSlave again for a FOLLOWER (a new term's leader), not for a
            # CANDIDATE that was a slave already.
            if role == "SLAVE" and store.raft_role is Role.FOLLOWER:
                log.info("dledger %s: follows a new leader in term %d", ctx.config.dleger_self_id, term)
                reregister()
            return
        ctx.config = attrs.evolve(ctx.config, broker_role=role, broker_id=broker_id)
        ctx.stats.set_replica(role == "SLAVE")
        log.info("dledger %s: broker is %s (brokerId %d) in term %d", ctx.config.dleger_self_id, role, broker_id, term)
        reregister()

    store.role_listeners.append(changed)
    if store.writable:  # it led before the listener was attached
        changed("SYNC_MASTER", store.server.node.member.curr_term)
