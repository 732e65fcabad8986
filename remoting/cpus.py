"""How many CPUs this process may use: Java's ``Runtime.availableProcessors()``, which RocketMQ sizes its broker
pools (``BrokerConfig``) and client threads (``clientCallbackExecutorThreads``) by, and which ``make run`` starts one
broker per (:func:`broker.embedded.default_brokers`).

:func:`available_cpus` counts the CPUs of the process's affinity mask (``taskset -c 0,1``, a container's
``--cpuset-cpus``), as the JVM does on Linux, not the host's (``os.cpu_count()``, used only where the mask cannot be
read). Ours leaves out the JVM's other bound, a cgroup CPU quota (``docker --cpus``).
"""

from __future__ import annotations

import os


def available_cpus() -> int:
    """The CPUs this process may run on (see the module docstring); at least 1."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity masks on this system
        return os.cpu_count() or 1
