"""What the sans-IO core asks its shell to do (:meth:`dledger.node.RaftNode.drain` returns them in order).

- :class:`Send`: deliver ``request`` to ``peer``; hand whatever comes back to ``RaftNode.handle_response(token, ...)``
  (``None`` when the connection failed; the core times calls out itself after ``rpcTimeoutMs``).
- :class:`Reply`: answer the incoming request that came with ``handle``.
- :class:`AppendDone`: a local append (``ticket`` from ``RaftNode.append``) finished with a DLedger ``code``; 200
  means committed: ``index`` is its last entry and ``positions`` every entry's ``pos``.
- :class:`RoleChanged`: the member changed role (DLedger's role-change handlers run on it).
- :class:`Committed`: the committed index moved forward (the broker dispatches what became visible).
"""

from __future__ import annotations

import attrs

from dledger.codes import Role
from dledger.messages import Request, Response


@attrs.frozen(slots=True)
class Send:
    peer: str
    token: int
    request: Request


@attrs.frozen(slots=True)
class Reply:
    handle: object
    response: Response


@attrs.frozen(slots=True)
class AppendDone:
    ticket: int
    code: int
    index: int = -1
    positions: tuple[int, ...] = ()


@attrs.frozen(slots=True)
class RoleChanged:
    term: int
    role: Role
    leader_id: str | None


@attrs.frozen(slots=True)
class Committed:
    index: int


Effect = Send | Reply | AppendDone | RoleChanged | Committed
