"""Broker request processors: command in, command out, one module per request family.

Each processor is a plain class built with a :class:`~processors.context.BrokerContext` (a protocol: this layer never
imports ``broker``) and exposing ``async process(ctx, request) -> RemotingCommand | None`` (:mod:`remoting.processor`).
Modules: :mod:`~processors.send` (10, 310, 320), :mod:`~processors.send_back` (36), :mod:`~processors.pull` and
:mod:`~processors.hold` (11 and long polling), :mod:`~processors.offsets` (14, 15, 29-32), :mod:`~processors.query`
(12, 33), :mod:`~processors.client_manage` (34, 35, 38, 46), :mod:`~processors.locks` (41, 42),
:mod:`~processors.end_transaction` (37), :mod:`~processors.stats` (300, 315, 317) and :mod:`~processors.admin`
(topics, groups, runtime info, connections, config; :mod:`~processors.broker2client` for the codes that call a
consumer). :mod:`~processors.transaction_bridge` keeps transactions' half and op topics for END_TRANSACTION and the
broker's check service. ``broker/controller.py`` routes each code to its processor and pool.
"""
