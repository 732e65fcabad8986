"""The Proxy page's data, as rocketmq-dashboard's ``ProxyController`` and ``ProxyServiceImpl``: the proxy addresses
the dashboard knows (``rocketmq.config.proxyAddrs``) and the current one (``rocketmq.config.proxyAddr``, else the
first of the list, as ``RMQConfigure.setProxyAddrs``), adding one to the list (``addProxyAddr.do``: nothing when it
is there; either way the list's first is current again, as ``setProxyAddrs``) and making one current
(``updateProxyAddr.do``: it does not join the list, as Java's ``updateProxyAddrList``).

Kept in memory only, as rocketmq-dashboard keeps them in its ``RMQConfigure``: a restart starts from the settings.
Our proxy is a broker's gRPC endpoint (``--enable-proxy``), which its clients reach directly; the dashboard reads the
cluster through the name servers and has no use of its own for the address (rocketmq-dashboard asks a 5.x proxy in
its remoting mode for a group's connections). A malformed address is a :class:`~dashboard.ops.BadAddress` (400).
"""

from __future__ import annotations

from typing import Any

import attrs

from dashboard.ops import BadAddress
from remoting.client import parse_address
from remoting.errors import RemotingError


def check_proxy(addr: str) -> str:
    """``addr`` (``host:port``) stripped; :class:`BadAddress` when malformed."""
    addr = addr.strip()
    try:
        parse_address(addr)
    except RemotingError:
        raise BadAddress(f"bad proxy address {addr!r}, expected host:port (port 0-65535)") from None
    return addr


@attrs.define
class ProxyAddrs:
    """See the module docstring."""

    known: list[str]
    current: str | None

    @classmethod
    def of(cls, known: tuple[str, ...], current: str | None) -> ProxyAddrs:
        return cls(list(known), current or (known[0] if known else None))

    def home(self) -> dict[str, Any]:
        """rocketmq-dashboard's ``homePage.query``."""
        return {"currentProxyAddr": self.current, "proxyAddrList": list(self.known)}

    def add(self, addr: str) -> None:
        """``addr`` joins the list (nothing when it is there) and the list's first is current again, as
        ``addProxyAddrList`` hands the list to ``RMQConfigure.setProxyAddrs``."""
        addr = check_proxy(addr)
        if addr not in self.known:
            self.known.append(addr)
        self.current = self.known[0]

    def use(self, addr: str) -> None:
        self.current = check_proxy(addr)
