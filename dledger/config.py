"""DLedger's settings (``DLedgerConfig.java`` of DLedger 0.3.1.2), defaults as DLedger's.

RocketMQ exposes only the group, peers, self id, store path and preferred leader (``MessageStoreConfig``'s
``dLegerGroup``, ``dLegerPeers``, ``dLegerSelfId``, ``storePathDLedgerCommitLog``, ``preferredLeaderId``); the broker
builds this from its own settings (:func:`broker.dledger_settings`), where the timings keep DLedger's names so a
``broker.conf`` may set them too.

``peers`` is DLedger's ``id-host:port;id-host:port`` string: the id is the text before the first ``-``
(``MemberState.java``). :func:`parse_peers` raises ``ValueError`` for an entry without one.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from store.store_paths import SegmentDirs


def parse_peers(peers: str) -> dict[str, str]:
    """``"n0-127.0.0.1:40911;n1-..."`` -> ``{"n0": "127.0.0.1:40911", ...}`` in the written order."""
    out: dict[str, str] = {}
    for item in peers.split(";"):
        item = item.strip()
        if not item:
            continue
        peer_id, sep, addr = item.partition("-")
        if not sep or not peer_id or not addr:
            raise ValueError(f"peer {item!r} is not id-host:port")
        out[peer_id] = addr
    if not out:
        raise ValueError("no peers")
    return out


@attrs.frozen(kw_only=True)
class DLedgerConfig:
    group: str = "default"
    self_id: str = "n0"
    peers: str = "n0-localhost:20911"
    #: ``<storeBaseDir>/dledger-<selfId>/`` holds ``data/``, ``index/``, ``checkpoint`` and ``currterm``.
    store_base_dir: str = str(Path.home() / "dledgerstore")
    #: Empty: ``<storeBaseDir>/dledger-<selfId>/data``. Several ``,``-separated: DLedger's multi-path data
    #: directories (store/store_paths.py).
    data_store_path: str = ""
    #: Data directories read but never written (multi-path only; RocketMQ sets ``readOnlyCommitLogStorePaths``).
    read_only_data_store_dirs: str = ""
    mapped_file_size_for_entry_data: int = 1024 * 1024 * 1024
    mapped_file_size_for_entry_index: int = 32 * 5 * 1024 * 1024
    #: ``;``-separated ids; the leader hands leadership to a live one of these that is caught up.
    preferred_leader_ids: str = ""
    enable_leader_elector: bool = True
    heart_beat_time_interval_ms: int = 2000
    max_heart_beat_leak: int = 3
    min_vote_interval_ms: int = 300
    max_vote_interval_ms: int = 1000
    max_pending_requests_num: int = 10_000
    max_wait_ack_time_ms: int = 2500
    max_push_time_out_ms: int = 1000
    #: Every RPC between members (vote, heartbeat, push, transfer) gives up after this (DLedgerRpcNettyService's 3 s).
    rpc_timeout_ms: int = 3000
    enable_batch_push: bool = False
    max_batch_push_size: int = 4 * 1024
    #: An APPEND push of an entry more than 1000 entries and this many bytes behind the leader's end counts against
    #: ``peer_push_quota`` bytes a second per follower (DLedgerEntryPusher's ``checkQuotaAndWait``; single pushes
    #: only, as there: not with ``enable_batch_push``).
    peer_push_throttle_point: int = 300 * 1024 * 1024
    peer_push_quota: int = 20 * 1024 * 1024
    flush_file_interval: int = 10
    check_point_interval: int = 3000
    max_leadership_transfer_wait_index: int = 1000
    min_take_leadership_vote_interval_ms: int = 30
    max_take_leadership_vote_interval_ms: int = 100
    leadership_transfer_wait_timeout: int = 1000
    #: Ours: answer a push, and count the leader's own copy, only once it is on disk (the broker sets it under
    #: SYNC_FLUSH). DLedger acknowledges from the page cache and flushes every ``flushFileInterval``.
    sync_before_ack: bool = False

    @property
    def peer_map(self) -> dict[str, str]:
        return parse_peers(self.peers)

    @property
    def preferred_leaders(self) -> list[str]:
        return [p for p in self.preferred_leader_ids.split(";") if p]

    @property
    def default_path(self) -> Path:
        return Path(self.store_base_dir).expanduser() / f"dledger-{self.self_id}"

    @property
    def data_dirs(self) -> SegmentDirs:
        """The entry data's directories. Raises ValueError when every one named is read-only."""
        default = self.default_path / "data"
        return SegmentDirs.from_settings(self.data_store_path, self.read_only_data_store_dirs, default)

    @property
    def data_path(self) -> Path:
        """The first data directory (the only one unless multi-path)."""
        return self.data_dirs.primary

    @property
    def index_path(self) -> Path:
        return self.default_path / "index"
