"""Start-up and restart settings at their edges: an embedded cluster keeps a ``brokerIP1`` given on its command line
whatever its value, an embedded DLedger group left inside a cancelled scope still closes and its name server keeps
its config file in the group's data dir, and an updated ``haListenPort`` waits for the restart as ``listenPort``
does."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster, broker_overrides_of
from broker.embedded_dledger import EmbeddedDLedgerGroup
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.local_address import local_address
from tests.conftest import SMALL_STORE


def test_embedded_keeps_a_broker_ip1_given_even_when_it_equals_the_hosts_address() -> None:
    """brokerIP1's default is the host's address: an override keeping only values that differ from the defaults
    dropped `python -m broker.embedded --brokerIP1 <the host's address>` (the value someone advertising the broker to
    other hosts gives), and the cluster registered its --host (127.0.0.1) instead."""
    host_address = local_address()
    assert broker_overrides_of(["--brokerIP1", host_address]) == {"broker_ip1": host_address}


async def test_leaving_a_dledger_group_inside_a_cancelled_scope_closes_it(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """EmbeddedDLedgerGroup._stop_all awaits each member's end (so each unregisters first). When the enclosing scope
    is cancelled (a fail_after deadline, Ctrl-C, a sibling task's failure), that await raised Cancelled out of
    NurseryOwner.__aexit__ before it cancelled and left the group's nursery: trio.run ended with TrioInternalError."""
    with trio.CancelScope() as scope:
        async with EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE) as group:
            await group.leader()
            scope.cancel()
    assert scope.cancelled_caught


async def test_an_updated_ha_listen_port_is_not_registered_before_a_restart(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """listenPort waits for the restart because registering a port the broker does not listen on breaks its clients;
    haListenPort likewise: it went live into config.ha_server_addr, which every registration sends
    (broker/registration.py) and slaves connect to, while the HA listener keeps the port it bound at start."""
    controller = embedded_cluster.controller
    before = controller.context.config.ha_server_addr
    update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"haListenPort=1\n")
    async with RemotingClient() as client:
        assert (await client.invoke(embedded_cluster.broker_addr, update, 5)).code == ResponseCode.SUCCESS
    assert controller.context.config.ha_server_addr == before
    assert controller.context.store.ha.port == int(before.rsplit(":", 1)[1])


async def test_the_dledger_groups_name_server_keeps_its_config_file_in_the_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """UPDATE_NAMESRV_CONFIG persists to ``configStorePath`` (4.9.8's Configuration.persist), whose default is
    ``$HOME/namesrv/namesrv.properties`` (NamesrvConfig): the DLedger group's name server kept that default, so an
    update wrote into the user's home, shared by every group and test, and each start read its ``tls.*`` keys from
    there. The single-master cluster keeps it under its data dir, as its kvConfig.json; so must the group."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    async with EmbeddedDLedgerGroup(tmp_path / "data", **SMALL_STORE) as group, RemotingClient() as client:
        update = request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\n")
        assert (await client.invoke(group.namesrv_addr, update, 5)).code == ResponseCode.SUCCESS
    assert "orderMessageEnable=true\n" in (tmp_path / "data" / "namesrv" / "namesrv.properties").read_text()
    assert not (tmp_path / "home" / "namesrv").exists()
