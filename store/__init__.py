"""The message store: everything rocketrio keeps on disk, in RocketMQ's layout. Knows nothing of sockets or requests;
it stands on :mod:`remoting.codec` for the record format.

- :mod:`store.message_store` (``MessageStore``: append, get, queries, flush, recovery, retention), over
  :mod:`store.commitlog`, :mod:`store.consume_queue`, :mod:`store.index` and :mod:`store.mapped_file`;
- :mod:`store.store_config` (``StoreConfig``, RocketMQ's ``MessageStoreConfig`` names);
- :mod:`store.metadata_files`: the shapes and the atomic persistence of the broker's ``config/*.json`` files and the
  name server's ``kvConfig.json``.
"""
