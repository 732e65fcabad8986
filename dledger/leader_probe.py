"""Ours: a follower asks the leader it follows, whose heartbeat is overdue, whether it lives (no DLedger counterpart).

:class:`LeaderProbe` belongs to the follower's :class:`~dledger.elector.Elector`, which ticks it and drops its call on
every role change. It owns the call in flight and when the last one left: after :func:`probe_after_ms` without a
heartbeat it sends the leader DLedger's METADATA request (every DLedger member answers it), at most once an interval.
No answer within :func:`probe_wait_ms`, a failed connection or an answer naming no leader: it hands the call to the
elector's ``give_up`` callback, which decides whether the member campaigns. Any other answer shows the leader alive
and changes nothing. An answer taken in at the deadline still counts, whether the tick at that instant came first or
not (a shell hands a scheduler pass's answers over together); the timeout decides only after it, and a later answer
is ignored.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from dledger.codes import ResponseCode
from dledger.messages import MetadataRequest, MetadataResponse

if TYPE_CHECKING:
    from dledger.node import RaftNode


@attrs.define
class Probe:
    """One METADATA call to ``leader`` of ``term``, sent at ``sent``; no answer by ``deadline`` (inclusive) means
    silent."""

    leader: str
    term: int
    sent: int
    deadline: int


def probe_after_ms(interval: int) -> int:
    """How long a follower waits for a heartbeat before it asks its leader: the interval and a quarter, so a heartbeat
    that left late on a loaded leader or waited in a queue does not start one."""
    return interval + interval // 4


def probe_wait_ms(interval: int) -> int:
    """How long the leader has to answer: half an interval, hundreds of times a loaded member's round trip, while the
    follower still gives up before the heartbeat leak; a later answer changes nothing."""
    return interval // 2


class LeaderProbe:
    def __init__(self, node: RaftNode, give_up: Callable[[Probe, str], None]) -> None:
        self.node = node
        self._give_up = give_up
        #: the call in flight, if any
        self.pending: Probe | None = None
        #: when the last call left (the next leaves an interval later at the earliest)
        self.last_sent = -(1 << 62)

    def cancel(self) -> None:
        """Forget the call in flight (the member follows anew or left the follower role); its answer is ignored."""
        self.pending = None

    def next_deadline(self, last_heartbeat: int) -> int:
        """When :meth:`tick` next has something to do, the leader's last heartbeat having come at ``last_heartbeat``."""
        if self.pending is not None:
            return self.pending.deadline + 1
        interval = self.node.config.heart_beat_time_interval_ms
        return max(last_heartbeat + probe_after_ms(interval) + 1, self.last_sent + interval)

    def tick(self, now: int, last_heartbeat: int) -> None:
        """A follower's tick: ask the leader once its heartbeat is overdue; give up when the wait passed unanswered."""
        probe = self.pending
        if probe is not None:
            if now > probe.deadline:
                self.pending = None
                self._give_up(probe, f"gave no answer within {probe.deadline - probe.sent} ms")
            return
        node = self.node
        member = node.member
        leader = member.leader_id
        if leader is None or now < self.next_deadline(last_heartbeat):
            return
        wait = probe_wait_ms(node.config.heart_beat_time_interval_ms)
        probe = self.pending = Probe(leader, member.curr_term, now, now + wait)
        self.last_sent = now
        request = MetadataRequest(group=member.group, remote_id=leader, local_id=member.self_id)
        node.call(leader, request, functools.partial(self._answer, probe))

    def _answer(self, probe: Probe, response: object) -> None:
        """The leader's answer, or None (its connection failed). Taken up to the deadline; the member gives up
        on a failed connection or an answer naming no leader (it leads no more). An answer naming itself or another
        leader (whose heartbeats will come) or refusing the request shows it alive: the heartbeats decide."""
        if probe is not self.pending or self.node.now > probe.deadline:
            return
        self.pending = None
        if not isinstance(response, MetadataResponse) or response.code == ResponseCode.NETWORK_ERROR:
            self._give_up(probe, "cannot be reached")
        elif response.code == ResponseCode.SUCCESS and response.leader_id is None:
            self._give_up(probe, "leads no more")
