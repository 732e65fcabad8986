"""``DLedgerServer``: the Trio shell around the sans-IO :class:`~dledger.node.RaftNode` (docs/architecture.md#dledger).

It owns the member's :class:`~dledger.file_store.FileLedger` and ``currterm`` file, a listener on the port of its own
entry of ``peers``, on every interface (DLedger's RPC port, separate from the broker's), a remoting client to the
other members, and these tasks in one nursery (``await nursery.start(server.run)``):

- one timer task per component of the current role, restarted on every role change in the role's own nursery: the
  elector always, the dispatchers and the ack checker on a leader, the entry handler on a follower. Each sleeps until
  its component's next deadline or until an input moves that deadline earlier (most appends and answers move none,
  so they wake no timer), then ticks the node. Time is ``trio.current_time()`` in ms, so every timer runs under a
  virtual clock in tests;
- a timer for the node's outstanding calls (it times them out);
- the flush task: every ``flushFileInterval`` (or at once when an answer waits for it), ``fdatasync`` in a worker
  thread, then the node hears the new flushed index; and the ``checkpoint`` every ``checkPointInterval``. A sync or
  a checkpoint that fails (OSError) is logged and tried again (a sync 200 ms later), the flushed index unmoved;
- the push task: an append only queues its entry and an answer to a call only queues up; this task hands the node
  everything queued one scheduler pass later (:meth:`~dledger.node.RaftNode.handle_responses`, then one work loop),
  so the appends and answers of a pass cost one work loop and one round of effects: the entries appended meanwhile
  leave as one push per entry and follower (DLedger's default), or in one batch push with ``enableBatchPush``; the
  pass's frames to each follower leave in one write (``Connection.hold``).

When the connection the followed leader calls on closes and a new connection to its DLedger port is refused (its
process is gone), the node campaigns at once (:meth:`~dledger.node.RaftNode.leader_unreachable`) instead of after
the heartbeat leak; a paused or partitioned leader refuses nothing: the core's own METADATA call to a leader whose
heartbeat is overdue finds it (:class:`~dledger.leader_probe.LeaderProbe`).

Requests arrive through :class:`DLedgerProcessor` on a one-worker pool (so in order) and answers leave when the node
produces them (DLedger's request codes, JSON bodies, remoting code 200, the result in the body's ``code``). A PUSH is
taken in the connection's reader instead (:meth:`DLedgerServer.fast_push`) whenever the pool is idle, so the order
holds, queued in the node and applied by the push task's next pass with the others read meanwhile, and answered
with a frame written from a template. A body that does not parse is answered 411 UNEXPECTED_ARGUMENT. PULL (51003)
is registered but answered remoting SYSTEM_ERROR, as DLedger's: its ``DLedgerServer.handlePull`` returns null and the
remoting layer answers the NullPointerException that follows. Calls to peers go out as frames encoded here, each its
own invocation (:class:`_Answer`) whose answer is decoded straight from the frame (the general ``invoke_callback``
when requests are signed or the connection is not open yet); a failed connection or a timeout hands ``None`` to the
node with the push task's next pass, as an answer would be.

The broker's side: :meth:`DLedgerServer.append` (synchronous; the callback gets the
:class:`~dledger.effects.AppendDone`), ``role_listeners`` and ``commit_listeners`` (called on the Trio thread, must
not block), ``effects_scope`` (wraps each round of effects), :meth:`DLedgerServer.status`. Cancelling ``run``
flushes, writes the checkpoint and closes the files (a flush or write that fails then is logged). No OSError from the
member's files ends its tasks: the node's file writes answer or step down on it (:mod:`dledger.handler`,
:meth:`~dledger.node.RaftNode.role_changed`, :mod:`dledger.elector`).
"""

from __future__ import annotations

import logging
import random
import struct
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Final

import trio

from dledger.codes import RequestCode, ResponseCode, Role
from dledger.config import DLedgerConfig
from dledger.effects import AppendDone, Committed, Effect, Reply, RoleChanged, Send
from dledger.entry import Entry
from dledger.file_store import FileLedger, FileTermStore
from dledger.handoff import run_in_thread
from dledger.ledger import Bodies
from dledger.messages import (
    BY_CODE,
    CODE_OF,
    HeartBeatRequest,
    MessageError,
    PushEntryRequest,
    Response,
    decode,
    decode_push,
    encode,
)
from dledger.node import NEVER, RaftNode
from remoting.client import RemotingClient, parse_address
from remoting.codec.codes import ResponseCode as RemotingCode
from remoting.codec.command import RemotingCommand, next_opaque, request
from remoting.codec.frame import encode_json_request
from remoting.codec.serializers import encode_json
from remoting.connection import Address, Connection
from remoting.dispatch import Dispatcher, ProcessorPool
from remoting.errors import RemotingConnectError, RemotingError
from remoting.processor import RequestContext
from remoting.server import RemotingServer, ServerConfig
from store.failure_streak import FailureStreak

