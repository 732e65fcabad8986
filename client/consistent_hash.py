"""A consistent hash ring (Java's ``common/consistenthash/ConsistentHashRouter``): physical nodes are placed on the
ring as ``vnode_count`` virtual nodes keyed ``"<key>-<replica>"``, and a key is routed to the first virtual node at or
after its hash, wrapping round to the first.

The default hash is :func:`md5_hash`, Java's ``ConsistentHashRouter.MD5Hash``, so a ring built here from the same keys
in the same order routes every key to the same node as Java's (a later virtual node with the same hash replaces an
earlier one there too).
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Iterable

HashFunction = Callable[[str], int]


def md5_hash(key: str) -> int:
    """The first four bytes of the MD5 of ``key``'s UTF-8 bytes as an unsigned big-endian number (0 to 2**32 - 1),
    which is what Java's ``MD5Hash`` builds in its ``long``: each byte is masked with 0xFF before it is shifted in.
    Java's ``String.getBytes()`` uses the platform charset: UTF-8 on JDK 18+ and on UTF-8 locales, which this assumes
    (ids and queue strings are ASCII in practice); unencodable characters (lone surrogates) become ``?`` as there."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8", "replace")).digest()[:4], "big")


class ConsistentHashRouter:
    """A ring of node keys (strings). Owns nothing else; ``vnode_count`` below 0 raises :class:`ValueError`."""

    def __init__(self, nodes: Iterable[str], vnode_count: int, hash_function: HashFunction = md5_hash) -> None:
        self._hash = hash_function
        self._ring: dict[int, str] = {}
        #: How many points of the ring each node owns now, as getExistingReplicas of common/src/main/java/org/apache/
        #: rocketmq/common/consistenthash/ConsistentHashRouter.java counts them in the ring: kept as points are put or
        #: replaced, so adding a node does not walk the whole ring.
        self._owned: dict[str, int] = {}
        #: The ring's points in order, or None until the next lookup sorts them: a ring built of many nodes (on
        #: every rebalance pass of CONSISTENT_HASH) is sorted once, not once per node.
        self._points: list[int] | None = []
        for node in nodes:
            self.add_node(node, vnode_count)

    def add_node(self, node: str, vnode_count: int) -> None:
        """Add ``vnode_count`` more virtual nodes of ``node``, numbered after the ones it already has."""
        if vnode_count < 0:
            raise ValueError(f"illegal virtual node counts :{vnode_count}")
        existing = self._owned.get(node, 0)
        for i in range(vnode_count):
            point = self._hash(f"{node}-{i + existing}")
            # TreeMap.put: a point already on the ring changes owner.
            if (previous := self._ring.get(point)) is not None:
                self._owned[previous] -= 1
            self._ring[point] = node
            self._owned[node] = self._owned.get(node, 0) + 1
        if vnode_count:
            self._points = None

    def remove_node(self, node: str) -> None:
        """Drop every virtual node of ``node``."""
        self._ring = {point: owner for point, owner in self._ring.items() if owner != node}
        self._owned.pop(node, None)
        self._points = None

    def route_node(self, key: str) -> str | None:
        """The node owning ``key``: the first virtual node at or after its hash, or the ring's first; ``None`` when the
        ring is empty."""
        if not self._ring:
            return None
        if self._points is None:
            self._points = sorted(self._ring)
        i = bisect.bisect_left(self._points, self._hash(key))
        return self._ring[self._points[i if i < len(self._points) else 0]]
