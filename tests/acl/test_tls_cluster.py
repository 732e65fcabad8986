"""The whole stack over TLS: name server and broker in ``enforcing`` mode (the broker registers over TLS), our
producer and push consumer with ``tls=True``, signed for ACL too; a plaintext client is turned away at the door."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.embedded import EmbeddedCluster
from client import Message, Producer
from client.admin import Admin
from client.config import ClientConfig
from client.errors import MQClientError
from tests.acl.conftest import consume
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
