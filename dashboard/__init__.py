"""``mqdashboard``: a web dashboard for a rocketrio (or RocketMQ 4.x) cluster, an ASGI app on Trio served by Hypercorn.

It reaches the cluster only through the admin client (:mod:`client.admin`, the calls ``mqadmin`` makes). Modules:
:mod:`dashboard.app` (the app and its lifespan), :mod:`dashboard.api` (the JSON endpoints), one module per page's data
(:mod:`~dashboard.cluster`, :mod:`~dashboard.topics`, :mod:`~dashboard.groups`, :mod:`~dashboard.messages`,
:mod:`~dashboard.trace`, :mod:`~dashboard.sampler`), :mod:`dashboard.targets` (the brokers a create-or-update goes
to), :mod:`dashboard.auth` (login), :mod:`dashboard.settings` and :mod:`dashboard.cli` (the command).
"""
