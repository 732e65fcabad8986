"""Starting the 5.x front door inside a broker process (RocketMQ's ``mqbroker --enable-proxy``, local mode).

:func:`serve_proxy` runs the revive loop of the broker's :class:`~broker.pop.PopService`
(:meth:`~broker.controller.BrokerController.pop_service`, whose arrival listener wakes long-polling receives), wires
the local invoker to the broker's own send, end-transaction, send-back and recall processors, checks every RPC
against the broker's ACL rules when
``aclEnable`` is on (:mod:`proxy.acl`), builds the cluster's routes on the broker's name-server client and publishes
the gRPC port it bound there (:mod:`proxy.route`), and serves gRPC on ``grpcServerPort`` and, with certificate files or
``grpcTlsServerPort``, on a TLS-only port too. With a certificate (``tlsTestModeEnable``, on by default as in RocketMQ,
``tlsCertPath`` or ``tls.server.certPath``) ``tls.server.mode`` decides what ``grpcServerPort`` serves, as RocketMQ's
proxy does: both (permissive, the default, through :mod:`proxy.front`), TLS only (enforcing), plaintext only (disabled);
without one (``tlsTestModeEnable false`` and no files) it is plaintext, whatever the mode. ``task_status.started`` gets
``(grpcServerPort, TLS-only port or 0)``. A port that cannot be bound raises :class:`~proxy.errors.ProxyStartError`
(an ``OSError``); a certificate that cannot be read or does not load raises it too ("grpc tls set failed: ...").
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from broker.controller import BrokerController
from broker.pop.revive import ReviveService
from processors.end_transaction import EndTransactionProcessor
from processors.recall import RecallMessageProcessor
from processors.send import SendMessageProcessor
from processors.send_back import ConsumerSendMsgBackProcessor
from proxy.bridge import TrioBridge
from proxy.config import ProxyConfig
from proxy.errors import ProxyStartError
from proxy.local import LocalInvoker
from proxy.messaging import MessagingActivity
from proxy.route import ClusterRoutes
from proxy.server import GrpcServer
from proxy.servicer import MessagingServicer
from remoting.tls import DISABLED, PERMISSIVE, load_key_pair, self_signed_pem, tls_mode

if TYPE_CHECKING:  # prometheus-client loads only with the broker's exporter (proxy.metrics)
    from remoting.prometheus import Source

__all__ = ["build_activity", "certificate", "serve_proxy"]


def build_activity(controller: BrokerController, config: ProxyConfig) -> tuple[MessagingActivity, ReviveService]:
    """The proxy's Trio-side objects over a running ``controller``."""
    ctx = controller.context
    pop, revive = controller.pop_service()  # shared with the remoting pop: one FIFO state, one revive loop
    send = SendMessageProcessor(
        ctx,
        delay_rewrite=controller.schedule.rewrite,
        timer_rewrite=controller.timer.rewrite,
        put_futures=controller.put_futures,
    )
    invoker = LocalInvoker(
        send,
        EndTransactionProcessor(ctx, controller.transaction_bridge),
        ConsumerSendMsgBackProcessor(ctx, controller.schedule.rewrite),
        RecallMessageProcessor(ctx, controller.timer.rewrite),
    )
    acl = None
    if controller.acl is not None:  # the ACL manager's modules only with aclEnable
        from proxy.acl import GrpcAcl

        acl = GrpcAcl(controller.acl)
    # The broker's own name-server client (None: the controller is not serving; routes name this broker alone).
    namesrv = None if controller.registration is None else controller.registration.client
    routes = ClusterRoutes(ctx, config, namesrv)
    return MessagingActivity(ctx, config, pop, invoker, acl, routes), revive


async def serve_proxy(
    controller: BrokerController,
    config: ProxyConfig,
    *,
    task_status: trio.TaskStatus[tuple[int, int]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the gRPC endpoint of a serving ``controller`` until cancelled. See the module docstring."""
    activity, revive = build_activity(controller, config)

    def servicer(bridge: TrioBridge, real_peer: Callable[[str], str]) -> MessagingServicer:
        return MessagingServicer(bridge, activity, real_peer)

    def tls_servicer(bridge: TrioBridge, real_peer: Callable[[str], str]) -> MessagingServicer:
        return MessagingServicer(bridge, activity, real_peer, tls_only=True)

    host = controller.config.listen_host
    exporter = controller.metrics
    up: list[Source] = []  # the proxy's gauge, while the broker's /metrics serves it
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(revive.run)
            await nursery.start(activity.consuming.renew.run)
            pem = certificate(config)
            mode = tls_mode(config.tls_server_mode)
            inbound, idle = config.grpc_max_inbound_message_size, config.grpc_client_idle_time_mills
            main = GrpcServer(servicer, host, config.grpc_server_port, None if mode == DISABLED else pem,
                              permissive=mode == PERMISSIVE, max_inbound=inbound, max_idle_ms=idle)  # fmt: skip
            port = await nursery.start(main.serve)
            tls_port = 0
            if pem is not None and config.tls_port is not None:
                secure = GrpcServer(tls_servicer, host, config.tls_port, pem, max_inbound=inbound, max_idle_ms=idle)
                tls_port = await nursery.start(secure.serve)
            await nursery.start(activity.routes.announce, port, tls_port or None)
            if exporter is not None:  # the broker's /metrics serves the proxy's gauge while it serves
                from proxy.metrics import proxy_up_source  # prometheus-client only with the exporter

                up.append(proxy_up_source(config, controller.config.metrics_label, controller.config.metrics_in_delta))
                exporter.sources.extend(up)
            task_status.started((port, tls_port))
    finally:
        if exporter is not None:
            exporter.sources[:] = [source for source in exporter.sources if source not in up]


def certificate(config: ProxyConfig) -> tuple[bytes, bytes] | None:
    """``(certificate chain PEM, key PEM)``: generated in test mode, else read from the configured files, else None.
    Raises :class:`ProxyStartError` ("grpc tls set failed: ...") for files that cannot be read or do not load as a
    certificate and its key (no key password: 5.3.3's ``ProxyAndTlsProtocolNegotiator.loadSslContext`` takes none),
    checked here as that ``loadSslContext`` checks them, since grpcio only logs why and reports a failed bind."""
    if config.tls_test_mode_enable:
        return self_signed_pem()
    paths = config.cert_paths
    if paths is None:
        return None
    cert, key = paths
    try:
        pem = Path(cert).read_bytes(), Path(key or cert).read_bytes()  # first: its error names the file
        load_key_pair(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), cert, key or cert, None)
        return pem
    except OSError as exc:  # ssl.SSLError too
        raise ProxyStartError(f"grpc tls set failed: {exc}") from exc
