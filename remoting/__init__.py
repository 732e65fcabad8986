"""The Trio transport: server (accept, readers, processor pools) and the anyio client, over one connection type.

Module map (import from the modules themselves):

- :mod:`remoting.server`: ``RemotingServer``, ``ServerConfig``; accept, one reader per connection, close listeners;
- :mod:`remoting.dispatch`: ``Dispatcher`` (code -> processor, pool), ``ProcessorPool``, ``broker_pools``;
- :mod:`remoting.processor`: the ``Processor`` protocol, ``RequestContext``, ``run_processor`` (outcome -> wire);
- :mod:`remoting.connection`: ``Connection``, shared by server and client: framing, writes, opaque matching, idle;
- :mod:`remoting.client`: ``RemotingClient`` (anyio: Trio or asyncio), one connection per address;
- :mod:`remoting.future`, :mod:`remoting.primitives`: an invocation's completion; per-loop primitives;
- :mod:`remoting.errors`: ``RemotingError`` and its subclasses.

``remoting.codec`` is the sans-IO protocol underneath.
"""
