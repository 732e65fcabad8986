"""The gRPC server's limits (RocketMQ 5.3.3 ProxyConfig.grpcMaxInboundMessageSize = 130 MiB, used by
proxy/src/main/java/org/apache/rocketmq/proxy/grpc/GrpcServerBuilder.java) and the authorization header's parser
(acl/src/main/java/org/apache/rocketmq/acl/common/AuthorizationHeader.java): a batch of four 4 MiB bodies is taken,
and a trailing comma in the header parses. Found by a review; each failed before."""

from __future__ import annotations

import queue
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
import trio

from broker.cli import build_proxy_config
from proxy.auth_header import parse_authorization
from proxy.common import Code
from proxy.pb import service
from tests.e2e.harness import REPO_ROOT
from tests.proxy.grpc_front import META, PREFIX, front, message

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


def _closed_when_idle(endpoint: str, wait: float) -> bool:
    """Whether the server ends a connection that has no call in flight: one QueryRoute answered, then the channel
    watched until the server's GOAWAY sends it from READY back to IDLE (``wait``: seconds to give up after)."""
    states: queue.Queue[grpc.ChannelConnectivity] = queue.Queue()
    with grpc.insecure_channel(endpoint) as channel:
        channel.subscribe(states.put)
        route = channel.unary_unary(
            PREFIX + "QueryRoute",
            request_serializer=service.QueryRouteRequest.SerializeToString,
            response_deserializer=service.QueryRouteResponse.FromString,
        )
        req = service.QueryRouteRequest()
        req.topic.name = "NoSuchTopic"
        route(req, timeout=10, metadata=META)
        end = time.monotonic() + wait
        ready = False
        while (left := end - time.monotonic()) > 0:
            try:
                state = states.get(timeout=left)
            except queue.Empty:
                return False
            ready = ready or state is grpc.ChannelConnectivity.READY
            if ready and state is grpc.ChannelConnectivity.IDLE:
                return True
        return False


@pytest.mark.parametrize("front_door", ["grpcio", "sniffing front"])
async def test_a_connection_idle_for_grpc_client_idle_time_mills_is_closed(tmp_path: Path, front_door: str) -> None:
    """RocketMQ 5.3.3's GrpcServerBuilder gives Netty's server ``maxConnectionIdle(grpcClientIdleTimeMills)`` (120 s by
    default, proxy/src/main/java/org/apache/rocketmq/proxy/config/ProxyConfig.java): a client connection without a
    call in flight for that long is sent GOAWAY and closed, the client reconnecting at its next call. Read from the
    broker's properties as the other proxy settings; served through the permissive port's front too."""
    args = ["--grpcServerPort", "0", "--grpcClientIdleTimeMills", "300"]
    args += ["--tlsTestModeEnable", "true" if front_door == "sniffing front" else "false"]
    config = build_proxy_config(None, args, enable=True)
    async with front(tmp_path, config) as f:
        assert await trio.to_thread.run_sync(_closed_when_idle, f.endpoint, 60.0)


async def test_a_grpc_client_idle_time_that_is_not_positive_stops_the_start(tmp_path: Path) -> None:
    """Netty's NettyServerBuilder.maxConnectionIdle refuses a value that is not positive, so RocketMQ 5.3.3's proxy
    does not start with ``grpcClientIdleTimeMills=0`` (GrpcServerBuilder passes it as it is)."""
    argv = [sys.executable, "-m", "broker.cli", "--enable-proxy", "-n", "127.0.0.1:1", "--listenPort", "0",
            "--grpcServerPort", "0", "--storePathRootDir", str(tmp_path / "store"), "--tlsTestModeEnable", "false",
            "--grpcClientIdleTimeMills", "0"]  # fmt: skip
    with trio.fail_after(90):
        done = await trio.run_process(
            argv, stdin=subprocess.DEVNULL, cwd=REPO_ROOT, capture_stdout=True, capture_stderr=True, check=False
        )
    err = done.stderr.decode()
    assert done.returncode == 1, err[-2000:]
    [line] = [line for line in err.splitlines() if line.startswith("mqbroker:")]
    assert "max connection idle must be positive: 0" in line, line
