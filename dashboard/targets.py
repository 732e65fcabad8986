"""Which brokers a create-or-update of a topic or a subscription group goes to: the clusters and broker names picked
in the page's dialog (rocketmq-dashboard's ``clusterNameList`` and ``brokerNameList``, joined as its
``AbstractCommonService.changeToBrokerNameSet``), each broker written at its master.

A cluster or broker name the name servers do not know is a :class:`NoSuchCluster` / :class:`NoSuchBroker` (answered
400, nothing written), where rocketmq-dashboard fails with a NullPointerException; a picked broker whose master is
down is a :class:`NoMasterOnline` (answered 502 before anything is written), where rocketmq-dashboard writes to the
slave ``selectBrokerAddr`` gives it, which refuses.
"""

from __future__ import annotations

from collections.abc import Iterable

from client.errors import MQClientError
from remoting.codec.bodies import ClusterInfo


class NoSuchCluster(ValueError):
    """A cluster name the name servers do not know (answered 400 by :mod:`dashboard.api`)."""


class NoSuchBroker(ValueError):
    """A broker name the name servers do not know (answered 400 by :mod:`dashboard.api`)."""


class NoMasterOnline(MQClientError):
    """A picked broker has no master registered (answered 502 by :mod:`dashboard.api`)."""


def picked_brokers(info: ClusterInfo, clusters: Iterable[str], brokers: Iterable[str]) -> list[str]:
    """The broker names of ``clusters`` and ``brokers`` together, sorted, each once; see the module docstring for an
    unknown name."""
    names: set[str] = set()
    for cluster in clusters:
        if cluster not in info.cluster_addr_table:
            raise NoSuchCluster(f"no cluster {cluster!r}: make sure the cluster name exists")
        names.update(info.cluster_addr_table[cluster])
    for broker in brokers:
        if broker not in info.broker_addr_table:
            raise NoSuchBroker(f"no broker {broker!r}: make sure the broker name exists")
        names.add(broker)
    return sorted(names)


def master_addrs(info: ClusterInfo, names: Iterable[str]) -> dict[str, str]:
    """Broker name -> master address for each of ``names``; :class:`NoMasterOnline` for one without a master."""
    addrs = {}
    for name in names:
        data = info.broker_addr_table.get(name)
        addr = data.master_addr if data is not None else None
        if not addr:
            raise NoMasterOnline(f"broker {name} has no master online: nothing was changed")
        addrs[name] = addr
    return addrs


def cluster_of(info: ClusterInfo) -> dict[str, str]:
    """Broker name -> the cluster it belongs to."""
    return {name: cluster for cluster, names in info.cluster_addr_table.items() for name in names}
