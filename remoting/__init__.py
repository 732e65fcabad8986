"""The Trio transport: server (accept, readers, processor pools) and the anyio client, over one connection type.

Import the pieces from their modules: :mod:`remoting.server`, :mod:`remoting.client`, :mod:`remoting.dispatch`,
:mod:`remoting.connection`, :mod:`remoting.errors`. ``remoting.codec`` is the sans-IO protocol underneath.
"""
