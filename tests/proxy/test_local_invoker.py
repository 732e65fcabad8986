"""The proxy's in-process calls into the broker's processors (proxy/local.py), over a real store."""

from __future__ import annotations

from pathlib import Path

import trio

from processors.end_transaction import EndTransactionProcessor
from processors.send import SendMessageProcessor
from processors.send_back import ConsumerSendMsgBackProcessor
from proxy.local import LocalInvoker
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.headers.send import parse_send_request_header
from store.store_config import FlushDiskType
from tests.processors.conftest import open_broker, send_request

PEER = ("10.9.8.7", 4000)


async def test_an_answer_written_after_the_wait_ended_is_not_kept(tmp_path: Path, nursery: trio.Nursery) -> None:
    """A SYNC_FLUSH send answers once its group commit is on disk; when the proxy stopped waiting before that (its
    timeout), the late answer must be dropped, not kept in the peer's channel for ever (one leaked response per
    late answer)."""
    broker = open_broker(tmp_path, store_overrides={"flush_disk_type": FlushDiskType.SYNC_FLUSH})
    await nursery.start(broker.store.run)
    invoker = LocalInvoker(
        SendMessageProcessor(broker), EndTransactionProcessor(broker), ConsumerSendMsgBackProcessor(broker)
    )
    header = parse_send_request_header(RequestCode.SEND_MESSAGE_V2, send_request().ext_fields)
    answer = await invoker.send(header, b"late", PEER, timeout=0)
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "no answer from the broker in time")
    with trio.fail_after(10):
        while broker.store.commitlog.queue.flushed_offset < broker.store.commitlog.max_offset:
            await trio.sleep(0.01)
        await trio.sleep(0.05)  # the group commit's callbacks run right after its flush
    channel = invoker.channel(PEER)
    assert (channel.answers, channel.events) == ({}, {})
    # A send whose answer comes in time is still answered.
    assert (await invoker.send(header, b"on time", PEER)).code == ResponseCode.SUCCESS
    assert (channel.answers, channel.events) == ({}, {})
