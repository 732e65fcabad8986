"""The gRPC server's limits (RocketMQ 5.3.3 ProxyConfig.grpcMaxInboundMessageSize = 130 MiB, used by
proxy/src/main/java/org/apache/rocketmq/proxy/grpc/GrpcServerBuilder.java) and the authorization header's parser
(acl/src/main/java/org/apache/rocketmq/acl/common/AuthorizationHeader.java): a batch of four 4 MiB bodies is taken,
and a trailing comma in the header parses. Found by a review; each failed before."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from proxy.auth_header import parse_authorization
from proxy.common import Code
from proxy.pb import service
from tests.proxy.grpc_front import front, message

pytestmark = pytest.mark.timeout(120)


async def test_a_batch_of_four_maximum_size_bodies_is_accepted(tmp_path: Path) -> None:
    # Each body is within maxMessageSize (4 MiB); RocketMQ's proxy takes requests up to 130 MiB. The broker stores
    # the request as one batch, which its own maxMessageSize must hold (CommitLog's batch encoder refuses more).
    async with front(tmp_path, max_message_size=17 * 1024 * 1024) as f:
        f.ctx.topics.create_topic_in_send_back_process("Big", 1)
        body = b"x" * (4 * 1024 * 1024)
        try:
            answer = await f.send(*(message("Big", body) for _ in range(4)))
            got = ("answered", Code.Name(answer.status.code), f.stored("Big"))
        except grpc.RpcError as err:
            got = ("rpc error", err.code().name, f.stored("Big"))
        assert got == ("answered", "OK", 4)


def test_a_trailing_comma_in_the_authorization_header_is_accepted() -> None:
    # Java's String.split(",") drops trailing empty strings, so "..., Signature=ab," parses.
    header = "MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time, Signature=abcd,"
    assert parse_authorization(header).access_key == "ak"


async def test_the_rpcs_not_served_answer_unimplemented_as_grpc_java_words_it(tmp_path: Path) -> None:
    """RocketMQ 5.3.3's GrpcMessagingApplication extends the MessagingServiceImplBase of rocketmq-proto 2.0.4 without
    overriding UpdateOffset, GetOffset, QueryOffset (nor PullMessage): grpc-java answers UNIMPLEMENTED "Method
    <full name> is unimplemented"; SyncLiteSubscription, newer than 2.0.4, is no method of its service: "Method not
    found: <full name>". Ours answered "not served by this broker" for all."""
    full = "apache.rocketmq.v2.MessagingService/"
    calls = [
        ("UpdateOffset", service.UpdateOffsetRequest(), service.UpdateOffsetResponse),
        ("GetOffset", service.GetOffsetRequest(), service.GetOffsetResponse),
        ("QueryOffset", service.QueryOffsetRequest(), service.QueryOffsetResponse),
        ("SyncLiteSubscription", service.SyncLiteSubscriptionRequest(), service.SyncLiteSubscriptionResponse),
    ]
    got = {}
    async with front(tmp_path) as f:
        for method, req, resp in calls:
            with pytest.raises(grpc.RpcError) as refused:
                await f.call(method, req, resp)
            got[method] = (refused.value.code().name, refused.value.details())
    assert got == {
        "UpdateOffset": ("UNIMPLEMENTED", f"Method {full}UpdateOffset is unimplemented"),
        "GetOffset": ("UNIMPLEMENTED", f"Method {full}GetOffset is unimplemented"),
        "QueryOffset": ("UNIMPLEMENTED", f"Method {full}QueryOffset is unimplemented"),
        "SyncLiteSubscription": ("UNIMPLEMENTED", f"Method not found: {full}SyncLiteSubscription"),
    }
