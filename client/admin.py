"""The admin client (Java's ``DefaultMQAdminExt``, the part tests and tools need first): topics and routes.

Usage::

    async with Admin(namesrv_addr="127.0.0.1:9876") as admin:
        await admin.create_topic("TopicTest", read_queue_nums=4, write_queue_nums=4)   # on every master
        route = await admin.topic_route("TopicTest")
        await admin.delete_topic("TopicTest")

It owns a private :class:`~client.instance.MQClientInstance` (no producer or consumer registered, so it sends no
heartbeats). Broker refusals raise :class:`~client.errors.MQBrokerError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Self

from client.config import ClientConfig
from client.errors import MQBrokerError
from client.instance import MQClientInstance
from remoting.codec.bodies import PERM_READ, PERM_WRITE, ClusterInfo, TopicList, TopicRouteData
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.headers import (
    CreateTopicRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader,
)


class Admin:
    """See the module docstring."""

    def __init__(
        self, namesrv_addr: str | Sequence[str] = "127.0.0.1:9876", *, config: ClientConfig | None = None
    ) -> None:
        self.instance = MQClientInstance(config or ClientConfig(namesrv_addr=namesrv_addr))  # type: ignore[arg-type]

    async def __aenter__(self) -> Self:
        await self.instance.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.instance.__aexit__(exc_type, exc, tb)

    @property
    def _timeout(self) -> float:
        return self.instance.config.rpc_timeout

    async def _namesrv_call(self, code: int, fields: dict[str, str] | None = None) -> bytes:
        last: Exception | None = None
        for addr in self.instance.config.namesrv_addr:
            try:
                response = await self.instance.remoting.invoke(addr, request(code, fields), self._timeout)
            except Exception as exc:
                last = exc
                continue
            if response.code != ResponseCode.SUCCESS:
                raise MQBrokerError(response.code, response.remark, addr)
            return bytes(response.body)
        raise MQBrokerError(ResponseCode.SYSTEM_ERROR, f"no name server answered: {last}")

    async def cluster_info(self) -> ClusterInfo:
        return ClusterInfo.decode(await self._namesrv_call(RequestCode.GET_BROKER_CLUSTER_INFO))

    async def topic_list(self) -> list[str]:
        return TopicList.decode(await self._namesrv_call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).topic_list

    async def topic_route(self, topic: str) -> TopicRouteData:
        return await self.instance.fetch_route(topic)

    async def master_addresses(self, cluster: str | None = None) -> list[str]:
        """Master addresses of ``cluster`` (default: every cluster)."""
        info = await self.cluster_info()
        names = (
            {n for members in info.cluster_addr_table.values() for n in members}
            if cluster is None
            else set(info.cluster_addr_table.get(cluster, []))
        )
        return sorted(bd.master_addr for name, bd in info.broker_addr_table.items() if name in names and bd.master_addr)

    async def create_topic(
        self,
        topic: str,
        *,
        read_queue_nums: int = 4,
        write_queue_nums: int = 4,
        perm: int = PERM_READ | PERM_WRITE,
        order: bool = False,
        broker_addr: str | None = None,
        cluster: str | None = None,
    ) -> None:
        """UPDATE_AND_CREATE_TOPIC on ``broker_addr``, or on every master of ``cluster`` (default: all masters)."""
        header = CreateTopicRequestHeader(
            topic=topic,
            default_topic="TBW102",
            read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums,
            perm=perm,
            topic_filter_type="SINGLE_TAG",
            order=order,
        )
        targets = [broker_addr] if broker_addr else await self.master_addresses(cluster)
        for addr in targets:
            response = await self.instance.remoting.invoke(
                addr, request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields()), self._timeout
            )
            if response.code != ResponseCode.SUCCESS:
                raise MQBrokerError(response.code, response.remark, addr)

    async def delete_topic(self, topic: str, *, cluster: str | None = None) -> None:
        """Delete ``topic`` on every master of ``cluster`` and then on the name servers."""
        for addr in await self.master_addresses(cluster):
            cmd = request(RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(topic=topic).to_ext_fields())
            response = await self.instance.remoting.invoke(addr, cmd, self._timeout)
            if response.code != ResponseCode.SUCCESS:
                raise MQBrokerError(response.code, response.remark, addr)
        await self._namesrv_call(
            RequestCode.DELETE_TOPIC_IN_NAMESRV, DeleteTopicFromNamesrvRequestHeader(topic=topic).to_ext_fields()
        )
        self.instance.routes.pop(topic, None)
