"""The allocation strategies give Java's answers: tables worked out by hand from RocketMQ 4.9.8's
``client/consumer/rebalance/*`` and, for the consistent hash, the MD5 ring of ``ConsistentHashRouter`` (first four
digest bytes as an unsigned number, ``TreeMap`` ceiling lookup; checked against a JVM run of the same computation)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client.consistent_hash import ConsistentHashRouter, md5_hash
from client.consumer.allocate import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    AllocateStrategy,
    allocate_average,
    resolve_strategy,
    sort_like_java,
    strategy_name,
)
from remoting.codec.bodies import MessageQueue


def _queues(*brokers: tuple[str, int], topic: str = "TopicTest") -> list[MessageQueue]:
    return [MessageQueue(topic, name, q) for name, count in brokers for q in range(count)]


def _shares(strategy: AllocateStrategy, mqs: list[MessageQueue], cids: list[str]) -> dict[str, list[str]]:
    """Each member's share as ``broker:queue`` strings, the inputs given unsorted (reversed)."""
    return {c: [f"{mq.broker_name}:{mq.queue_id}" for mq in strategy("g", c, mqs[::-1], cids[::-1])] for c in cids}


def test_every_strategy_has_javas_name() -> None:
    avg = AllocateMessageQueueAveragely()
    assert [
        s.get_name()
        for s in (
            avg,
            AllocateMessageQueueAveragelyByCircle(),
            AllocateMessageQueueByConfig(),
            AllocateMessageQueueByMachineRoom(),
            AllocateMessageQueueConsistentHash(),
            AllocateMachineRoomNearby(avg, _Rooms({}, {})),
        )
    ] == ["AVG", "AVG_BY_CIRCLE", "CONFIG", "MACHINE_ROOM", "CONSISTENT_HASH", "MACHINE_ROOM_NEARBY-AVG"]
    assert strategy_name(allocate_average) == "AVG"
    assert [resolve_strategy(n).get_name() for n in ("AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH")] == [  # type: ignore[attr-defined]
        "AVG",
        "AVG_BY_CIRCLE",
        "CONSISTENT_HASH",
    ]
    with pytest.raises(ValueError, match="unknown allocate strategy"):
        resolve_strategy("MACHINE_ROOM")


def test_queues_and_ids_sort_as_java_compares_them() -> None:
    """``MessageQueue.compareTo`` (topic, broker name, queue id as a number) and ``String.compareTo`` by UTF-16 unit:
    U+1F600 (surrogates D83D DE00) sorts before U+FF01 in Java, after it in Python's code point order."""
    mqs = [MessageQueue("T", "b", 10), MessageQueue("T", "B", 2), MessageQueue("S", "z", 0), MessageQueue("T", "b", 9)]
    sorted_mqs, cids = sort_like_java(mqs, ["\uff01", "\U0001f600", "a"])
    assert [(mq.topic, mq.broker_name, mq.queue_id) for mq in sorted_mqs] == [
        ("S", "z", 0),
        ("T", "B", 2),
        ("T", "b", 9),
        ("T", "b", 10),
    ]
    assert cids == ["a", "\U0001f600", "\uff01"]
    two = _queues(("b", 3))
    assert _shares(AllocateMessageQueueAveragelyByCircle(), two, ["\uff01", "\U0001f600"]) == {
        "\U0001f600": ["b:0", "b:2"],
        "\uff01": ["b:1"],
    }


def test_averagely_with_fewer_queues_than_members_gives_the_last_ones_nothing() -> None:
    assert _shares(AllocateMessageQueueAveragely(), _queues(("b", 2)), ["c1", "c2", "c3"]) == {
        "c1": ["b:0"],
        "c2": ["b:1"],
        "c3": [],
    }


