"""The proxy's in-process calls into the broker's processors (proxy/local.py), over a real store."""

from __future__ import annotations

from pathlib import Path

import trio

from processors.end_transaction import EndTransactionProcessor
from processors.send import SendMessageProcessor
from processors.send_back import ConsumerSendMsgBackProcessor
from proxy.local import LocalInvoker
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.headers.send import parse_send_request_header
from remoting.codec.headers.transaction import TRANSACTION_COMMIT_TYPE, EndTransactionRequestHeader
from remoting.codec.msgid import decode_offset_msg_id
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


async def test_a_call_cancelled_while_its_processor_waits_leaves_nothing_behind(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """A local call's wait is registered before its processor runs; a caller cancelled while the processor awaits
    (an END_TRANSACTION commit waiting for its SYNC_FLUSH group commit, the gRPC call's deadline passed) must end
    that wait too, or every such call leaves its entry in the peer's channel for ever."""
    broker = open_broker(tmp_path, store_overrides={"flush_disk_type": FlushDiskType.SYNC_FLUSH})
    await nursery.start(broker.store.run)
    invoker = LocalInvoker(
        SendMessageProcessor(broker), EndTransactionProcessor(broker), ConsumerSendMsgBackProcessor(broker)
    )
    half = send_request(properties="TRAN_MSG\x01true\x02PGROUP\x01PG", sysFlag="4")
    sent = await invoker.send(parse_send_request_header(RequestCode.SEND_MESSAGE_V2, half.ext_fields), b"h", PEER)
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    fields = sent.ext_fields or {}
    header = EndTransactionRequestHeader(
        producer_group="PG",
        tran_state_table_offset=int(fields["queueOffset"]),
        commit_log_offset=decode_offset_msg_id(fields["msgId"]).phy_offset,
        commit_or_rollback=TRANSACTION_COMMIT_TYPE,
        msg_id=fields["msgId"],
    )
    with trio.CancelScope() as scope:
        scope.cancel()
        await invoker.invoke(request(RequestCode.END_TRANSACTION, header.to_ext_fields()), PEER)
    assert scope.cancelled_caught  # the processor was waiting for the flush when the call was cancelled
    channel = invoker.channel(PEER)
    assert (channel.answers, channel.events) == ({}, {})
