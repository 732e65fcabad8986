"""The broker assembly: its state, its background services, the controller that wires them to the processors, and
the binaries. Above :mod:`processors` (which see this package only through :mod:`processors.context`'s protocols).

- State (:mod:`broker.context`'s ``BrokerState`` holds it): :mod:`broker.topic_config_manager`,
  :mod:`broker.subscription_group_manager`, :mod:`broker.consumer_offset_manager` (each persisted through
  :mod:`broker.persistence`), :mod:`broker.client_registry`, :mod:`broker.rebalance_locks`, :mod:`broker.stats`.
- Services: :mod:`broker.registration` (name servers), :mod:`broker.schedule` (delay levels), :mod:`broker.timer`
  (timer messages), :mod:`broker.transaction` (check-back); the hold service lives in :mod:`processors.hold`.
- Assembly: :mod:`broker.controller` (one nursery tree, the request-code table), :mod:`broker.cli` (``mqbroker``),
  :mod:`broker.embedded` (name server + broker in one process), :mod:`broker.broker_config` (``BrokerConfig``, with
  RocketMQ's property names) and :mod:`broker.broker_conf_file` (changes written back to ``broker.conf``).
"""
