"""DLedger's multi-path data directories (``storePathDLedgerCommitLog`` naming several, ``readOnlyCommitLogStorePaths``
its read-only ones, as RocketMQ 4.9.8's DLedgerCommitLog passes them on): entry segments spread over the directories,
read back at load, and a group of three brokers on real sockets under virtual time replicating into them through a
leader stop and restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from broker.broker_config import BrokerConfig
from broker.context import store_config_of
from broker.dledger_mode import dledger_config_of, dledger_store
from broker.embedded_dledger import EmbeddedDLedgerGroup
from remoting.client import RemotingClient
from remoting.codec.bodies import KVTable
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from store.mapped_file import segment_paths
from tests.broker.helpers import create_topic_request
from tests.conftest import SMALL_STORE
from tests.dledger.test_file_store import append, body, ledger_at
from tests.dledger.test_retention import TOPIC, bodies_from, caught_up, send_all


def _starts(directory: Path) -> list[int]:
    return [int(p.name) for p in segment_paths(directory)]


def test_entry_segments_spread_over_the_data_directories_and_load_back(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    ledger = ledger_at(tmp_path, data_store_path=f"{a},{b}")
    entries = append(ledger, 1, *[body(i) for i in range(30)])
    starts = [mf.file_from_offset for mf in ledger.data.files]
    assert len(starts) >= 4
    assert _starts(a) == starts[0::2] and _starts(b) == starts[1::2]
    assert not (tmp_path / "dledger-n0" / "data").exists()
    ledger.flush_all()
    ledger.close()
    # The first data directory kept for reading only: every entry is still there, new segments go to the others.
    c = tmp_path / "c"
    again = ledger_at(tmp_path, data_store_path=f"{a},{b},{c}", read_only_data_store_dirs=str(a))
    assert [again.get(i) for i in range(30)] == entries
    kept = _starts(a)
    more = append(again, 2, *[body(i) for i in range(30, 60)])
    assert _starts(a) == kept and _starts(c)
    again.flush_all()
    again.close()
    last = ledger_at(tmp_path, data_store_path=f"{a},{b},{c}", read_only_data_store_dirs=str(a))
    assert [last.get(i) for i in range(60)] == entries + more
    last.close()


def test_a_broker_whose_data_directories_are_all_read_only_is_refused_at_start(tmp_path: Path) -> None:
    disks = f"{tmp_path}/a,{tmp_path}/b"
    config = BrokerConfig(store_path_root_dir=str(tmp_path), enable_dleger_commit_log=True, dleger_self_id="n0",
                          dleger_peers="n0-127.0.0.1:1", store_path_dledger_commit_log=disks,
                          read_only_commit_log_store_paths=disks)  # fmt: skip
    assert dledger_config_of(config).read_only_data_store_dirs == disks
    with pytest.raises(ValueError, match="read-only"):
        dledger_store(config, store_config_of(config), b"\x7f\x00\x00\x01\x00\x00\x27\x11")


class TwoDiskGroup(EmbeddedDLedgerGroup):
    """Each member's entry data in two directories of its own."""

    def config(self, member: str) -> BrokerConfig:
        disks = ",".join(str(self.data_dir / member / disk) for disk in ("disk-a", "disk-b"))
        return attrs.evolve(super().config(member), store_path_dledger_commit_log=disks)


async def test_a_group_replicates_into_two_data_directories_through_a_leader_restart(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    overrides: dict[str, Any] = {**SMALL_STORE, "mapped_file_size_commit_log": 64 * 1024}
    async with TwoDiskGroup(tmp_path, **overrides) as group, RemotingClient() as client:
        leader = await group.leader()
        created = await client.invoke(group.addr(leader), create_topic_request(TOPIC, queues=1), 5)
        assert created.code == ResponseCode.SUCCESS
        await send_all(client, group.addr(leader), 60)
        stores = {m: group.store(m) for m in group.ids}
        for store in stores.values():
            await caught_up(store, stores[leader])
        expected = [b"%06d" % i for i in range(60)]
        for member, store in stores.items():
            starts = [mf.file_from_offset for mf in store.ledger.data.files]
            assert len(starts) >= 3, member
            assert _starts(tmp_path / member / "disk-a") == starts[0::2]
            assert _starts(tmp_path / member / "disk-b") == starts[1::2]
            assert bodies_from(store) == expected
        await group.stop(leader)
        successor = await group.leader()
        await send_all(client, group.addr(successor), 20, start=60)
        await group.start(leader)
        restarted = group.store(leader)
        await caught_up(restarted, group.store(successor))
        assert bodies_from(restarted) == [b"%06d" % i for i in range(80)]
        answer = await client.invoke(group.addr(leader), request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
        assert answer.code == ResponseCode.SUCCESS
        table = KVTable.decode(answer.body).table
        for disk in ("disk-a", "disk-b"):
            assert 0.0 <= float(table[f"commitLogDiskRatio_{tmp_path / leader / disk}"]) <= 1.0
