"""A SEND_MESSAGE_V2 (310) request's parsed JSON header checked and read in one call, for the broker's send fast path
(processors/send_fast.py).

:func:`send_v2_fields` ``(fields, allowed)`` takes the header as ``orjson.loads`` gives it and ``allowed`` (the
``extFields`` keys the fast path knows: the V2 letters ``a``-``n`` of Java's ``SendMessageRequestHeaderV2`` and ACL
1.0's fields) and returns ``(opaque, topic, properties, queue_id, sys_flag, flag, born_timestamp, reconsume_times)``
when the header is the common case, else None. The common case, as Java and our producers write it:

- ``code`` equal to 310, ``opaque`` and ``version`` ints in int32, ``flag`` the int 0 (a request);
- ``extFields`` a dict with no key outside ``allowed``; ``a`` (producer group), ``b`` (topic) and ``c`` (default topic)
  strings; ``g`` (born timestamp) 1-18 ASCII digits; ``e`` (queue id), ``f`` (sys flag), ``h`` (flag) and ``d``
  (default topic queue count) 1-9 ASCII digits; ``j`` (reconsume times) and ``l`` (max reconsume times) absent, empty
  or such digits; ``k`` (unit mode) absent, empty, ``true`` or ``false``; ``m`` (batch) absent, empty or ``false``;
  ``i`` (properties) and ``n`` (broker name) absent or strings.

Anything else (a null, a number where a string goes, ``+1``, a batch) is None: the general path then decodes the
request and answers it as RocketMQ does. Never raises for any JSON value.

It runs in C (``remoting.codec._speedups``) when the extension is built; otherwise, or with
``ROCKETRIO_PURE_PYTHON=1``, in the Python below. Both return equal values for every input
(tests/codec/test_send_header.py).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any, Final

from remoting.codec.codes import RequestCode
from remoting.codec.native import native_module

__all__ = ["NATIVE", "SendV2Fields", "send_v2_fields"]

#: ``(opaque, topic, properties, queue_id, sys_flag, flag, born_timestamp, reconsume_times)``
SendV2Fields = tuple[int, str, str | None, int, int, int, int, int]

_SEND_V2: Final = int(RequestCode.SEND_MESSAGE_V2)
_INT32: Final = range(-(1 << 31), 1 << 31)


def _digits(raw: object) -> int | None:
    """``raw`` as an int when it is a string of 1-9 ASCII digits, else None."""
    if type(raw) is str and raw and len(raw) < 10 and raw.isdigit() and raw.isascii():
        return int(raw)
    return None


def _optional(raw: object) -> bool:
    """An optional number the general parser would accept: absent, empty, or digits."""
    return raw is None or raw == "" or _digits(raw) is not None


def _flag(raw: object) -> bool | None:
    """An optional boolean as clients write it (absent, empty, ``true``, ``false``); None for anything else."""
    if raw is None or raw == "" or raw == "false":
        return False
    return True if raw == "true" else None


def _py_send_v2_fields(fields: dict[str, Any], allowed: AbstractSet[str]) -> SendV2Fields | None:
    opaque, version, flag = fields.get("opaque"), fields.get("version"), fields.get("flag")
    if fields.get("code") != _SEND_V2 or type(opaque) is not int or opaque not in _INT32:
        return None
    if type(version) is not int or version not in _INT32 or type(flag) is not int or flag:
        return None
    ext = fields.get("extFields")
    if type(ext) is not dict or not ext.keys() <= allowed:
        return None
    get = ext.get
    topic, born, properties = get("b"), get("g"), get("i")
    if type(get("a")) is not str or type(topic) is not str or type(get("c")) is not str:
        return None
    if type(born) is not str or not born or len(born) > 18 or not (born.isdigit() and born.isascii()):
        return None
    queue_id, sys_flag, message_flag = _digits(get("e")), _digits(get("f")), _digits(get("h"))
    if queue_id is None or sys_flag is None or message_flag is None or _digits(get("d")) is None:
        return None
    reconsume = get("j")
    if not _optional(reconsume) or not _optional(get("l")) or _flag(get("k")) is None or _flag(get("m")) is not False:
        return None
    bname = get("n")
    if (properties is not None and type(properties) is not str) or (bname is not None and type(bname) is not str):
        return None
    reconsume_times = int(reconsume) if reconsume else 0
    return opaque, topic, properties, queue_id, sys_flag, message_flag, int(born), reconsume_times


_speedups: Final = native_module()
_native: Final[Callable[[dict[str, Any], AbstractSet[str]], SendV2Fields | None] | None] = getattr(
    _speedups, "send_v2_fields", None
)
#: Whether the C function is in use.
NATIVE: Final = _native is not None
#: See the module docstring.
send_v2_fields: Final = _native if _native is not None else _py_send_v2_fields
