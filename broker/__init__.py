"""The broker assembly (DESIGN.md "broker/"): managers, services, the controller and the binaries.

- State: :mod:`broker.topic_config_manager`, :mod:`broker.subscription_group_manager`,
  :mod:`broker.consumer_offset_manager` (each persisted through :mod:`broker.persistence`),
  :mod:`broker.client_registry`, :mod:`broker.rebalance_locks`; topic and group
  names in :mod:`remoting.codec.topics`.
- :mod:`broker.context`: the :class:`~broker.context.BrokerContext` every processor is built with.
- Services: :mod:`broker.registration` (name servers); the hold service lives in :mod:`processors.hold`.
- Assembly: :mod:`broker.controller` (one nursery tree), :mod:`broker.cli` (``mqbroker``), :mod:`broker.embedded`
  (name server + broker in one process), :mod:`broker.broker_config` (RocketMQ property names).

Nothing is imported here, so ``processors`` can import :mod:`broker.context` without a cycle through the controller.
"""
