"""Fuzzing the ACL path: random fields, huge signatures, missing keys, random bodies. The check only ever refuses
with RocketMQ's AclException (code 1 on the wire), and the broker keeps serving a well-signed client meanwhile."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.acl.manager import AclDenied, AclFiles, AclManager
from broker.embedded import EmbeddedCluster
from remoting.client import RemotingClient
from remoting.codec.acl_signing import SessionCredentials, sign
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from tests.acl.conftest import PLAIN_ACL

CODES = [10, 310, 36, 11, 12, 34, 35, 38, 15, 14, 17, 25, 200, 207, 215, 50, 51, 52, 53, 320, 37, 9999]
KEYS = ["AccessKey", "Signature", "SecurityToken", "topic", "b", "a", "group", "consumerGroup", "clientID", "queueId",
        "commitOffset", "_UNIQUE_KEY_QUERY", "\u0000", "\U0001f600"]  # fmt: skip
ACCOUNTS = ["RocketMQ", "rocketmq2", "trusted-host", "nobody12", "", "%RETRY%x"]
TOPICS = ["topicA", "topicB", "topicC", "%RETRY%groupA", "%RETRY%groupB", "RMQ_SYS_TRACE_TOPIC", "", "x" * 300]

_value = st.one_of(st.sampled_from(ACCOUNTS + TOPICS), st.text(max_size=20), st.integers().map(str))
_fields = st.dictionaries(st.sampled_from(KEYS), _value, max_size=8)
_body = st.one_of(
    st.just(b""), st.binary(max_size=200), st.just(b'{"clientID":"c","consumerDataSet":[{"groupName":1}]}')
)


def _manager(tmp_path: Path) -> AclManager:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True, exist_ok=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    manager = AclManager(AclFiles(home))
    manager.load()
    return manager


@given(
    code=st.sampled_from(CODES),
    fields=_fields,
    body=_body,
    signature=st.one_of(st.none(), st.text(max_size=50), st.just("A" * 200_000)),
    ip=st.sampled_from(["127.0.0.1", "10.10.103.7", "192.168.1.9", "::1", "garbage"]),
)
def test_random_requests_are_admitted_or_refused_with_an_acl_error_only(
    code: int, fields: dict[str, str], body: bytes, signature: str | None, ip: str
) -> None:
    manager = _MANAGER
    if signature is not None:
        fields = {**fields, "Signature": signature}
    try:
        manager.validate(ip, request(code, fields, body))
    except AclDenied as exc:
        assert exc.remark.startswith("org.apache.rocketmq.acl.common.AclException: ")


_MANAGER: AclManager


def setup_module() -> None:
    import tempfile

    global _MANAGER
    _MANAGER = _manager(Path(tempfile.mkdtemp(prefix="acl-fuzz-")))


def _random_request(rng: random.Random) -> RemotingCommand:
    fields = {rng.choice(KEYS): rng.choice(ACCOUNTS + TOPICS + ["", "0", "-1", "x" * rng.randint(0, 5000)])
              for _ in range(rng.randint(0, 6))}  # fmt: skip
    if rng.random() < 0.3:
        fields["Signature"] = "S" * rng.choice([0, 28, 100_000])
    body = rng.choice([b"", b"\xff" * rng.randint(1, 3000), b"{}", b'{"consumerDataSet":[{}]}'])
    cmd = request(rng.choice(CODES), fields, body)
    if rng.random() < 0.3:
        cmd = sign(cmd, SessionCredentials(rng.choice(ACCOUNTS) or "empty-key", rng.choice(["12345678", "bad"])))
    return cmd


async def test_a_flood_of_random_requests_gets_only_rocketmq_answers_and_others_are_still_served(
    acl_cluster: EmbeddedCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="broker.acl.admission")
    rng = random.Random(20240917)
    good = SessionCredentials("RocketMQ", "12345678")
    refused = 0
    async with RemotingClient() as fuzzer, RemotingClient(credentials=good) as honest:
        for i in range(400):
            answer = await fuzzer.invoke(acl_cluster.broker_addr, _random_request(rng), 10)
            if answer.code == ResponseCode.SYSTEM_ERROR and (answer.remark or "").startswith(
                "org.apache.rocketmq.acl.common.AclException: "
            ):
                refused += 1
            if i % 50 == 0:  # a well-signed client on its own connection is served all along
                ok = await honest.invoke(
                    acl_cluster.broker_addr,
                    request(RequestCode.GET_MAX_OFFSET, {"topic": "topicB", "queueId": "0"}),
                    10,
                )
                assert ok.code == ResponseCode.SUCCESS
    assert refused > 200
    lines = [r.getMessage() for r in caplog.records if r.name == "broker.acl.admission"]
    assert lines and all("\n" not in line and len(line) < 500 for line in lines)  # keys of 5,000 chars were sent
