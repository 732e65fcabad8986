"""The name server (behaviour.md 11, protocol.md 3.12): brokers register their routes, clients ask for them.

Modules: :mod:`namesrv.route_table` (the state and its rules), :mod:`namesrv.kv_config` (namespaced KV config in
``kvConfig.json``), :mod:`namesrv.processor` (request in, response out), :mod:`namesrv.liveness` (the 10 s scan),
:mod:`namesrv.server` (everything wired to a :class:`~remoting.server.RemotingServer`), :mod:`namesrv.config` and
:mod:`namesrv.cli` (``mqnamesrv``).
"""

from namesrv.config import NamesrvConfig, load_namesrv_config
from namesrv.server import NamesrvServer, serve_namesrv

__all__ = ["NamesrvConfig", "NamesrvServer", "load_namesrv_config", "serve_namesrv"]