def test_checks_raise_on_empty_inputs_and_give_a_stranger_nothing() -> None:
    mqs = _queues(("b", 2))
    for strategy in (AllocateMessageQueueAveragely(), AllocateMessageQueueConsistentHash()):
        with pytest.raises(ValueError, match="currentCID is empty"):
            strategy("g", "", mqs, ["c1"])
        with pytest.raises(ValueError, match="mqAll is null or mqAll empty"):
            strategy("g", "c1", [], ["c1"])
        with pytest.raises(ValueError, match="cidAll is null or cidAll empty"):
            strategy("g", "c1", mqs, [])
        assert strategy("g", "stranger", mqs, ["c1"]) == []


def test_by_config_returns_the_configured_queues_whatever_the_inputs() -> None:
    mine = [MessageQueue("Other", "x", 7), MessageQueue("TopicTest", "b", 1)]
    strategy = AllocateMessageQueueByConfig(mine)
    assert strategy("g", "anyone", _queues(("b", 4)), ["c1"]) == mine
    assert strategy("g", "", [], []) == mine  # no check, as in Java


def test_by_machine_room_takes_only_the_rooms_brokers_and_deals_the_remainder_like_java() -> None:
    """8 queues in IDC1/IDC2, 3 members: blocks of 8 // 3 = 2, then the remainder's ``premqAll[index + 2 * 3]`` to
    the first two; ``broker-c`` (no ``@``) and IDC3 are no one's."""
    mqs = _queues(("IDC1@broker-a", 4), ("IDC2@broker-b", 4), ("IDC3@broker-d", 2), ("broker-c", 2))
    assert _shares(AllocateMessageQueueByMachineRoom({"IDC1", "IDC2"}), mqs, ["c1", "c2", "c3"]) == {
        "c1": ["IDC1@broker-a:0", "IDC1@broker-a:1", "IDC2@broker-b:2"],
        "c2": ["IDC1@broker-a:2", "IDC1@broker-a:3", "IDC2@broker-b:3"],
        "c3": ["IDC2@broker-b:0", "IDC2@broker-b:1"],
    }
    # Java's split("@") drops trailing empty strings: "IDC1@" is one part, "@x" two (an empty idc), "a@b@c" three.
    odd = _queues(("IDC1@", 1), ("@x", 1), ("IDC1@b@c", 1))
    assert _shares(AllocateMessageQueueByMachineRoom({"IDC1", ""}), odd, ["c1"]) == {"c1": ["@x:0"]}


def test_by_machine_room_without_rooms_configured_fails_so_the_rebalance_keeps_its_queues() -> None:
    """Java's ``consumeridcs`` is null until ``setConsumeridcs``: ``consumeridcs.contains`` then throws for the first
    ``idc@broker`` queue and RebalanceImpl.rebalanceByTopic logs it and keeps the topic's queues; without such a queue
    nothing throws and no queue is the member's. An empty set given is no room: no queue."""
    mqs = _queues(("IDC1@broker-a", 2), ("broker-c", 2))
    with pytest.raises(ValueError, match="consumeridcs"):
        AllocateMessageQueueByMachineRoom()("g", "c1", mqs, ["c1"])
    assert AllocateMessageQueueByMachineRoom()("g", "c1", _queues(("broker-c", 2)), ["c1"]) == []
    assert AllocateMessageQueueByMachineRoom(set())("g", "c1", mqs, ["c1"]) == []


class _Rooms:
    def __init__(self, brokers: dict[str, str], consumers: dict[str, str]) -> None:
        self.brokers, self.consumers = brokers, consumers

    def broker_deploy_in(self, message_queue: MessageQueue) -> str:
        return self.brokers.get(message_queue.broker_name, "")

    def consumer_deploy_in(self, client_id: str) -> str:
        return self.consumers.get(client_id, "")