log = logging.getLogger(__name__)

AppendCallback = Callable[[AppendDone], None]
#: the node's deadline functions per role (its timer tasks)
_ROLE_TIMERS: dict[Role, tuple[str, ...]] = {
    Role.LEADER: ("elector", "dispatchers", "quorum"),
    Role.FOLLOWER: ("elector", "handler"),
    Role.CANDIDATE: ("elector",),
}


#: the connection attribute naming the member that sent heartbeats or pushes on it
_PEER = "dledger.peer"
#: how long each probe of a leader whose connection closed may take to connect, and the pause before each
PROBE_TIMEOUT_S = 1.0
PROBE_DELAYS_S = (0.0, 0.1, 0.4)
#: the pause after a flush that failed (DLedger's ``FlushDataService`` sleeps 200 ms after an error)
FLUSH_RETRY_S = 0.2


def now_ms() -> int:
    return int(trio.current_time() * 1000)


class _Answer:
    """The invocation of one request to a peer (:meth:`DLedgerServer._send`): the answer's body is taken straight from
    its frame (:meth:`complete_json`: no command object), or from the command, and handed to the server once; an error
    or a timeout hands None."""

    __slots__ = ("_response_type", "_send", "_server", "deadline", "done")

    def __init__(self, server: DLedgerServer, send: Send, response_type: type[Response]) -> None:
        self.deadline = 0.0
        self.done = False
        self._server, self._send, self._response_type = server, send, response_type

    def complete_json(self, fields: dict[str, Any], body: bytes) -> bool:
        self._finish(body)
        return True

    def complete(self, response: RemotingCommand | None = None, error: RemotingError | None = None) -> None:
        self._finish(None if response is None else response.body)

    def outcome(self, outcome: RemotingCommand | RemotingError) -> None:
        """The callback of the general path (signed requests, a connection not yet open)."""
        self._finish(outcome.body if isinstance(outcome, RemotingCommand) else None)

    def _finish(self, body: bytes | memoryview | None) -> None:
        """Once; called by the connection's reader, sweeper or close, so nothing may escape (as CallbackFuture)."""
        if not self.done:
            self.done = True
            try:
                self._server._answered(self._send, self._response_type, body)
            except Exception:
                log.exception("dledger answer to %r not taken", self._send)


