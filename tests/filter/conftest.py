"""Fixtures for the SQL92 broker tests: the data-path fixtures of ``tests/processors`` with ``enablePropertyFilter``
on (a real broker context over a small store under ``tmp_path``, served by the real dispatcher and hold service)."""

from __future__ import annotations

import pytest
import trio

from broker.context import BrokerState
from processors.hold import HoldService
from tests.processors.conftest import MakeBroker, ServedBroker, make_broker, peer_ctx

__all__ = ["filtering_broker", "make_broker", "peer_ctx", "served_filtering"]


@pytest.fixture
def filtering_broker(make_broker: MakeBroker) -> BrokerState:
    return make_broker(enable_property_filter=True)


@pytest.fixture
async def served_filtering(filtering_broker: BrokerState, nursery: trio.Nursery) -> ServedBroker:
    hold = HoldService()
    served = ServedBroker(filtering_broker, hold)
    await nursery.start(hold.run)
    await nursery.start(served.dispatcher.run)
    return served
