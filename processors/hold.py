"""``HoldService``: long polling for PULL_MESSAGE (Java's ``PullRequestHoldService``,
docs/protocol.md#711-long-polling).

A pull that found nothing (PULL_NOT_FOUND) with the SUSPEND flag on its first execution is parked here under
``topic@queueId`` instead of being answered. It leaves the table exactly once, when

- a message arrives in its queue beyond its offset and passes its filters (the tags code for TAG subscriptions, the
  properties for SQL92 ones):
  :meth:`HoldService.notify_message_arriving` is the store's arrival listener, a synchronous callback on the append
  path, so it only moves the request to the wake channel. One arrival evaluates SQL92 filters worth at most
  ``evaluation_budget`` (:data:`ARRIVAL_EVALUATION_BUDGET`, in :attr:`HeldPull.filter_cost` units) and wakes the pulls
  past it unchecked: a spurious wake-up is safe (the re-run reads the message with its own budget, and the client
  pulls again), as after the periodic check below;
- its hold time (the request's ``suspendTimeoutMillis``) passes: one timer task sleeps until the earliest deadline;
- when ``max_offset_of`` is given, every ``check_interval`` (5 s) seconds its queue's max offset has moved past its
  offset, as Java's periodic check does: this catches messages that arrived without the listener (replicas) and
  lets a pull whose queue only got non-matching messages move past them.

Woken requests are re-run once through their ``rerun`` callable (the pull processor with suspension and offset commit
off) by a few worker tasks, and the answer is written on the request's connection. A parked request holds no pool
worker and no task, so it never blocks other requests on its connection. A connection closed meanwhile makes the
request vanish quietly; a failing re-run is answered SYSTEM_ERROR and logged. Every ``check_interval`` seconds while
pulls are parked, those whose connection closed are dropped (ours: Java's ``PullRequestHoldService`` keeps them until
their timeout, which the client chooses, so a client parking pulls for a day and leaving kept them that long).

Run it with ``await nursery.start(hold.run)``; requests parked before it runs wait for it. Cancellation drops every
parked request unanswered (the broker is shutting down; clients time out and retry).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
from collections.abc import Callable
from typing import Final

import attrs
import trio

from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.errors import RemotingConnectError
from remoting.processor import RequestContext

__all__ = ["HeldPull", "HoldService", "PropertyFilter", "Rerun", "TagFilter"]

log = logging.getLogger(__name__)

#: ``tags_code -> matches``; ``None`` on a held pull means every message matches.
TagFilter = Callable[[int], bool]
#: ``raw properties string -> matches`` (an SQL92 subscription); ``None`` on a held pull means every message matches.
PropertyFilter = Callable[[str], bool]
#: Re-runs a held pull without suspending or committing; returns the response (``None``: nothing to send).
Rerun = Callable[[RequestContext, RemotingCommand], RemotingCommand | None]

#: Java's periodic re-check of every held queue (used only when ``max_offset_of`` is given).
CHECK_INTERVAL: Final = 5.0
#: Ours: what one arrival may spend evaluating parked pulls' SQL92 filters, in :attr:`HeldPull.filter_cost` units (the
#: pull path's ``processors.pull.SQL92_EVALUATION_BUDGET``: at most about 15 ms). RocketMQ's
#: PullRequestHoldService.notifyMessageArriving (broker/src/main/java/org/apache/rocketmq/broker/longpolling/
#: PullRequestHoldService.java) checks every held pull's filter on the store's reput thread; ours runs inside the
#: append, on the loop every client shares, where 40 pulls parked on a 2,000-term filter cost each message 40
#: evaluations.
ARRIVAL_EVALUATION_BUDGET: Final = 800 * 64
#: Worker tasks answering woken pulls; more than one so a slow client's full send buffer delays nobody else.
DEFAULT_WORKERS: Final = 4


@attrs.define(eq=False, slots=True)
class HeldPull:
    """One parked pull. ``offset`` is the logical offset it waits beyond; ``deadline`` is in ``trio.current_time``."""

    ctx: RequestContext
    request: RemotingCommand
    topic: str
    queue_id: int
    offset: int
    deadline: float
    rerun: Rerun
    tag_filter: TagFilter | None = None
    property_filter: PropertyFilter | None = None
    #: What one evaluation of ``property_filter`` costs (an SQL92 filter's :attr:`~processors.filter.Sql92Filter.cost`;
    #: ``None``: 1).
    filter_cost: int | None = None
    held_at: float = 0.0
    done: bool = False


class HoldService:
    """Parks pulls and answers them on arrival or timeout. See the module docstring for the contract."""

    def __init__(
        self,
        *,
        workers: int = DEFAULT_WORKERS,
        check_interval: float = CHECK_INTERVAL,
        max_offset_of: Callable[[str, int], int] | None = None,
        evaluation_budget: int = ARRIVAL_EVALUATION_BUDGET,
    ) -> None:
        if workers < 1:
            raise ValueError(f"the hold service needs at least one worker, got {workers}")
        self._workers = workers
        self._check_interval = check_interval
        self._max_offset_of = max_offset_of
        self.evaluation_budget = evaluation_budget
        self._held: dict[tuple[str, int], list[HeldPull]] = {}
        self._deadlines: list[tuple[float, int, HeldPull]] = []
        #: Entries of ``_deadlines`` whose pull was woken before its deadline (see :meth:`_drop_stale`).
        self._stale = 0
        self._sequence = itertools.count()
        self._wake_send, self._wake_receive = trio.open_memory_channel[HeldPull](math.inf)
        self._timer_wakeup: trio.Event | None = None
        #: Set by :meth:`hold` so the sweep of closed connections' pulls sleeps only while some are parked.
        self._parked = trio.Event()
        self._timer_at = math.inf
        #: Re-runs done so far, by cause (for tests and runtime info).
        self.woken_by_arrival = 0
        self.woken_by_timeout = 0

    @property
    def held_count(self) -> int:
        """Pulls parked now."""
        return sum(len(requests) for requests in self._held.values())

    # ---- parking (pull processor) ---------------------------------------------------------------------------

    def hold(self, held: HeldPull) -> None:
        """Park ``held`` until a matching arrival or its deadline. Synchronous: the caller must not have awaited
        between its store lookup and this call, or an arrival in between would be missed until the deadline."""
        held.held_at = trio.current_time()
        self._held.setdefault((held.topic, held.queue_id), []).append(held)
        heapq.heappush(self._deadlines, (held.deadline, next(self._sequence), held))
        self._parked.set()
        if held.deadline < self._timer_at and self._timer_wakeup is not None:
            self._timer_at = held.deadline
            self._timer_wakeup.set()

    # ---- waking ---------------------------------------------------------------------------------------------

    def waiting(self, topic: str, queue_id: int) -> bool:
        """Whether a pull is held on the queue (the store's arrival interest: a slave notifies only such queues)."""
        return (topic, queue_id) in self._held

    def notify_message_arriving(
        self, topic: str, queue_id: int, logical_offset: int, tags_code: int, properties: str = ""
    ) -> None:
        """The store's arrival listener: wake pulls of this queue waiting below ``logical_offset + 1`` whose filters
        pass ``tags_code`` and ``properties``, checking SQL92 filters within :attr:`evaluation_budget` and waking the
        pulls past it unchecked. Synchronous and never raises; it only schedules the re-runs."""
        waiting = self._held.get((topic, queue_id))
        if not waiting:
            return
        max_offset = logical_offset + 1
        left = self.evaluation_budget
        still: list[HeldPull] = []
        for held in waiting:
            if max_offset <= held.offset or (held.tag_filter is not None and not held.tag_filter(tags_code)):
                still.append(held)
                continue
            if held.property_filter is not None:
                cost = held.filter_cost or 1
                if cost <= left:  # else past the budget: woken unchecked
                    left -= cost
                    if not held.property_filter(properties):
                        still.append(held)
                        continue
            self.woken_by_arrival += 1
            self._wake_early(held)
        if still:
            self._held[(topic, queue_id)] = still
        else:
            del self._held[(topic, queue_id)]

    def _wake(self, held: HeldPull) -> None:
        held.done = True
        self._wake_send.send_nowait(held)

    def _wake_early(self, held: HeldPull) -> None:
        """Wake ``held`` before its deadline: its timer entry stays behind in the heap."""
        self._wake(held)
        self._stale += 1
        self._drop_stale()

    def _drop_stale(self) -> None:
        """Rebuild the timer heap without the woken pulls once they are most of it. Left there until their own
        deadline, they would keep every woken pull (its request, header and connection) for its whole hold time: the
        memory held would follow the pull rate (pulls a second x 15 s) rather than the pulls parked."""
        deadlines = self._deadlines
        if self._stale > 64 and 2 * self._stale > len(deadlines):
            deadlines[:] = [entry for entry in deadlines if not entry[2].done]
            heapq.heapify(deadlines)
            self._stale = 0

    def _unpark(self, held: HeldPull) -> None:
        key = (held.topic, held.queue_id)
        waiting = self._held.get(key)
        if waiting is None:
            return
        try:
            waiting.remove(held)
        except ValueError:
            return
        if not waiting:
            del self._held[key]

    # ---- service --------------------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Timer, optional periodic check and answering workers, until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._expire)
            nursery.start_soon(self._drop_closed_periodically, self._check_interval)
            if self._max_offset_of is not None:
                nursery.start_soon(self._check_periodically, self._check_interval, self._max_offset_of)
            for _ in range(self._workers):
                nursery.start_soon(self._answer_woken)
            task_status.started()

    async def _expire(self) -> None:
        deadlines = self._deadlines
        while True:
            now = trio.current_time()
            while deadlines and deadlines[0][0] <= now:
                held = heapq.heappop(deadlines)[2]
                if held.done:
                    self._stale -= 1
                else:
                    self._unpark(held)
                    self.woken_by_timeout += 1
                    self._wake(held)
            while deadlines and deadlines[0][2].done:  # woken by arrival: drop the stale timer entry
                heapq.heappop(deadlines)
                self._stale -= 1
            self._timer_at = deadlines[0][0] if deadlines else math.inf
            wakeup = self._timer_wakeup = trio.Event()
            with trio.move_on_at(self._timer_at):
                await wakeup.wait()

    async def _drop_closed_periodically(self, interval: float) -> None:
        """Drop the parked pulls whose connection closed (nobody to answer), every ``interval`` seconds while any is
        parked: they kept their request and connection, and their queue counted as waited on, until the deadline
        their client chose (as broker/src/main/java/org/apache/rocketmq/broker/longpolling/PullRequestHoldService.java
        keeps them; ours drops them, since nobody can be answered)."""
        while True:
            await self._parked.wait()
            await trio.sleep(interval)
            for waiting in list(self._held.values()):
                for held in [h for h in waiting if h.ctx.connection.closed and not h.done]:
                    self._unpark(held)
                    held.done = True  # its timer entry is stale now
                    self._stale += 1
            self._drop_stale()
            if not self._held:
                self._parked = trio.Event()

    async def _check_periodically(self, interval: float, max_offset_of: Callable[[str, int], int]) -> None:
        while True:
            await trio.sleep(interval)
            for (topic, queue_id), waiting in list(self._held.items()):
                newest = max_offset_of(topic, queue_id)
                for held in list(waiting):
                    if newest > held.offset and not held.done:
                        self._unpark(held)
                        self.woken_by_arrival += 1
                        self._wake_early(held)

    async def _answer_woken(self) -> None:
        async for held in self._wake_receive:
            connection = held.ctx.connection
            if connection.closed:
                continue
            try:
                response = held.rerun(held.ctx, held.request)
            except Exception as exc:
                log.warning("re-running held pull (opaque %d) failed", held.request.opaque, exc_info=True)
                # Pull clients read the four offset fields on every answer, errors included.
                fields = {
                    "suggestWhichBrokerId": "0",
                    "nextBeginOffset": str(held.offset),
                    "minOffset": "0",
                    "maxOffset": "0",
                }
                response = held.request.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}", fields)
            if response is None or held.request.is_oneway:
                continue
            try:
                # Never waits for a peer that does not read (as the pool workers, remoting/processor.py): four
                # workers waiting on one such peer's backlog answered nobody else. The answer counts in that
                # connection's budget, which stops its reader instead.
                connection.send_nowait(response)
            except RemotingConnectError:
                log.debug("held pull answer dropped: %r closed", connection)