def test_machine_room_nearby_keeps_queues_in_their_room_and_shares_rooms_without_members() -> None:
    """IDC1's queues split by AVG between its two members; IDC2's member takes IDC2's; IDC3 has no member, so AVG
    splits its queues among all three (sorted ids: IDC1-c1, IDC1-c2, IDC2-c3)."""
    rooms = _Rooms(
        {"broker-a": "IDC1", "broker-b": "IDC2", "broker-c": "IDC3"},
        {"IDC1-c1": "IDC1", "IDC1-c2": "IDC1", "IDC2-c3": "IDC2"},
    )
    mqs = _queues(("broker-a", 4), ("broker-b", 2), ("broker-c", 3))
    strategy = AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), rooms)
    assert _shares(strategy, mqs, ["IDC1-c1", "IDC1-c2", "IDC2-c3"]) == {
        "IDC1-c1": ["broker-a:0", "broker-a:1", "broker-c:0"],
        "IDC1-c2": ["broker-a:2", "broker-a:3", "broker-c:1"],
        "IDC2-c3": ["broker-b:0", "broker-b:1", "broker-c:2"],
    }
    with pytest.raises(ValueError, match="Machine room is null for mq"):
        strategy("g", "IDC1-c1", _queues(("broker-z", 1)), ["IDC1-c1"])
    with pytest.raises(ValueError, match="Machine room is null for consumer id nowhere"):
        strategy("g", "IDC1-c1", mqs, ["IDC1-c1", "nowhere"])


def test_md5_hash_is_javas_first_four_digest_bytes_unsigned() -> None:
    """Values from Java's ``MD5Hash.hash`` (a JVM run): the last is above 2**31, so a signed reading would differ;
    ``ä`` is hashed as its UTF-8 bytes C3 A4."""
    assert md5_hash("MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=0]") == 1987926524
    assert md5_hash("192.168.0.1@100-0") == 1808234675
    assert md5_hash("ä") == 2216277788


def test_consistent_hash_routes_each_queue_as_javas_ring() -> None:
    """Ring of ``<cid>-0`` .. ``<cid>-9`` MD5 points; each queue's ``MessageQueue [...]`` string goes to the first
    point at or after its hash. A third member moves only the queues next to its points (here it takes none)."""
    mqs = _queues(("broker-a", 4), ("broker-b", 4))
    two = {
        "10.0.0.1@7": ["broker-a:0", "broker-a:2", "broker-b:0", "broker-b:1"],
        "10.0.0.2@7": ["broker-a:1", "broker-a:3", "broker-b:2", "broker-b:3"],
    }
    assert _shares(AllocateMessageQueueConsistentHash(), mqs, list(two)) == two
    assert _shares(AllocateMessageQueueConsistentHash(), mqs, ["10.0.0.1@7", "10.0.0.2@7", "10.0.0.3@7"]) == {
        "10.0.0.1@7": [],
        "10.0.0.2@7": ["broker-a:1", "broker-a:3", "broker-b:2"],
        "10.0.0.3@7": ["broker-a:0", "broker-a:2", "broker-b:0", "broker-b:1", "broker-b:3"],
    }
    assert _shares(AllocateMessageQueueConsistentHash(), mqs, ["192.168.0.1@100", "192.168.0.2@200"]) == {
        "192.168.0.1@100": [],
        "192.168.0.2@200": [f"broker-{b}:{q}" for b in "ab" for q in range(4)],
    }


def test_consistent_hash_options_and_collisions() -> None:
    """No virtual node: nobody gets a queue. A hash putting every point at one place: the last node put there (the
    greatest id, sorted) replaces the others, as ``TreeMap.put`` does."""
    mqs = _queues(("b", 3))
    assert _shares(AllocateMessageQueueConsistentHash(0), mqs, ["c1", "c2"]) == {"c1": [], "c2": []}
    with pytest.raises(ValueError, match="illegal virtualNodeCnt"):
        AllocateMessageQueueConsistentHash(-1)
    flat = AllocateMessageQueueConsistentHash(3, lambda key: 1)
    assert _shares(flat, mqs, ["c2", "c1"]) == {"c2": ["b:0", "b:1", "b:2"], "c1": []}
    router = ConsistentHashRouter(["n1"], 2)
    router.add_node("n1", 1)  # numbered after its existing two: n1-2
    router.add_node("n2", 10)
    router.remove_node("n2")
    assert {router.route_node(f"k{i}") for i in range(20)} == {"n1"}
    assert ConsistentHashRouter([], 10).route_node("k") is None


