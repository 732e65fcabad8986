"""Starting the 5.x front door inside a broker process (RocketMQ's ``mqbroker --enable-proxy``, local mode).

:func:`serve_proxy` builds the broker's :class:`~broker.pop.PopService` and its revive loop, chains the pop's arrival
listener behind the store's (long-polling receives wake on new messages), wires the local invoker to the broker's own
send, end-transaction and recall processors, checks every RPC against the broker's ACL rules when ``aclEnable`` is on
(:mod:`proxy.acl`), and serves gRPC on ``grpcServerPort`` (plaintext) and, with a certificate, on
the TLS port. ``task_status.started`` gets ``(plaintext port, TLS port or 0)``. A port that cannot be bound raises
``OSError``; a certificate that cannot be read raises ``OSError`` too.
"""

from __future__ import annotations

from pathlib import Path

import trio

from broker.controller import BrokerController
from broker.pop import PopService
from broker.pop.revive import ReviveService
from processors.end_transaction import EndTransactionProcessor
from processors.recall import RecallMessageProcessor
from processors.send import SendMessageProcessor
from proxy.acl import GrpcAcl
from proxy.bridge import TrioBridge
from proxy.config import ProxyConfig
from proxy.local import LocalInvoker
from proxy.messaging import MessagingActivity
from proxy.server import GrpcServer
from proxy.servicer import MessagingServicer

__all__ = ["build_activity", "serve_proxy"]


def build_activity(controller: BrokerController, config: ProxyConfig) -> tuple[MessagingActivity, ReviveService]:
    """The proxy's Trio-side objects over a running ``controller``."""
    ctx = controller.context
    pop = PopService(ctx, controller.timer.rewrite)
    previous = ctx.store.arrival_listener

    def on_arrival(topic: str, queue_id: int, offset: int, tags_code: int, properties: str = "") -> None:
        if previous is not None:
            previous(topic, queue_id, offset, tags_code, properties)
        pop.notify_arrival(topic, queue_id, offset, tags_code, properties)

    ctx.store.arrival_listener = on_arrival
    send = SendMessageProcessor(
        ctx,
        delay_rewrite=controller.schedule.rewrite,
        timer_rewrite=controller.timer.rewrite,
        put_futures=controller.put_futures,
    )
    invoker = LocalInvoker(
        send,
        EndTransactionProcessor(ctx, controller.transaction_bridge),
        RecallMessageProcessor(ctx, controller.timer.rewrite),
    )
    acl = None if controller.acl is None else GrpcAcl(controller.acl)
    return MessagingActivity(ctx, config, pop, invoker, acl), ReviveService(pop)


async def serve_proxy(
    controller: BrokerController,
    config: ProxyConfig,
    *,
    task_status: trio.TaskStatus[tuple[int, int]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the gRPC endpoint of a serving ``controller`` until cancelled. See the module docstring."""
    activity, revive = build_activity(controller, config)

    def servicer(bridge: TrioBridge) -> MessagingServicer:
        return MessagingServicer(bridge, activity)

    host = controller.config.listen_host
    async with trio.open_nursery() as nursery:
        await nursery.start(revive.run)
        await nursery.start(activity.consuming.renew.run)
        port = await nursery.start(GrpcServer(servicer, host, config.grpc_server_port).serve)
        tls_port = 0
        if config.tls_server_cert_path:
            cert = Path(config.tls_server_cert_path).read_bytes()
            key = Path(config.tls_server_key_path).read_bytes()
            tls_port = await nursery.start(GrpcServer(servicer, host, config.tls_port, (cert, key)).serve)
        task_status.started((port, tls_port))
