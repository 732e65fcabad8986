"""Real clients against a broker with ACL on (``python -m broker.embedded --aclEnable true``): ali-ons with its
``accessKey``/``secretKey`` options and the C++ core with session credentials produce and consume; with a wrong
secret, or an account without PUB on the topic, their sends fail and the broker stores nothing.

Neither real client speaks TLS here (ali-ons has none, the Python wrapper exposes none), so the TLS tests use our client
(``tests/remoting/test_tls.py``, ``tests/acl/test_tls_cluster.py``). One session per client kind, in its own broker
process; a missing client fails its tests, as in ``conftest.py``.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
import trio

from remoting.client import RemotingClient
from remoting.codec.acl_signing import SessionCredentials
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from tests.acl.conftest import PLAIN_ACL
from tests.e2e.cluster import EmbeddedBroker, create_topic, wait_for_route
from tests.e2e.harness import CLIENT_KINDS, Agent, ClientKind, Event, kill_all, log_tail, require

ADMIN = SessionCredentials("rocketmq2", "12345678")
COUNT = 20
STEP = 90.0


@attrs.define
class AclReport:
    sent_ok: int = 0
    received: set[str] = attrs.field(factory=set)
    wrong_secret: list[Event] = attrs.field(factory=list)
    no_pub: list[Event] = attrs.field(factory=list)
    stored: dict[str, int] = attrs.field(factory=dict)
    #: The broker's rate-limited refusal lines, and the client's own record of the error it got (C++ only: ali-ons
    #: reports a generic "still failed").
    refusals: list[str] = attrs.field(factory=list)
    client_saw: list[str] = attrs.field(factory=list)
    logs: Path | None = None


async def _stored(admin: RemotingClient, broker: str, topic: str) -> int:
    total = 0
    for queue in range(2):
        fields = {"topic": topic, "queueId": str(queue)}
        answer = await admin.invoke(broker, request(RequestCode.GET_MAX_OFFSET, fields), 10)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        total += int(answer.ext_fields["offset"])
    return total


def _messages(topic: str, prefix: str, count: int) -> list[Event]:
    return [{"topic": topic, "tags": "acl", "keys": f"{prefix}-{i}", "body": f"{prefix} #{i}"} for i in range(count)]


async def _session(kind: ClientKind, work: Path) -> AclReport:
    home = work / "rocketmq-home"
    (home / "conf").mkdir(parents=True)
    # The C++ consumer's message trace publishes to its cloud trace topic: let it, so refusals are only the tested ones.
    trace = "      - topicP=PUB\n      - rmq_sys_TRACE_DATA_DEFAULT_REGION=PUB\n"
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL.replace("      - topicP=PUB\n", trace))
    logs = work / "logs"
    logs.mkdir()
    broker = EmbeddedBroker(work / "data", logs, ("--aclEnable", "true", "--rocketmqHome", str(home)))
    report = AclReport(logs=logs)
    prefix = f"acl_{kind.name.replace('-', '_')}"
    agents: list[Agent] = []

    async def agent(nursery: trio.Nursery, role: str, group: str, key: str, secret: str, topic: str = "") -> Agent:
        name = f"{role}-{group}-{len(agents)}"
        options: dict[str, str | int] = {"namesrv": broker.namesrv_addr, "group": group}
        options.update(access_key=key, secret_key=secret)
        if role == "consumer":
            options["topic"] = topic
        if kind.name == "cpp":
            options["logs"] = str(logs / f"cpp-{name}")
        started = Agent(name, kind.argv(role, **options), logs / f"{name}.log")
        if kind.name == "cpp":
            started.native_log_dir = logs / f"cpp-{name}"
        agents.append(started)
        return await started.started(nursery)

    try:
        async with trio.open_nursery() as nursery:
            await broker.start(nursery)
            async with RemotingClient(credentials=ADMIN) as admin:
                for topic in ("topicB", "topicC"):
                    await create_topic(admin, broker.broker_addr, topic, 2)
                    await wait_for_route(admin, broker.namesrv_addr, topic)
                consumer = await agent(nursery, "consumer", "groupB", "RocketMQ", "12345678", "topicB")
                producer = await agent(nursery, "producer", f"{prefix}_pg", "RocketMQ", "12345678")
                sent = await producer.produce(_messages("topicB", prefix, COUNT), STEP)
                report.sent_ok = sum(1 for e in sent if e.get("ok"))
                keys = {f"{prefix}-{i}" for i in range(COUNT)}
                await consumer.wait_until(lambda: consumer.received_keys() >= keys, STEP, "every message")
                report.received = consumer.received_keys()
                report.no_pub = await producer.produce(_messages("topicC", f"{prefix}-nopub", 3), STEP)
                wrong = await agent(nursery, "producer", f"{prefix}_pg2", "RocketMQ", "not-the-secret")
                report.wrong_secret = await wrong.produce(_messages("topicB", f"{prefix}-wrong", 3), STEP)
                report.stored = {t: await _stored(admin, broker.broker_addr, t) for t in ("topicB", "topicC")}
                report.client_saw = producer.native_log_lines("AclException") + wrong.native_log_lines("AclException")
            nursery.cancel_scope.cancel()
        report.refusals = [
            line for line in log_tail(logs / "broker-1.log", 1 << 20).splitlines() if "ACL refused" in line
        ]
    finally:
        for each in agents:
            each.dump_events(logs / f"{each.name}.events.jsonl")
        await kill_all()
    return report


@pytest.fixture(scope="module", params=sorted(CLIENT_KINDS))
def acl_session(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AclReport:
    kind = CLIENT_KINDS[request.param]
    require(kind)
    return trio.run(_session, kind, tmp_path_factory.mktemp(f"e2e-acl-{kind.name}"))


def test_a_real_client_with_the_right_keys_produces_and_consumes(acl_session: AclReport) -> None:
    assert acl_session.sent_ok == COUNT, acl_session.logs
    assert len(acl_session.received) == COUNT, acl_session.logs


def test_a_wrong_secret_is_refused_and_nothing_is_stored(acl_session: AclReport) -> None:
    assert acl_session.wrong_secret and not any(e.get("ok") for e in acl_session.wrong_secret), acl_session.logs
    assert acl_session.stored["topicB"] == COUNT  # only the right-keyed sends
    assert any("Check signature failed for accessKey=RocketMQ" in line for line in acl_session.refusals)


def test_an_account_without_pub_on_the_topic_is_refused_and_nothing_is_stored(acl_session: AclReport) -> None:
    assert acl_session.no_pub and not any(e.get("ok") for e in acl_session.no_pub), acl_session.logs
    assert acl_session.stored["topicC"] == 0
    assert any("code 310" in line and "No default permission for topic:topicC" in line for line in acl_session.refusals)


def test_the_cpp_client_receives_rocketmqs_code_and_remark(acl_session: AclReport) -> None:
    if "cpp" not in str(acl_session.logs):
        pytest.skip("only the C++ core logs the broker's remark")
    remark = "org.apache.rocketmq.acl.common.AclException: No default permission for topic:topicC"
    assert any(remark in line and "error code:1" in line for line in acl_session.client_saw)
    assert any("Check signature failed for accessKey=RocketMQ" in line for line in acl_session.client_saw)
