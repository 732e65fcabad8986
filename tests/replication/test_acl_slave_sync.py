"""Replication under ACL, in virtual time (real sockets on 127.0.0.1): a master and a slave with ``aclEnable=true``
over one ``plain_acl.yml``. As in RocketMQ 4.9.8, the slave's metadata sync is not signed (``BrokerOuterAPI`` has no
client RPC hook), so the master answers it only when its ``globalWhiteRemoteAddresses`` match the slave's address;
the HA port is not behind ACL, so the CommitLog replicates either way."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing

from broker.acl.admission import AclAdmission
from broker.acl.watcher import WATCH_INTERVAL
from broker.embedded import EmbeddedCluster
from broker.slave_sync import ACL_HINT, SlaveSynchronize
from client import Admin, Message, Producer, SendStatus
from client.config import ClientConfig
from remoting.client import RemotingClient
from remoting.codec.acl_signing import SessionCredentials
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.message import iter_records
from store.metadata_files import SubscriptionGroupConfig
from tests.broker.helpers import create_topic_request
from tests.conftest import SMALL_STORE
from tests.processors.conftest import pull_request
from tests.semantics.helpers import deliver_delayed

APP = SessionCredentials("app-user", "app-secret")
ADMIN = SessionCredentials("ops-admin", "ops-secret")
ACL_FILE = """\
globalWhiteRemoteAddresses:
  - {white}
accounts:
  - accessKey: app-user
    secretKey: app-secret
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - Kept=PUB|SUB
  - accessKey: ops-admin
    secretKey: ops-secret
    admin: true
"""
SLAVE_ADDRESS = "127.0.0.1"  # where the slave's connections come from
SYNC_CODES = {
    RequestCode.GET_ALL_TOPIC_CONFIG,
    RequestCode.GET_ALL_CONSUMER_OFFSET,
    RequestCode.GET_ALL_DELAY_OFFSET,
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    RequestCode.GET_BROKER_RUNTIME_INFO,  # ours: the master's CommitLog end, for the slave's own lag
}


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[EmbeddedCluster]:
    """Master and slave with ACL on; the slave's address is in the global white list."""
    home = tmp_path / "rocketmq-home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(ACL_FILE.format(white=SLAVE_ADDRESS))
    overrides = {"acl_enable": True, "rocketmq_home": str(home), **SMALL_STORE}
    async with EmbeddedCluster(tmp_path / "c", slaves=1, **overrides) as c:
        yield c


def _sync(cluster: EmbeddedCluster) -> SlaveSynchronize:
    sync = cluster.slave_controllers[0].replication.slave_sync
    assert sync is not None
    return sync


def _master_refusals(cluster: EmbeddedCluster) -> int:
    admission = cluster.controller.dispatcher.admission
    assert isinstance(admission, AclAdmission)
    return admission.refused


async def _rounds(sync: SlaveSynchronize, count: int) -> None:
    """``count`` more sync rounds ended."""
    before = sync.rounds
    while sync.rounds < before + count:
        await trio.sleep(0.5)


async def _two_rounds(sync: SlaveSynchronize) -> None:
    """Two whole sync rounds (a round under way may have read part of the data before a change)."""
    await _rounds(sync, 2)


async def _prepare(cluster: EmbeddedCluster) -> None:
    """Topic ``Kept``, group ``app-group`` with offset 42 on queue 0, delay level 3 at 7, on the master."""
    async with Admin(cluster.namesrv_addr) as admin:  # white-listed by address: no signature needed
        await admin.create_topic("Kept", read_queue_nums=1, write_queue_nums=1, broker_addr=cluster.broker_addr)
        await admin.create_subscription_group(SubscriptionGroupConfig("app-group", retry_max_times=5))
    cluster.controller.context.offsets.commit("app-group", "Kept", 0, 42)
    await deliver_delayed(cluster, "KeptDelay", 3, 7)


