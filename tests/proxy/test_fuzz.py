"""The gRPC endpoint under malformed input: random bytes as every RPC's protobuf, well-formed requests with bad
contents, raw HTTP/2 garbage on the socket. Each gets an error (a 5.x status or a gRPC status, or that connection
closed); the broker keeps running and a normal client keeps working."""

from __future__ import annotations

import random
import socket
from typing import Any

import grpc
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.pb import definition, service
from tests.proxy.cluster import GrpcCluster
from tests.proxy.official import drain, make_message, start_consumer, start_producer

pytestmark = pytest.mark.timeout(240)

PREFIX = "/apache.rocketmq.v2.MessagingService/"
UNARY = ["QueryRoute", "Heartbeat", "SendMessage", "QueryAssignment", "AckMessage", "ForwardMessageToDeadLetterQueue",
         "EndTransaction", "NotifyClientTermination", "ChangeInvisibleDuration", "UpdateOffset", "GetOffset",
         "QueryOffset", "RecallMessage", "SyncLiteSubscription"]  # fmt: skip
STREAMING = ["ReceiveMessage", "PullMessage"]
META = (("x-mq-client-id", "fuzzer@1@0@x"), ("x-mq-language", "PYTHON"))


def _raw_calls(endpoint: str) -> dict[str, set[str]]:
    """Hypothesis-chosen bytes to every method; returns the outcomes seen per method."""
    seen: dict[str, set[str]] = {}
    with grpc.insecure_channel(endpoint) as channel:

        @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(method=st.sampled_from(UNARY + STREAMING + ["Telemetry"]), payload=st.binary(max_size=512))
        def call(method: str, payload: bytes) -> None:
            try:
                if method in UNARY:
                    channel.unary_unary(PREFIX + method)(payload, timeout=5, metadata=META)
                elif method in STREAMING:
                    list(channel.unary_stream(PREFIX + method)(payload, timeout=7, metadata=META))
                else:
                    list(channel.stream_stream(PREFIX + method)(iter([payload]), timeout=2, metadata=META))
                outcome = "answered"
            except grpc.RpcError as err:
                outcome = err.code().name
            seen.setdefault(method, set()).add(outcome)

        call()
    return seen


def _bad_requests(endpoint: str) -> dict[str, Any]:
    with grpc.insecure_channel(endpoint) as channel:

        def unary(method: str, req: Any, resp: Any, metadata: Any = META) -> Any:
            return channel.unary_unary(
                PREFIX + method, request_serializer=type(req).SerializeToString, response_deserializer=resp.FromString
            )(req, timeout=5, metadata=metadata)

        empty_send = unary("SendMessage", service.SendMessageRequest(), service.SendMessageResponse)
        no_client = unary("QueryRoute", service.QueryRouteRequest(), service.QueryRouteResponse, metadata=())
        handle = service.AckMessageRequest()
        handle.group.name, handle.topic.name = "G", "T"
        handle.entries.add(message_id="x", receipt_handle="not a handle")
        bad_ack = unary("AckMessage", handle, service.AckMessageResponse)
        change = service.ChangeInvisibleDurationRequest(receipt_handle="1 2 3")
        change.group.name, change.topic.name = "G", "T"  # named: a nameless one is ILLEGAL_TOPIC first
        change.invisible_duration.FromSeconds(30)
        bad_change = unary("ChangeInvisibleDuration", change, service.ChangeInvisibleDurationResponse)
        recall = service.RecallMessageRequest(recall_handle="not a handle")  # and no topic
        bad_recall = unary("RecallMessage", recall, service.RecallMessageResponse)
        settings_less = service.TelemetryCommand(settings=definition.Settings())
        command = service.TelemetryCommand
        stream = channel.stream_stream(
            PREFIX + "Telemetry", request_serializer=command.SerializeToString, response_deserializer=command.FromString
        )
        try:
            list(stream(iter([settings_less]), timeout=5, metadata=META))
            telemetry = "answered"
        except grpc.RpcError as err:
            telemetry = err.code().name
    return {"empty_send": empty_send.status.code, "no_client": no_client.status.code,
            "bad_ack": bad_ack.status.code, "bad_change": bad_change.status.code, "bad_recall": bad_recall.status.code,
            "telemetry": telemetry}  # fmt: skip


def _garbage(port: int, seed: int) -> int:
    """Raw bytes on fresh connections: random junk, and the HTTP/2 preface followed by random frames."""
    rng = random.Random(seed)
    closed = 0
    for i in range(60):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            junk = rng.randbytes(rng.randrange(1, 4096))
            sock.sendall((b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" if i % 2 else b"") + junk)
            try:
                while sock.recv(65536):
                    pass
                closed += 1
            except (TimeoutError, ConnectionResetError):
                closed += 1
    return closed


def _still_serving(endpoint: str) -> list[Any]:
    producer = start_producer(endpoint, ["AfterFuzz"])
    producer.send(make_message("AfterFuzz", b"still here"))
    consumer = start_consumer(endpoint, "G-after-fuzz", "AfterFuzz")
    got = drain(consumer, 1)
    consumer.shutdown()
    producer.shutdown()
    return got


async def test_malformed_protobufs_and_http2_garbage_get_errors_not_a_crash(grpc_cluster: GrpcCluster) -> None:
    endpoint = grpc_cluster.endpoint
    closed: list[int] = []

    async def garbage() -> None:
        closed.append(await trio.to_thread.run_sync(_garbage, grpc_cluster.grpc_port, 1))

    async with trio.open_nursery() as nursery:  # garbage on the socket while the protobuf fuzzing runs
        nursery.start_soon(garbage)
        seen = await trio.to_thread.run_sync(_raw_calls, endpoint)
    assert closed == [60]  # the server closed every garbage connection
    # Bytes that do not parse are refused by grpcio before any handler (UNKNOWN); RPCs we do not serve are
    # UNIMPLEMENTED; everything else is answered with a 5.x status in the response.
    for method, outcomes in seen.items():
        unserved = method in ("PullMessage", "SyncLiteSubscription", "UpdateOffset", "GetOffset", "QueryOffset")
        allowed = {"UNIMPLEMENTED", "UNKNOWN"} if unserved else {"answered", "UNKNOWN", "INVALID_ARGUMENT"}
        assert outcomes <= allowed, (method, outcomes)
    bad = await trio.to_thread.run_sync(_bad_requests, endpoint)
    assert bad == {
        "empty_send": definition.Code.MESSAGE_CORRUPTED,
        "no_client": definition.Code.CLIENT_ID_REQUIRED,
        "bad_ack": definition.Code.INVALID_RECEIPT_HANDLE,
        "bad_change": definition.Code.INVALID_RECEIPT_HANDLE,
        "bad_recall": definition.Code.ILLEGAL_TOPIC,
        "telemetry": "INVALID_ARGUMENT",
    }
    assert grpc_cluster.broker is not None and grpc_cluster.broker.running
    assert [m.body for m in await trio.to_thread.run_sync(_still_serving, endpoint)] == [b"still here"]
