"""The whole stack over TLS: name server and broker in ``enforcing`` mode (the broker registers over TLS), our
producer and push consumer with ``tls=True``, signed for ACL too; a plaintext client is turned away at the door."""

from __future__ import annotations

from pathlib import Path

import pytest
import trustme

from broker.embedded import EmbeddedCluster
from client import Message, Producer
from client.admin import Admin
from client.config import ClientConfig
from client.errors import MQClientError
from tests.acl.conftest import consume, host_named_tls_settings
from tests.conftest import SMALL_STORE


async def test_producer_and_consumer_over_tls_with_acl_against_an_enforcing_cluster(
    tmp_path: Path, acl_home: Path
) -> None:
    overrides = {"tls_server_mode": "enforcing", "tls_config_file": str(tmp_path / "none"), **SMALL_STORE}
    async with EmbeddedCluster(tmp_path / "c", acl_enable=True, rocketmq_home=str(acl_home), **overrides) as cluster:
        ns = cluster.namesrv_addr

        def config(key: str, tls: bool = True) -> ClientConfig:
            return ClientConfig(namesrv_addr=ns, access_key=key, secret_key="12345678", tls=tls)

        async with Admin(config=config("rocketmq2")) as admin:
            await admin.create_topic("topicB", read_queue_nums=2, write_queue_nums=2)
        async with Producer("PG-tls", config=config("RocketMQ")) as producer:
            for i in range(4):
                await producer.send(Message("topicB", f"tls-{i}".encode()))
        got = await consume(config("RocketMQ"), "groupB", "topicB", 4)
        assert sorted(got) == [f"tls-{i}".encode() for i in range(4)]
        async with Admin(config=config("rocketmq2", tls=False)) as plain:
            with pytest.raises(MQClientError):
                await plain.cluster_info()


async def test_a_client_checking_the_brokers_certificate_does_not_check_the_host_name(tmp_path: Path) -> None:
    """``tls_ca_file`` is Java's ``tls.client.authServer`` with ``tls.client.trustCertPath``: RocketMQ's client checks
    the server's chain against the trust file and nothing else (``TlsHelper.buildSslContext(true)``;
    ``NettyRemotingClient`` makes its handler with ``sslContext.newHandler(alloc)``, no peer host). Brokers and name
    servers are addressed by IP, and certificates made as RocketMQ's TLS guide makes them name no IP: a producer must
    send through such a cluster, and still refuse one whose certificate another CA signed."""
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))

    def settings(issuer: trustme.CA, name: str) -> dict[str, object]:
        return host_named_tls_settings(tmp_path, issuer, name, "broker.rocketmq.internal")  # no 127.0.0.1

    async with EmbeddedCluster(tmp_path / "c", **settings(ca, "trusted")) as cluster:
        config = ClientConfig(namesrv_addr=cluster.namesrv_addr, tls=True, tls_ca_file=str(ca_file))
        async with Admin(config=config) as admin:
            await admin.create_topic("TLS-CA", read_queue_nums=1, write_queue_nums=1)
        async with Producer("PG-tls-ca", config=config) as producer:
            result = await producer.send(Message("TLS-CA", b"checked chain"))
        assert result.msg_id
    async with EmbeddedCluster(tmp_path / "d", **settings(trustme.CA(), "untrusted")) as cluster:
        config = ClientConfig(namesrv_addr=cluster.namesrv_addr, tls=True, tls_ca_file=str(ca_file))
        async with Admin(config=config) as admin:
            with pytest.raises(MQClientError):
                await admin.cluster_info()
