"""The error the 5.x front door's start fails with, apart from its settings' (:class:`ProxyStartError`)."""

from __future__ import annotations


class ProxyStartError(OSError):
    """The gRPC endpoint does not start: its port cannot be bound, its certificate does not load, a setting grpcio
    refuses. ``mqbroker --enable-proxy`` exits with ProxyStartup.main's status for it, 1 (proxy/src/main/java/org/
    apache/rocketmq/proxy/ProxyStartup.java: ``System.exit(1)``)."""
