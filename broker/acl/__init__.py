"""RocketMQ ACL 1.0 on the broker (docs/architecture.md#acl-and-tls-at-the-edge): ``plain_acl.yml`` accounts and
permissions (:mod:`~broker.acl.plain_config`, :mod:`~broker.acl.permission`, :mod:`~broker.acl.remote_address`), the
resources each request code needs (:mod:`~broker.acl.resources`), the rules and their edits
(:mod:`~broker.acl.manager`), hot reload (:mod:`~broker.acl.watcher`), the check before the pools
(:mod:`~broker.acl.admission`) and the admin codes 50-54 (:mod:`~broker.acl.processor`).
"""
