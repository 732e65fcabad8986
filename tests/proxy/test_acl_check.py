"""The gRPC ACL check without a broker: the ``authorization`` header's parsing and signature (any text gives a
parsed header or AuthHeaderError, nothing else), the resources each 5.x request needs, and :class:`GrpcAcl` over a
real :class:`AclManager` and ``plain_acl.yml`` (every refusal is an RpcError 40100, never another exception). The
peer's IP as the check sees it: grpcio's percent-encoded IPv6 peer decoded (a white-listed ``::1`` client matches),
an unknown peer refused, never taken for 127.0.0.1 (both found by a review)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rocketmq import ClientConfiguration, Credentials
from rocketmq.v5.util.signature import Signature

from broker.acl.manager import AclFiles, AclManager
from broker.acl.permission import ANY, PUB, SUB
from proxy.acl import GrpcAcl, needed_by
from proxy.auth_header import AuthHeaderError, authorization_header, parse_authorization
from proxy.common import PEER_KEY, UNKNOWN_PEER, Code, RpcError, peer_of
from proxy.pb import definition, service
from proxy.server import GrpcServer
from proxy.servicer import _metadata
from tests.conftest import needs_ipv6_loopback

DATE = "20261127T222222Z"
#: The Python 5.x client's header for Credentials("ak-user1", "sk-secret1") at DATE (hmac.new(sk, DATE, sha1).hex()).
CLIENT_HEADER = (
    "MQv2-HMAC-SHA1 Credential=ak-user1, SignedHeaders=x-mq-date-time, "
    "Signature=2ad7ba16d500ccc2acd6195c0dadc593b5ead3e6"
)
PLAIN_ACL = """\
globalWhiteRemoteAddresses: [10.9.8.*]
accounts:
  - {accessKey: ak-user1, secretKey: sk-secret1, defaultTopicPerm: DENY, defaultGroupPerm: DENY,
     topicPerms: [TPub=PUB, TSub=SUB, TBoth=PUB|SUB], groupPerms: [GSub=SUB]}
  - {accessKey: ak-white, secretKey: sk-white1, whiteRemoteAddress: 192.168.7.*, defaultTopicPerm: DENY}
