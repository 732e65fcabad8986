"""The queue a message group lands on: Guava's ``Hashing.consistentHash`` (RocketMQ's proxy picks FIFO queues with it),
checked against Guava's own cross-language golden values."""

from __future__ import annotations

from proxy.producer import consistent_hash


def test_guava_golden_values() -> None:
    golden100 = [0, 55, 62, 8, 45, 59, 86, 97, 82, 59, 73, 37, 17, 56, 86, 21, 90, 37, 38, 83]
    assert [consistent_hash(i, 100) for i in range(20)] == golden100
    assert consistent_hash(10863919174838991, 11) == 6
    assert consistent_hash(2016238256797177309, 11) == 3
    assert consistent_hash(1673758223894951030, 11) == 5
    assert consistent_hash(2, 100001) == 80343


def test_negative_hashes_and_one_bucket() -> None:
    assert consistent_hash(-1, 1) == 0
    assert all(0 <= consistent_hash(h, 8) < 8 for h in range(-5000, 5000, 7))
