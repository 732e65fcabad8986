"""The order a ``java.util.HashMap`` / ``HashSet`` iterates its keys, for answers RocketMQ builds by walking one (the
first refused resource of an ACL check, ``mqadmin``'s listings). Pure functions over ``hashCode()`` values
(:func:`remoting.codec.message_properties.java_hash` for strings).
"""

from __future__ import annotations

from collections.abc import Sequence


def java_hash_map_order(hashes: Sequence[int], capacity: int = 16) -> list[int]:
    """The order a ``java.util.HashMap`` / ``HashSet`` iterates distinct keys put in the order of their
    ``hashCode()``s ``hashes``: by bucket (``(h ^ h >>> 16) & (capacity - 1)``), a bucket's keys in the order put
    (a resize splits buckets keeping that order). The table starts at ``capacity`` (16 by default; a power of two,
    as ``new HashMap<>(4)`` makes 4) and doubles past 3/4 full, or when one bucket reaches 9 keys while it is under
    64 (``treeifyBin`` resizes a small table; java/util/HashMap.java). Returns indexes into ``hashes``."""
    spread = [(h & 0xFFFFFFFF) ^ ((h & 0xFFFFFFFF) >> 16) for h in hashes]
    counts: dict[int, int] = {}
    for i, h in enumerate(spread):
        bucket = h & (capacity - 1)
        counts[bucket] = counts.get(bucket, 0) + 1
        grow = counts[bucket] >= 9 and capacity < 64
        if grow or i + 1 > capacity * 3 // 4:
            capacity *= 2
            if grow and i + 1 > capacity * 3 // 4:
                capacity *= 2
            counts = {}
            for k in spread[: i + 1]:
                counts[k & (capacity - 1)] = counts.get(k & (capacity - 1), 0) + 1
    return sorted(range(len(spread)), key=lambda i: (spread[i] & (capacity - 1), i))