"""
#: An ``accounts`` entry white-listed for 127.0.0.1: from there, no right signature is needed.
LOCAL_TOOL = (
    "  - {accessKey: local-tool, secretKey: local-secret, whiteRemoteAddress: 127.0.0.1, defaultTopicPerm: PUB}\n"
)


def test_the_official_clients_headers_verify() -> None:
    config = ClientConfiguration("127.0.0.1:8081", Credentials("ak-user1", "sk-secret1"))
    md = dict(Signature.metadata(config, "c1"))
    auth = parse_authorization(md["authorization"])
    assert auth.access_key == "ak-user1"
    assert auth.signed_by("sk-secret1", md["x-mq-date-time"])
    assert not auth.signed_by("sk-secret2", md["x-mq-date-time"])
    anonymous = dict(Signature.metadata(ClientConfiguration("127.0.0.1:8081", Credentials()), "c1"))
    assert parse_authorization(anonymous["authorization"]).access_key is None


def test_the_clients_header_parses_and_its_signature_verifies() -> None:
    assert authorization_header("ak-user1", "sk-secret1", DATE) == CLIENT_HEADER
    auth = parse_authorization(CLIENT_HEADER)
    assert (auth.method, auth.access_key) == ("MQv2-HMAC-SHA1", "ak-user1")
    assert auth.signed_by("sk-secret1", DATE)
    assert parse_authorization(CLIENT_HEADER.upper().replace("CREDENTIAL=AK-USER1", "Credential=ak-user1")) is not None
    assert not auth.signed_by("sk-secret2", DATE)
    assert not auth.signed_by("sk-secret1", "20261127T222223Z")
    assert not auth.signed_by("sk-secret1", None)
    # The credential is cut at "/"; an empty one (the client without credentials) is no access key.
    assert parse_authorization("M Credential=ak-user1/2026/x, Signature=00").access_key == "ak-user1"
    empty = parse_authorization("MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature=")
    assert (empty.access_key, empty.signature) == (None, b"")
    assert parse_authorization("M Credential=a").signature is None


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (None, "authorization header is missing"),
        ("", "authorization header is incorrect"),
        ("MQv2-HMAC-SHA1", "authorization header is incorrect"),
        ("MQv2-HMAC-SHA1 Credential", "keyValues length is incorrect"),
        ("MQv2-HMAC-SHA1 Credential=a,,Signature=00", "keyValues length is incorrect"),
        ("MQv2-HMAC-SHA1 Credential=a, Signature=abc", "Odd number of characters"),
        ("MQv2-HMAC-SHA1 Credential=a, Signature=zz", "Illegal hexadecimal character"),
        ("MQv2-HMAC-SHA1 Credential=a, Signature=a  b ", "Illegal hexadecimal character"),
        ("MQv2-HMAC-SHA1 Credential=a, Signature=é1", "Illegal hexadecimal character"),
    ],
)
def test_bad_header_shapes_are_refused_with_a_reason(header: str | None, reason: str) -> None:
    with pytest.raises(AuthHeaderError, match=reason):
        parse_authorization(header)


@settings(max_examples=400, deadline=None, database=None)
@given(st.text(alphabet=st.sampled_from(list(" =,/Credential=Signature=0aF\x00é")), max_size=60) | st.text())
def test_any_header_text_parses_or_is_refused_never_crashes(header: str) -> None:
    with contextlib.suppress(AuthHeaderError):
        parse_authorization(header).signed_by("sk-secret1", DATE)


def _topic(name: str) -> Any:
    return definition.Resource(name=name)


@pytest.mark.parametrize(
    ("req", "needed"),
    [
        (service.SendMessageRequest(messages=[definition.Message(topic=_topic("T"))] * 2), {"T": PUB}),
        (service.EndTransactionRequest(topic=_topic("T")), {"T": PUB}),
        (service.RecallMessageRequest(topic=_topic("T"), recall_handle="h"), {"T": PUB}),
        (
            service.ReceiveMessageRequest(group=_topic("G"), message_queue=definition.MessageQueue(topic=_topic("T"))),
            {"%RETRY%G": SUB, "T": SUB},
        ),
        (service.AckMessageRequest(group=_topic("G"), topic=_topic("T")), {"%RETRY%G": SUB, "T": SUB}),
        (service.ForwardMessageToDeadLetterQueueRequest(group=_topic("G"), topic=_topic("T")),
         {"%RETRY%G": SUB, "T": SUB}),
        (service.ChangeInvisibleDurationRequest(group=_topic("G"), topic=_topic("T")), {"%RETRY%G": SUB, "T": SUB}),
        (service.QueryAssignmentRequest(group=_topic("G"), topic=_topic("T")), {"%RETRY%G": SUB, "T": SUB}),
        (service.QueryRouteRequest(topic=_topic("T")), {"T": ANY}),
        (service.HeartbeatRequest(client_type=definition.ClientType.PRODUCER), {}),
        (service.HeartbeatRequest(client_type=definition.ClientType.SIMPLE_CONSUMER, group=_topic("G")),
         {"%RETRY%G": SUB}),
        (service.NotifyClientTerminationRequest(), {}),
        (service.NotifyClientTerminationRequest(group=_topic("G")), {"%RETRY%G": SUB}),
        (service.TelemetryCommand(settings=definition.Settings(publishing=definition.Publishing(
            topics=[_topic("A"), _topic("B")]))), {"A": PUB, "B": PUB}),
        (service.TelemetryCommand(settings=definition.Settings(subscription=definition.Subscription(
            group=_topic("G"), subscriptions=[definition.SubscriptionEntry(topic=_topic("T"))]))),
         {"%RETRY%G": SUB, "T": SUB}),
        (service.TelemetryCommand(status=definition.Status(code=Code.OK)), {}),
        (None, {}),
    ],
)  # fmt: skip
def test_each_request_needs_what_rocketmq_5_asks(req: Any, needed: dict[str, int]) -> None:
    assert needed_by(req) == needed


@pytest.mark.parametrize(
    ("req", "reason"),
    [
        (service.SendMessageRequest(), "messageCount is zero"),
        (
            service.SendMessageRequest(
                messages=[definition.Message(topic=_topic("A")), definition.Message(topic=_topic("B"))]
            ),
            "topic is not consistent",
        ),
        (service.HeartbeatRequest(client_type=definition.ClientType.PUSH_CONSUMER), "doesn't have group"),
        (service.TelemetryCommand(settings=definition.Settings()), "doesn't have publishing or subscription"),
    ],
)
def test_requests_rocketmq_5_cannot_parse_are_refused(req: Any, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        needed_by(req)


def acl_over(home: Path, plain_acl: str) -> GrpcAcl:
    """The gRPC check over an AclManager loaded from ``home`` whose ``conf/plain_acl.yml`` is ``plain_acl``."""
    (home / "conf").mkdir()
    (home / "conf" / "plain_acl.yml").write_text(plain_acl)
    manager = AclManager(AclFiles(home))
    manager.load()
    return GrpcAcl(manager)


@pytest.fixture
def acl(tmp_path: Path) -> GrpcAcl:
    return acl_over(tmp_path, PLAIN_ACL)


def _md(header: str | None, peer: str = "ipv4:127.0.0.1:5000", date: str | None = DATE) -> dict[str, str]:
    md = {PEER_KEY: peer, "x-mq-client-id": "c1"}
    if header is not None:
        md["authorization"] = header
    if date is not None:
        md["x-mq-date-time"] = date
    return md


def _refusal(acl: GrpcAcl, req: Any, md: dict[str, str]) -> str | None:
    try:
        acl.check(req, md)
    except RpcError as err:
        assert err.code == Code.UNAUTHORIZED
        return err.message
    return None


def _send(topic: str) -> Any:
    return service.SendMessageRequest(messages=[definition.Message(topic=_topic(topic))])


def test_grpc_acl_authenticates_then_checks_permissions(acl: GrpcAcl) -> None:
    good = _md(CLIENT_HEADER)
    assert _refusal(acl, _send("TPub"), good) is None
    assert _refusal(acl, service.QueryRouteRequest(topic=_topic("TSub")), good) is None
    assert _refusal(acl, None, good) is None  # a Telemetry stream opening: credentials only
    assert _refusal(acl, _send("TSub"), good) == "No default permission for topic:TSub"
    assert _refusal(acl, _send("TOther"), good) == "No default permission for topic:TOther"
    ack = service.AckMessageRequest(group=_topic("GOther"), topic=_topic("TSub"))
    assert _refusal(acl, ack, good) == "No default permission for group:GOther"
    wrong = authorization_header("ak-user1", "sk-wrong-1", DATE)
    assert _refusal(acl, _send("TPub"), _md(wrong)) == "Check signature failed for accessKey=ak-user1"
    assert _refusal(acl, _send("TPub"), _md(CLIENT_HEADER, date="20261127T222223Z")) is not None
    assert _refusal(acl, _send("TPub"), _md(CLIENT_HEADER, date=None)) is not None
    unknown = authorization_header("ak-nobody", "sk-secret1", DATE)
    assert _refusal(acl, _send("TPub"), _md(unknown)) == "No acl config for ak-nobody"
    no_credentials = "MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature="
    assert _refusal(acl, _send("TPub"), _md(no_credentials)) == "No accessKey is configured"
    assert _refusal(acl, _send("TPub"), _md(None)) == "authorization header is missing"
    assert _refusal(acl, service.SendMessageRequest(), good) == "SendMessageRequest, messageCount is zero"
    assert acl.refused == 10


def test_white_addresses_apply_to_the_grpc_peer(acl: GrpcAcl) -> None:
    # The global white list admits any well-formed header (any key, any signature); an account's white address skips
    # its signature.
    unknown = authorization_header("ak-nobody", "sk-wrong-1", DATE)
    assert _refusal(acl, _send("TAny"), _md(unknown, peer="ipv4:10.9.8.7:1234")) is None
    wrong = authorization_header("ak-white", "sk-wrong-1", DATE)
    assert _refusal(acl, _send("TAny"), _md(wrong, peer="ipv4:192.168.7.1:1")) is None
    assert _refusal(acl, _send("TAny"), _md(wrong, peer="ipv4:192.168.8.1:1")) == (
        "Check signature failed for accessKey=ak-white"
    )
    assert _refusal(acl, _send("TAny"), _md(wrong, peer="ipv6:[::1]:1")) is not None


@settings(max_examples=300, deadline=None, database=None)
@given(header=st.text(max_size=80), date=st.none() | st.text(max_size=20), peer=st.text(max_size=30))
def test_any_headers_are_refused_with_40100_never_an_exception(
    tmp_path_factory: pytest.TempPathFactory, header: str, date: str | None, peer: str
) -> None:
    home = tmp_path_factory.getbasetemp() / "fuzz-home"
    if not home.exists():
        (home / "conf").mkdir(parents=True)
        (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL.replace("[10.9.8.*]", "[]"))
    manager = AclManager(AclFiles(home))
    manager.load()
    acl = GrpcAcl(manager)
    md = {"authorization": header, PEER_KEY: peer}
    if date is not None:
        md["x-mq-date-time"] = date
    assert _refusal(acl, _send("TPub"), md) is not None


@pytest.mark.parametrize(
    ("peer", "address"),
    [
        ("ipv4:10.1.2.3:5000", ("10.1.2.3", 5000)),
        ("ipv6:%5B::1%5D:443", ("::1", 443)),  # grpcio's own form
        ("ipv6:[fe80::1]:7", ("fe80::1", 7)),  # the front's
        ("", UNKNOWN_PEER),  # proxy.front.real_peer of an ended front connection
        ("ipv4::0", UNKNOWN_PEER),
        ("unix:/tmp/grpc.sock", UNKNOWN_PEER),
        (None, UNKNOWN_PEER),
    ],
)
def test_the_peer_is_read_from_grpcios_and_the_fronts_forms(peer: str | None, address: tuple[str, int]) -> None:
    assert peer_of({} if peer is None else {PEER_KEY: peer}) == address


@pytest.mark.parametrize("peer", ["", "unix:/tmp/grpc.sock", "ipv4::0"])
def test_an_unknown_peer_is_refused_even_where_loopback_is_white_listed(tmp_path: Path, peer: str) -> None:
    """An account white-listed for 127.0.0.1 and a global white list for everything: a call whose address is not
    known is still refused, never taken for a local one."""
    acl = acl_over(tmp_path, "globalWhiteRemoteAddresses: ['*']\naccounts:\n" + LOCAL_TOOL)
    wrong = authorization_header("local-tool", "not-the-secret", DATE)
    assert _refusal(acl, _send("T"), _md(wrong, peer=peer)) == "the client's address is unknown"
    assert _refusal(acl, _send("T"), _md(wrong, peer="ipv4:127.0.0.1:1")) is None


def _grpc_metadata_of_a_call_from(host: str) -> dict[str, str]:
    """The metadata MessagingServicer builds (``proxy.servicer._metadata``) for a real grpcio call from ``host`` to a
    port grpcio serves itself."""
    seen: list[dict[str, str]] = []
    served_directly = GrpcServer(lambda bridge, real_peer: None, host, 0)

    async def handler(req: bytes, context: grpc.aio.ServicerContext) -> bytes:
        seen.append(_metadata(context, served_directly.real_peer))
        return b""

    async def main() -> None:
        server = grpc.aio.server()
        handlers = {"M": grpc.unary_unary_rpc_method_handler(handler)}
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.S", handlers),))
        port = server.add_insecure_port(f"[{host}]:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"[{host}]:{port}") as channel:
                await channel.unary_unary("/test.S/M")(b"")
        finally:
            await server.stop(0)

    asyncio.run(main())
    return seen[0]


@needs_ipv6_loopback
def test_an_ipv6_grpc_client_is_matched_by_its_white_address(tmp_path: Path) -> None:
    """grpcio gives ``context.peer()`` as ``ipv6:%5B::1%5D:<port>``; the check compares ``::1`` as RocketMQ 5 does
    (the channel's address), so an account white-listed for ::1 needs no right signature."""
    acl = acl_over(tmp_path, "accounts:\n" + LOCAL_TOOL.replace("127.0.0.1", "'::1'"))
    md = _grpc_metadata_of_a_call_from("::1")
    assert peer_of(md)[0] == "::1", md[PEER_KEY]
    md.update(_md(authorization_header("local-tool", "not-the-secret", DATE), peer=md[PEER_KEY]))
    assert _refusal(acl, _send("T"), md) is None


@pytest.mark.parametrize(
    ("header", "date", "reason"),
    [
        (None, DATE, "authorization header is missing"),  # a 5.x Java client without credentials sends none
        ("garbage", DATE, "authorization header is incorrect"),
        ("MQv2-HMAC-SHA1 Credential=ak-white, Signature=zz", DATE, "Illegal hexadecimal character"),
        (CLIENT_HEADER, None, "x-mq-date-time header is missing"),
    ],
)
def test_a_globally_white_listed_client_still_needs_a_well_formed_header(
    acl: GrpcAcl, header: str | None, date: str | None, reason: str
) -> None:
    """RocketMQ 5's AuthenticationInterceptor parses the ``authorization`` and ``x-mq-date-time`` headers
    (``PlainAccessResource.parse(GeneratedMessageV3, AuthenticationHeader)``) before ``PlainPermissionManager.validate``
    looks at the global white list: a white-listed peer with a missing or malformed header is refused; a well-formed
    header with any signature is admitted."""
    peer = "ipv4:10.9.8.7:1234"
    refusal = _refusal(acl, _send("TAny"), _md(header, peer=peer, date=date))
    assert refusal is not None and reason in refusal
    wrong = authorization_header("ak-nobody", "sk-wrong-1", DATE)
    assert _refusal(acl, _send("TAny"), _md(wrong, peer=peer)) is None
