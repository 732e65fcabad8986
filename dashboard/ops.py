"""The Ops page's data and actions, as rocketmq-dashboard's ``OpsController`` and ``OpsServiceImpl``: the name servers
the dashboard knows (``rocketmq.config.namesrvAddrs`` and the one in use), switching the one in use at run time,
adding one to the list, and TLS and the VIP channel on or off for the connections.

:class:`AdminSwitch` owns the admin client every endpoint and the chart sampler use. A change builds a new admin
client with the new settings, puts it in place for the next request (``app.state.admin``) and the sampler, then
closes the old one, as rocketmq-dashboard clears its pool of ``MQAdminExt``: a call still running on the old client
fails with its error. Nothing is written to a file: a restart starts from the settings again, as
rocketmq-dashboard. A malformed address is a :class:`BadAddress` (answered 400) and changes nothing; an address that
is well formed but serves nothing is taken, as rocketmq-dashboard takes it, and the pages then show the error of
every call.

The VIP channel switch (``updateIsVIPChannel.do``) changes the admin client's ``vip_channel_enabled`` (and so that of
the producers the Topic page sends test messages with), as rocketmq-dashboard's sets its ``isVIPChannel`` and clears
its pool (``OpsServiceImpl.updateIsVIPChannel``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import attrs
from anyio.abc import TaskGroup, TaskStatus

from client.admin import Admin
from client.config import ClientConfig
from remoting.client import parse_address
from remoting.errors import RemotingError


class BadAddress(ValueError):
    """A name server address that is not ``host:port[;host:port...]`` (answered 400)."""


def check_namesrv(entry: str) -> str:
    """``entry`` (``host:port``, or several joined by ``;``) stripped; :class:`BadAddress` when malformed."""
    entry = entry.strip()
    parts = [p.strip() for p in entry.split(";") if p.strip()]
    if not parts:
        raise BadAddress("the name server address is empty")
    for part in parts:
        try:
            parse_address(part)
        except RemotingError:
            raise BadAddress(f"bad name server address {part!r}, expected host:port") from None
    return ";".join(parts)


@attrs.define
class AdminSwitch:
    """See the module docstring. ``known``: the name server entries offered; ``on_change`` is called with each new
    admin client once it is in place. Start it with ``await task_group.start(switch.run)``."""

    config: ClientConfig
    known: list[str]
    on_change: Callable[[Admin], None] = lambda admin: None
    admin: Admin | None = None
    _tg: TaskGroup | None = None
    _scope: anyio.CancelScope | None = None
    _lock: anyio.Lock = attrs.field(factory=anyio.Lock)
    _built: int = 0

    @property
    def current(self) -> str:
        return ";".join(self.config.namesrv_addr)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Hold the admin clients until cancelled; started once the first one is open."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            await self._replace(self.config)
            task_status.started()
            await anyio.sleep_forever()

    async def _serve(self, config: ClientConfig, *, task_status: TaskStatus[tuple[Admin, anyio.CancelScope]]) -> None:
        with anyio.CancelScope() as scope:
            async with Admin(config=config) as admin:
                task_status.started((admin, scope))
                await anyio.sleep_forever()

    async def _replace(self, config: ClientConfig) -> None:
        async with self._lock:
            assert self._tg is not None, "AdminSwitch.run is not running"
            # the new client opens beside the old one, whose instance id it must not share
            self._built += 1
            name = config.instance_name if self._built == 1 else f"{config.instance_name}-{self._built}"
            opened = attrs.evolve(config, instance_name=name)
            admin, scope = await self._tg.start(self._serve, opened)
            old, self._scope = self._scope, scope
            self.admin, self.config = admin, config
            self.on_change(admin)
            if old is not None:
                old.cancel()

    def home(self) -> dict[str, Any]:
        """rocketmq-dashboard's ``homePage.query``: the one in use, the list (the one in use first when the list
        lacks it), the VIP channel and TLS."""
        known = self.known if self.current in self.known else [self.current, *self.known]
        home = {"currentNamesrv": self.current, "namesvrAddrList": known}
        return {**home, "useVIPChannel": self.config.vip_channel_enabled, "useTLS": self.config.tls}

    async def use_namesrv(self, entry: str) -> str:
        """Read and change the cluster through ``entry`` from the next request on (``updateNameSvrAddr.do``); it
        joins the list when it is not there."""
        entry = check_namesrv(entry)
        await self._replace(attrs.evolve(self.config, namesrv_addr=entry))
        self.add_namesrv(entry)
        return entry

    def add_namesrv(self, entry: str) -> str:
        """Offer ``entry`` on the list without using it (``addNameSvrAddr.do``); nothing when it is there."""
        entry = check_namesrv(entry)
        if entry not in self.known:
            self.known.append(entry)
        return entry

    async def use_tls(self, on: bool) -> None:
        """Connect with TLS, or not, from the next request on (``updateUseTLS.do``)."""
        await self._replace(attrs.evolve(self.config, tls=on))

    async def use_vip_channel(self, on: bool) -> None:
        """Use the brokers' VIP port, or not, from the next request on (``updateIsVIPChannel.do``)."""
        await self._replace(attrs.evolve(self.config, vip_channel_enabled=on))
