"""The generated protobuf and gRPC modules of ``apache.rocketmq.v2``.

They come from the pinned ``rocketmq-python-client`` distribution (``rocketmq.grpc_protocol``), which ships the
modules generated from apache/rocketmq-apis: the server parses exactly what the official 5.x Python client writes,
and nothing fetched is committed here (docs/grpc.md#generated-code). Importing them loads that client package too
(about 0.5 s, once, only when the proxy is enabled).
"""

from __future__ import annotations

from rocketmq.grpc_protocol import definition_pb2 as definition
from rocketmq.grpc_protocol import service_pb2 as service
from rocketmq.grpc_protocol import service_pb2_grpc as service_grpc

__all__ = ["definition", "service", "service_grpc"]
