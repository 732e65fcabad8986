"""A stored message copied into a new record: retries and dead letters (send-back), and the deliveries of delayed,
timer and transactional messages, all of which re-append a message they read back from the CommitLog.

The copy keeps body, flag, sysFlag, born time and born host, and takes the properties string the caller built (see
:func:`~remoting.codec.message_properties.with_properties`). Sans-IO; errors are ``ValueError`` for a born host that
does not pack.
"""

from __future__ import annotations

import functools

from remoting.codec.message import MessageExt, MessageRecord
from remoting.codec.msgid import pack_socket_address

__all__ = ["raw_properties", "record_from_stored"]


def raw_properties(msg: MessageExt, drop: frozenset[str] = frozenset()) -> str:
    """A decoded message's properties encoded again without ``drop`` (insertion order is the stored order)."""
    return "\x02".join(f"{k}\x01{v}" for k, v in msg.properties.items() if k not in drop)


@functools.lru_cache(maxsize=1024)
def _packed_host(host: str, port: int) -> bytes:
    # Few distinct producers: parsing the address once each keeps redeliveries off ipaddress's parser.
    return pack_socket_address(host, port)


def record_from_stored(
    msg: MessageExt, topic: str, queue_id: int, properties: str, store_host: bytes, reconsume_times: int | None = None
) -> MessageRecord:
    """A stored message rebuilt for a new append under ``topic``/``queue_id`` (schedule and timer deliveries,
    send-back): body, flag, sysFlag and born fields copied. Raises ``ValueError`` for an unpackable born host."""
    return MessageRecord(
        topic=topic,
        body=msg.body,
        queue_id=queue_id,
        flag=msg.flag,
        properties=properties,
        sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp,
        born_host=_packed_host(*msg.born_host),
        store_host=store_host,
        reconsume_times=msg.reconsume_times if reconsume_times is None else reconsume_times,
        prepared_transaction_offset=msg.prepared_transaction_offset,
    )
