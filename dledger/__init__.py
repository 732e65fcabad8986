"""DLedger: a Raft-replicated CommitLog, as RocketMQ 4.9.8 runs it with openmessaging/dledger 0.3.1.2.

A separate package beside the store, as RocketMQ keeps DLedger in a separate library (docs/architecture.md#dledger):

- the sans-IO Raft core: :mod:`dledger.node` over :mod:`dledger.member`, :mod:`dledger.elector`,
  :mod:`dledger.dispatcher`, :mod:`dledger.quorum`, :mod:`dledger.handler` and a :mod:`dledger.ledger`;
- its wire: :mod:`dledger.codes`, :mod:`dledger.messages` (JSON bodies) and its disk: :mod:`dledger.entry`;
- the deterministic simulator that checks it: :mod:`dledger.simulation`, :mod:`dledger.invariants`.
"""
