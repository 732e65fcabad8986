"""The name server (docs/protocol.md#8-name-server-behaviour, docs/protocol.md#314-name-server-headers): brokers
register their routes, clients ask for them.

Modules: :mod:`namesrv.route_table` (the state and its rules), :mod:`namesrv.kv_config` (namespaced KV config in
``kvConfig.json``), :mod:`namesrv.processor` (request in, response out), :mod:`namesrv.liveness` (the 10 s scan),
:mod:`namesrv.server` (everything wired to a :class:`~remoting.server.RemotingServer`), :mod:`namesrv.config` and
:mod:`namesrv.cli` (``mqnamesrv``).
"""

from namesrv.config import NamesrvConfig, load_namesrv_config
from namesrv.server import NamesrvServer, serve_namesrv

__all__ = ["NamesrvConfig", "NamesrvServer", "load_namesrv_config", "serve_namesrv"]
