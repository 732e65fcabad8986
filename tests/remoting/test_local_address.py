"""remoting/local_address.py: the address a server advertises by default, chosen as RocketMQ 4.9.8's
RemotingUtil.getLocalAddress chooses it (remoting/src/main/java/org/apache/rocketmq/remoting/common/RemotingUtil.java).
The interfaces are faked: the choice is a pure function of them."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from remoting import local_address as module
from remoting.local_address import advertised_host, local_address


@pytest.fixture(autouse=True)
def _uncached() -> Iterator[None]:
    local_address.cache_clear()
    yield
    local_address.cache_clear()


def _interfaces(monkeypatch: pytest.MonkeyPatch, addresses: list[str]) -> None:
    monkeypatch.setattr(module, "interface_ipv4_addresses", lambda: addresses)


def test_the_first_address_outside_loopback_and_192_168_is_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    _interfaces(monkeypatch, ["127.0.0.1", "192.168.1.5", "10.0.0.7", "172.16.0.2"])
    assert local_address() == "10.0.0.7"


def test_with_only_192_168_addresses_the_last_one_is_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    _interfaces(monkeypatch, ["127.0.0.1", "192.168.1.5", "192.168.2.9"])
    assert local_address() == "192.168.2.9"


def test_with_only_loopback_the_host_names_address_is_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Java's InetAddress.getLocalHost(); 127.0.0.1 when even the host name does not resolve."""
    _interfaces(monkeypatch, ["127.0.0.1"])
    monkeypatch.setattr(socket, "gethostbyname", lambda name: "127.0.1.1")
    assert local_address() == "127.0.1.1"
    local_address.cache_clear()

    def unresolved(name: str) -> str:
        raise socket.gaierror("no such host")

    monkeypatch.setattr(socket, "gethostbyname", unresolved)
    assert local_address() == "127.0.0.1"


def test_a_listen_host_naming_one_interface_is_advertised_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    _interfaces(monkeypatch, ["10.0.0.7"])
    assert advertised_host("127.0.0.1") == "127.0.0.1"
    assert advertised_host("0.0.0.0") == advertised_host("::") == "10.0.0.7"