class DLedgerServer:
    def __init__(self, config: DLedgerConfig, *, rng: random.Random | None = None) -> None:
        self.config = config
        #: peer id -> DLedger address (``config.peer_map`` parses the peers string on every call)
        self._addresses = config.peer_map
        self.ledger = FileLedger(config)
        self.terms = FileTermStore(config.default_path)
        self.rng = rng or random.Random()
        self._node: RaftNode | None = None
        self.role_listeners: list[Callable[[RoleChanged], None]] = []
        self.commit_listeners: list[Callable[[int], None]] = []
        #: wraps each round of effects (the store: its group commit's release pass, so answers leave together)
        self.effects_scope: Callable[[], AbstractContextManager[object]] = nullcontext
        self._appends: dict[int, AppendCallback] = {}
        self._sleepers: set[_Sleeper] = set()
        self._flush_now = trio.Event()
        self._push_soon = trio.Event()
        #: answers to this member's calls, handled together by the push task (``(token, response)``)
        self._responses: list[tuple[int, Response | None]] = []
        self._role_scope: trio.CancelScope | None = None
        self._nursery: trio.Nursery | None = None
        self._client: RemotingClient | None = None
        self.address: Address | None = None
        self.loaded = False
        self._role: Role | None = None
        self._flush_streak = FailureStreak()  # whether the last flush failed (logged once until one succeeds)

    @property
    def node(self) -> RaftNode:
        if self._node is None:
            raise RuntimeError("the DLedger server is not running")
        return self._node

    def load(self) -> None:
        """Recover the ledger's files (blocking; :meth:`run` does it unless done before)."""
        self.ledger.load()
        self.loaded = True

    @property
    def running(self) -> bool:
        return self._node is not None

    # ---- the broker's API --------------------------------------------------------------------------------------

    def append(self, bodies: Bodies, callback: AppendCallback) -> tuple[int, list[Entry]]:
        """Append one entry per ``(size, fill)``, or what a :data:`~dledger.ledger.LeaderWrite` appends, as leader:
        ``(200, entries)`` and ``callback`` later with the outcome, or ``(code, [])`` at once when refused (404 not
        leader, 506 transferring, 503 pending full...)."""
        node = self.node
        code, ticket, entries = node.append(now_ms(), bodies)
        if code == ResponseCode.SUCCESS:
            self._appends[ticket] = callback
        if node.push_wanted:
            self._push_soon.set()
        if node.has_effects or node.flush_wanted or not node.defer_push:
            # A deferred append leaves the work to the push task: it makes no effect and moves no timer's
            # deadline earlier (the new wait for acknowledgements times out after those already waiting).
            self._carry_out()
        return code, entries

    def status(self) -> dict[str, Any]:
        return self.node.status() if self._node is not None else {"selfId": self.config.self_id, "role": "STOPPED"}

    # ---- running -----------------------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[Address] = trio.TASK_STATUS_IGNORED) -> None:
        """Load the files, listen on this member's peer port on every interface, run until cancelled; reports the
        bound address."""
        if not self.loaded:
            await trio.to_thread.run_sync(self.load)
        # Only the port of this member's peers entry: DLedgerRpcNettyService sets it as NettyServerConfig's listen
        # port and NettyRemotingServer binds it on every interface (dledger/src/main/java/io/openmessaging/storage/
        # dledger/DLedgerRpcNettyService.java), so an entry naming an address of no local interface (NAT, a
        # published port) still starts.
        _, port = parse_address(self.config.peer_map[self.config.self_id])
        try:
            self._node = RaftNode(self.config, self.ledger, self.terms, rng=self.rng, now=now_ms())
            # Appends and answers are taken in by the push task, once a scheduler pass: one work loop and one round
            # of effects for all of them. With or without enableBatchPush; without, each entry is still its own push.
            self._node.defer_push = True
            pool = ProcessorPool("dledger", 1, 100_000)
            dispatcher = Dispatcher()
            dispatcher.register([*BY_CODE, RequestCode.PULL], DLedgerProcessor(self), pool)
            dispatcher.register_fast(RequestCode.PUSH, self.fast_push)
            server = RemotingServer(dispatcher, ServerConfig(idle_timeout=120.0))
            server.add_close_listener(self._on_closed)
            async with RemotingClient() as client, trio.open_nursery() as nursery:
                self._client, self._nursery = client, nursery
                self.address = await nursery.start(server.serve, None, port)
                nursery.start_soon(self._timer, self._calls_deadline)
                nursery.start_soon(self._flusher)
                nursery.start_soon(self._checkpointer)
                nursery.start_soon(self._pusher)
                self._restart_role_timers()
                self._carry_out()
                task_status.started(self.address)
        finally:
            self._node = None
            self._responses.clear()  # a later run's node numbers its calls afresh: no stale answer may reach it
            self._fail_appends()
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self._close)

    def _close(self) -> None:
        """Flush, write the checkpoint and close the files (blocking); a flush or write that fails is logged, and the
        files are closed all the same."""
        ledger = self.ledger
        for step in (ledger.flush_all, ledger.persist_checkpoint):
            try:
                step()
            except OSError as exc:
                log.error("dledger %s: %s failed at shutdown: %s", self.config.self_id, step.__name__, exc)
        ledger.close()

    def _fail_appends(self) -> None:
        appends, self._appends = self._appends, {}
        for ticket, callback in appends.items():
            callback(AppendDone(ticket, ResponseCode.TERM_CHANGED))

    # ---- timers ------------------------------------------------------------------------------------------------

    def _restart_role_timers(self) -> None:
        if self._role_scope is not None:
            self._role_scope.cancel()
        nursery, node = self._nursery, self._node
        if nursery is None or node is None:
            return
        scope = self._role_scope = trio.CancelScope()
        nursery.start_soon(self._role_tasks, scope, _ROLE_TIMERS.get(node.member.role, ("elector",)))

    async def _role_tasks(self, scope: trio.CancelScope, parts: tuple[str, ...]) -> None:
        with scope:
            async with trio.open_nursery() as role:
                for part in parts:
                    role.start_soon(self._timer, self._deadline_of(part))

    def _deadline_of(self, part: str) -> Callable[[], int]:
        node = self.node
        if part == "elector":
            return node.elector.next_deadline
        if part == "quorum":
            return node.quorum.next_deadline
        if part == "handler":
            return node.handler.next_deadline
        return lambda: min((d.next_deadline() for d in node.dispatchers.values()), default=NEVER)

    def _calls_deadline(self) -> int:
        return self.node.calls_deadline()

    async def _timer(self, deadline: Callable[[], int]) -> None:
        sleeper = _Sleeper(deadline)
        try:
            while True:
                when = deadline()
                if when > now_ms():
                    # Sleep until the deadline or until an input moves it earlier (_carry_out wakes only then).
                    sleeper.until, sleeper.event = when, trio.Event()
                    self._sleepers.add(sleeper)
                    try:
                        if when >= NEVER:
                            await sleeper.event.wait()
                        else:
                            with trio.move_on_at((when + 0.5) / 1000):  # half a ms past, so now_ms() is not one short
                                await sleeper.event.wait()
                    finally:
                        self._sleepers.discard(sleeper)
                    if deadline() > now_ms():
                        continue
                self.node.tick(now_ms())
                self._carry_out()
                await trio.sleep(0)
        finally:
            self._sleepers.discard(sleeper)

    async def _flusher(self) -> None:
        """Flush every ``flushFileInterval``, or at once when asked; after a flush that failed, :data:`FLUSH_RETRY_S`
        later (DLedger's ``FlushDataService`` sleeps 200 ms after an error)."""
        interval = self.config.flush_file_interval / 1000
        while True:
            with trio.move_on_after(interval):
                await self._flush_now.wait()
            self._flush_now = trio.Event()
            if not await self._flush():
                await trio.sleep(FLUSH_RETRY_S)

    async def _flush(self) -> bool:
        """``fdatasync`` what the ledger plans in a worker thread, then tell the node the new flushed index. A sync
        that fails (OSError: EIO, ENOSPC) is logged, once until one succeeds again, and returns False: the flushed
        index stays where it was, so nothing waiting for it is released."""
        plan = self.ledger.flush_plan()
        try:
            if plan[1] or plan[2]:
                await run_in_thread(self.ledger.flush_planned, plan)
        except OSError as exc:
            if self._flush_streak.failed():
                log.error("dledger %s: flush failed, trying again every %.1f s: %s", self.config.self_id,
                          FLUSH_RETRY_S, exc)  # fmt: skip
            return False
        if self._flush_streak.succeeded():
            log.info("dledger %s: flush succeeded again", self.config.self_id)
        self.ledger.flushed(plan)
        if self._node is not None and self._node.on_flushed(now_ms()):
            self._carry_out()
        return True

    async def _pusher(self) -> None:
        """Appends only queue entries and answers only queue up; this hands the node what queued up meanwhile (one
        pass after the first, once the tasks already runnable, e.g. other sends and the readers of the other
        followers' answers, have added theirs): the answers, then one work loop that pushes every queued entry (in
        batches with ``enableBatchPush``)."""
        while True:
            await self._push_soon.wait()
            self._push_soon = trio.Event()
            await trio.sleep(0)
            node, client = self._node, self._client
            if node is not None and client is not None:
                responses, self._responses = self._responses, []
                if responses:
                    node.handle_responses(now_ms(), responses)
                else:
                    node.tick(now_ms())
                # The pass's pushes to each follower leave in one write per connection.
                held = [c for c in client.connections.values() if not c.closed]
                for connection in held:
                    connection.hold()
                try:
                    self._carry_out()
                finally:
                    for connection in held:
                        _release(connection)

    async def _checkpointer(self) -> None:
        """Write the ``checkpoint`` every ``checkPointInterval``; one that cannot be written (OSError) is logged and
        written at the next interval (recovery clamps a stale committed index to the log)."""
        while True:
            await trio.sleep(self.config.check_point_interval / 1000)
            try:
                await trio.to_thread.run_sync(self.ledger.persist_checkpoint)
            except OSError as exc:
                log.error("dledger %s: checkpoint not written: %s", self.config.self_id, exc)

    # ---- effects -----------------------------------------------------------------------------------------------

    def _carry_out(self) -> None:
        """Do what the node asked for, then wake the timers (their deadlines may have moved)."""
        node = self._node
        if node is None:
            return
        role_changed = False
        effects = node.drain()
        if effects:
            with self.effects_scope():
                for effect in effects:
                    role_changed |= self._effect(effect)
        if node.flush_wanted:
            self._flush_now.set()
        if node.push_wanted:
            self._push_soon.set()
        if role_changed:
            self._restart_role_timers()
        self._wake_timers()

    def _wake_timers(self) -> None:
        """Wake the sleeping timers whose deadline moved before the time they sleep until (most inputs move none:
        waking every timer on every append and answer cost a scheduler pass each)."""
        for sleeper in self._sleepers:
            if sleeper.deadline() < sleeper.until:
                sleeper.event.set()

    def _effect(self, effect: Effect) -> bool:
        if isinstance(effect, Send):
            self._send(effect)
        elif isinstance(effect, Reply):
            _reply(effect)
        elif isinstance(effect, AppendDone):
            callback = self._appends.pop(effect.ticket, None)
            if callback is not None:
                callback(effect)
        elif isinstance(effect, Committed):
            for listener in self.commit_listeners:
                listener(effect.index)
        elif isinstance(effect, RoleChanged):
            # DLedger reports a candidate that hears of a higher term again and again; restarting the role's tasks
            # each time starved the elector under a vote storm (1.4 s of them in a real-process run).
            changed, self._role = effect.role is not self._role, effect.role
            log.log(logging.INFO if changed else logging.DEBUG, "dledger %s is %s of term %d (leader %s)",
                    self.config.self_id, effect.role.name, effect.term, effect.leader_id)  # fmt: skip
            for role_listener in self.role_listeners:
                role_listener(effect)
            return changed
        return False

    def _send(self, send: Send) -> None:
        client = self._client
        if client is None:
            return
        code = CODE_OF[type(send.request)]
        answer = _Answer(self, send, BY_CODE[code][1])
        body, timeout = encode(send.request), self.config.rpc_timeout_ms / 1000
        address = self._addresses[send.peer]
        if client.writes_plain_json:
            opaque = next_opaque()
            frame = encode_json_request(code, opaque, {}, body)
            if client.invoke_frame_future(address, opaque, frame, answer, timeout):
                return
        client.invoke_callback(address, request(code, body=body), timeout, answer.outcome, plain=True)

    def _answered(self, send: Send, response_type: type[Response], body: bytes | memoryview | None) -> None:
        """The answer to ``send`` (its JSON body; None for an error or a timeout), for the push task's next pass."""
        if self._node is None:
            return
        response: Response | None = None
        if body is not None:
            try:
                response = decode(response_type, body)
            except MessageError as exc:
                log.warning("dledger %s: bad %s answer from %s: %s", self.config.self_id,
                            CODE_OF[type(send.request)].name, send.peer, exc)  # fmt: skip
        self._responses.append((send.token, response))
        self._push_soon.set()

    def fast_push(self, ctx: RequestContext, fields: dict[str, Any], body: bytes) -> bool:
        """A PUSH taken in the connection's reader (no command object, no pool hop; the dispatcher offers it only
        when the in-order pool is idle, so the order of requests holds); the answer leaves as a frame built from
        :data:`_ANSWER_HEAD`. Anything unusual (no opaque, a body that does not parse) goes the general way."""
        node, opaque = self._node, fields.get("opaque")
        if node is None or type(opaque) is not int or not -(1 << 31) <= opaque < 1 << 31:
            return False
        try:
            message = decode_push(body)
        except MessageError:
            return False
        connection = ctx.connection
        if message.local_id:
            connection.attributes[_PEER] = message.local_id  # the leader calling on this connection (as handle())
        # Applied and answered by the push task's next pass, with the other pushes read meanwhile (one work loop).
        node.handle_request(now_ms(), message, (connection, opaque), defer=True)
        if node.has_effects:
            self._carry_out()
        else:
            self._push_soon.set()
        return True

    def handle(self, connection: Connection, cmd: RemotingCommand) -> None:
        """A request from a peer or a DLedger client (the processor's half)."""
        node = self._node
        if node is None:
            return
        request_type, response_type = BY_CODE[cmd.code]
        try:
            message = decode(request_type, cmd.body)
        except MessageError as exc:
            _reply(Reply((connection, cmd), response_type(code=ResponseCode.UNEXPECTED_ARGUMENT)))
            log.warning("dledger %s: bad request %d: %s", self.config.self_id, cmd.code, exc)
            return
        if isinstance(message, HeartBeatRequest | PushEntryRequest) and message.local_id:
            connection.attributes[_PEER] = message.local_id  # the leader calling on this connection
        node.handle_request(now_ms(), message, (connection, cmd))
        self._carry_out()

    # ---- a leader that is gone ---------------------------------------------------------------------------------

    def _on_closed(self, connection: Connection) -> None:
        """A connection closed: when it was the followed leader's, check whether its process is gone."""
        peer = connection.attributes.get(_PEER)
        node, nursery = self._node, self._nursery
        if peer is None or node is None or nursery is None:
            return
        if node.member.is_follower and node.member.leader_id == peer:
            nursery.start_soon(self._probe_leader, peer)

    async def _probe_leader(self, peer: str) -> None:
        """Connect to the leader's DLedger port a few times: refused means nothing listens there any more (the process
        died; a paused or partitioned one does not refuse), so the node campaigns without waiting for the heartbeat
        leak. A dying process closes its connections before its listener (one descriptor at a time), so a connect
        that succeeds right after the close proves nothing: it is tried again. Connected every time, or timed out:
        the heartbeats decide."""
        host, port = parse_address(self.config.peer_map[peer])
        for delay in PROBE_DELAYS_S:
            await trio.sleep(delay)
            node = self._node
            if node is None or not node.member.is_follower or node.member.leader_id != peer:
                return
            with trio.move_on_after(PROBE_TIMEOUT_S):
                try:
                    stream = await trio.open_tcp_stream(host, port)
                except OSError:
                    log.info("dledger %s: leader %s refuses connections, electing now", self.config.self_id, peer)
                    node.leader_unreachable(now_ms(), peer)
                    self._carry_out()
                    return
                await stream.aclose()


