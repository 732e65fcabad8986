"""The RocketMQ 5.x front door: ``apache.rocketmq.v2.MessagingService`` over gRPC inside the broker process
(RocketMQ's local proxy mode, ``mqbroker --enable-proxy``), translating to the broker's own processors, pop service
and store. docs/grpc.md describes it; :func:`proxy.startup.serve_proxy` starts it.
"""