async def test_a_white_listed_slave_copies_the_metadata_and_the_commitlog(
    cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    master, slave = cluster.controller, cluster.slave_controllers[0]
    await _prepare(cluster)
    async with Producer("pg", cluster.namesrv_addr) as producer:
        sent = [await producer.send(Message("Kept", f"m{i}".encode())) for i in range(5)]
    assert {r.send_status for r in sent} == {SendStatus.SEND_OK}
    await _two_rounds(_sync(cluster))
    assert slave.context.topics.get("Kept") == master.context.topics.get("Kept")
    assert slave.context.topics.data_version == master.context.topics.data_version
    assert slave.context.groups.get("app-group") == master.context.groups.get("app-group")
    assert slave.context.offsets.query("app-group", "Kept", 0) == 42
    assert slave.schedule.offsets == {3: 7}
    assert _master_refusals(cluster) == 0
    await cluster.wait_replicated()


async def test_without_the_white_list_the_sync_is_refused_and_the_slave_keeps_serving(
    cluster: EmbeddedCluster, tmp_path: Path, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    master, slave = cluster.controller, cluster.slave_controllers[0]
    sync = _sync(cluster)
    await _prepare(cluster)
    await _two_rounds(sync)
    assert slave.context.offsets.query("app-group", "Kept", 0) == 42
    # The operator drops the slave's address from the global white list: both brokers reload the file.
    acl_file = tmp_path / "rocketmq-home" / "conf" / "plain_acl.yml"
    acl_file.write_text(ACL_FILE.format(white="10.10.103.*"))
    await trio.sleep(WATCH_INTERVAL + 0.5)
    # A round under way at the reload may have been answered in part (the timer checkpoint, then its metrics refused):
    # count only the rounds that start after it.
    await _rounds(sync, 1)
    caplog.set_level(logging.WARNING, logger="broker.slave_sync")
    caplog.clear()
    refused_before = _master_refusals(cluster)
    async with RemotingClient(credentials=ADMIN) as admin:
        created = await admin.invoke(cluster.broker_addr, create_topic_request("Later", queues=1), 5)
    assert created.code == ResponseCode.SUCCESS
    master.context.offsets.commit("app-group", "Kept", 0, 99)
    config = ClientConfig(namesrv_addr=cluster.namesrv_addr, access_key=APP.access_key, secret_key=APP.secret_key)
    async with Producer("pg", config=config) as producer:
        sent = await producer.send(Message("Kept", b"after the white list"))
    assert sent.send_status is SendStatus.SEND_OK
    await _two_rounds(sync)

    # Every sync request was refused by the master's ACL, and the slave said why.
    assert _master_refusals(cluster) - refused_before >= 2 * len(SYNC_CODES)
    refusals = [r.getMessage() for r in caplog.records if r.name == "broker.slave_sync"]
    assert {int(m.split()[3]) for m in refusals} == SYNC_CODES
    assert all(m.endswith(ACL_HINT) and f" to {cluster.broker_addr} answered 1 " in m for m in refusals)
    # The slave keeps what it had: no new topic, the old offset.
    assert slave.context.topics.get("Later") is None and slave.context.topics.get("Kept") is not None
    assert slave.context.offsets.query("app-group", "Kept", 0) == 42
    # The CommitLog still replicates, and the slave serves it to a signed consumer.
    await cluster.wait_replicated()
    async with RemotingClient(credentials=APP) as client:
        pulled = await client.invoke(slave.broker_addr, pull_request("Kept", group="app-group", suspend_ms=0), 5)
    assert pulled.code == ResponseCode.SUCCESS
    assert [m.body for m in iter_records(pulled.body or b"")] == [b"after the white list"]

    # Back in the white list, the next rounds copy what the slave missed.
    acl_file.write_text(ACL_FILE.format(white=SLAVE_ADDRESS))
    await trio.sleep(WATCH_INTERVAL + 0.5)
    await _two_rounds(sync)
    assert slave.context.topics.get("Later") == master.context.topics.get("Later")
    assert slave.context.offsets.query("app-group", "Kept", 0) == 99