class _Sleeper:
    """A timer task waiting: its deadline function, the deadline it sleeps until and the event that wakes it."""

    __slots__ = ("deadline", "event", "until")

    def __init__(self, deadline: Callable[[], int]) -> None:
        self.deadline = deadline
        self.until = NEVER
        self.event = trio.Event()


#: The header of an answer (remoting code 200, flagged response), as ``encode_command`` writes it, with the opaque
#: left as ``%d``: answers to requests taken by :meth:`DLedgerServer.fast_push` are framed from it.
_ANSWER_HEAD: Final = encode_json(request(0, opaque=0).response(ResponseCode.SUCCESS)).replace(
    b'"opaque":0,', b'"opaque":%d,'
)
_LENGTHS: Final = struct.Struct(">ii")


def answer_frame(opaque: int, body: bytes) -> bytes:
    """The frame of an answer with ``body`` to the request ``opaque`` (the bytes ``encode_command`` makes)."""
    head = _ANSWER_HEAD % opaque
    return _LENGTHS.pack(4 + len(head) + len(body), len(head)) + head + body


def _release(connection: Connection) -> None:
    try:
        connection.release_held()
    except RemotingConnectError:
        log.debug("dledger pushes to %r dropped: connection closed", connection)


def _reply(reply: Reply) -> None:
    handle: tuple[Connection, RemotingCommand | int] = reply.handle  # type: ignore[assignment]
    connection, cmd = handle
    try:
        if type(cmd) is int:
            connection.send_frame_nowait(answer_frame(cmd, encode(reply.response)))
        else:
            assert isinstance(cmd, RemotingCommand)
            connection.send_nowait(cmd.response(ResponseCode.SUCCESS, body=encode(reply.response)))
    except RemotingConnectError:
        log.debug("dledger answer to %r dropped: connection closed", cmd)


#: The remark of every PULL's answer. DLedger 0.3.2 registers PULL but its ``handlePull`` returns null, so
#: ``DLedgerRpcNettyService.processRequest`` throws a NullPointerException and ``NettyRemotingAbstract`` answers
#: SYSTEM_ERROR with the exception's name (the remark there also names the line that threw).
PULL_REMARK: Final = "java.lang.NullPointerException: DLedger serves no PULL"


class DLedgerProcessor:
    """Hands DLedger requests to the server; the answer leaves when the node produces it."""

    def __init__(self, server: DLedgerServer) -> None:
        self.server = server

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.is_oneway:
            return None
        if request.code == RequestCode.PULL:
            return request.response(RemotingCode.SYSTEM_ERROR, remark=PULL_REMARK)
        self.server.handle(ctx.connection, request)
        return None
