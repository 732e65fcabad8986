"""An embedded cluster with ACL on, over a RocketMQ home whose ``conf/plain_acl.yml`` is :data:`PLAIN_ACL`; settings for
a TLS cluster whose certificate names a host and no IP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trustme

from broker.embedded import EmbeddedCluster
from client import ConsumeConcurrentlyStatus, MessageExt, PushConsumer
from client.config import ClientConfig
from remoting.codec.bodies import ConsumeFromWhere
from tests.conftest import SMALL_STORE

#: Shaped like RocketMQ's shipped sample, plus an account white-listed by address and a publish-only topic.
PLAIN_ACL = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
      - topicP=PUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
  - accessKey: trusted-host
    secretKey: 87654321
    whiteRemoteAddress: 127.0.0.1
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
"""


@pytest.fixture
def acl_home(tmp_path: Path) -> Path:
    """A RocketMQ home with :data:`PLAIN_ACL` as its default ACL file."""
    home = tmp_path / "rocketmq-home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    return home


@pytest.fixture
async def acl_cluster(tmp_path: Path, acl_home: Path) -> AsyncIterator[EmbeddedCluster]:
    async with EmbeddedCluster(tmp_path / "cluster", acl_enable=True, rocketmq_home=str(acl_home), **SMALL_STORE) as c:
        yield c


async def consume(config: ClientConfig, group: str, topic: str, count: int) -> list[bytes]:
    """Bodies a push consumer of ``group`` gets from ``topic`` (from the first offset) until it has ``count``."""
    received: list[bytes] = []
    done = trio.Event()

    async def on_messages(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        received.extend(m.body for m in msgs)
        if len(received) >= count:
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(group, config=config, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(on_messages)
    async with consumer:
        with trio.fail_after(30):
            await done.wait()
    return received


def host_named_tls_settings(tmp_path: Path, issuer: trustme.CA, name: str, host: str) -> dict[str, object]:
    """Settings of an enforcing TLS cluster serving a certificate ``issuer`` signs for ``host`` alone (no IP)."""
    cert = issuer.issue_cert(host)
    cert_path, key_path = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    cert.cert_chain_pems[0].write_to_path(str(cert_path))
    cert.private_key_pem.write_to_path(str(key_path))
    return {
        "tls_server_mode": "enforcing",
        "tls_config_file": str(tmp_path / "none"),
        "tls_test_mode_enable": False,
        "tls_server_cert_path": str(cert_path),
        "tls_server_key_path": str(key_path),
        **SMALL_STORE,
    }