class _CountedPoint(int):
    """A ring point counting the comparisons made between points (sorting and lookups)."""

    compared = 0

    def __lt__(self, other: object) -> bool:
        _CountedPoint.compared += 1
        return int(self) < int(other)  # type: ignore[call-overload]


def test_a_ring_of_many_members_is_built_without_resorting_per_member() -> None:
    """CONSISTENT_HASH builds its ring on every rebalance pass, on the event loop: for 200 members of 10 points each
    it must sort the 2,000 points about once (n log n comparisons), not once per member (which took seconds for a
    group of a thousand). The ring still answers as Java's ``TreeMap`` does."""
    _CountedPoint.compared = 0
    cids = [f"10.0.{i // 256}.{i % 256}@{i}" for i in range(200)]
    router = ConsistentHashRouter(cids, 10, lambda key: _CountedPoint(md5_hash(key)))
    points = 200 * 10
    assert _CountedPoint.compared < 4 * points * points.bit_length()
    plain = ConsistentHashRouter(cids, 10)
    keys = [f"MessageQueue [topic=T, brokerName=b, queueId={q}]" for q in range(64)]
    assert [router.route_node(k) for k in keys] == [plain.route_node(k) for k in keys]


_NAMES = st.text(alphabet=["a", "Z", "@", "-", "\ue000", "\U0001f600", "1"], min_size=1, max_size=4)
_QUEUE_SETS = st.sets(st.builds(MessageQueue, _NAMES, _NAMES, st.integers(0, 40)), min_size=1, max_size=24)
_MEMBERS = st.sets(_NAMES, min_size=1, max_size=7)


@given(_QUEUE_SETS, _MEMBERS, st.randoms(use_true_random=False))
def test_every_member_computes_its_part_of_one_split_whatever_the_order_it_learns_the_inputs_in(
    mq_set: set[MessageQueue], cid_set: set[str], rnd: random.Random
) -> None:
    """What makes RocketMQ's rebalance work without talking: AVG, AVG_BY_CIRCLE and CONSISTENT_HASH give every queue
    to exactly one member whatever order each member got the queues and ids in (RebalanceImpl sorts them first);
    AVG and AVG_BY_CIRCLE shares differ by one queue at most, AVG's being runs of consecutive queues in Java's
    MessageQueue order (cross-checked against a JVM run of 4.9.8's strategies on 12,000 random inputs)."""
    ordered, _ = sort_like_java(mq_set, ())
    for strategy in (
        AllocateMessageQueueAveragely(),
        AllocateMessageQueueAveragelyByCircle(),
        AllocateMessageQueueConsistentHash(),
    ):
        shares: dict[str, list[MessageQueue]] = {}
        for cid in cid_set:
            mqs, cids = list(mq_set), list(cid_set)
            rnd.shuffle(mqs)
            rnd.shuffle(cids)
            shares[cid] = strategy("g", cid, mqs, cids)
        taken = [mq for share in shares.values() for mq in share]
        assert sorted(taken, key=ordered.index) == ordered, strategy
        if not isinstance(strategy, AllocateMessageQueueConsistentHash):
            sizes = [len(share) for share in shares.values()]
            assert max(sizes) - min(sizes) <= 1, strategy
        if isinstance(strategy, AllocateMessageQueueAveragely):
            for share in filter(None, shares.values()):
                first = ordered.index(share[0])
                assert share == ordered[first : first + len(share)], strategy
