"""Broker request processors: command in, command out, one module per request family (DESIGN.md "processors/").

Each processor is a plain class built with the :class:`~broker.context.BrokerContext` and exposing
``async process(ctx, request) -> RemotingCommand | None`` (:mod:`remoting.processor`). Modules: :mod:`~processors.send`
(10, 310, 320), :mod:`~processors.pull` and :mod:`~processors.hold` (11 and long polling), :mod:`~processors.offsets`
(14, 15, 29-32), :mod:`~processors.query` (12, 33), :mod:`~processors.client_manage` (34, 35, 38, 46),
:mod:`~processors.locks` (41, 42) and :mod:`~processors.admin` (topics, groups, stats, connections, config).
:class:`~broker.controller.BrokerController` routes each code to its processor and pool.
"""
