"""A pop's offset moves held until their CKs are stored (SYNC_FLUSH: the store waits for puts), as 5.3.3's
PopBufferMergeService keeps them: every CK put's outcome settles its move (handleCkMessagePutResult sets ckStored or
has the CK put again), whatever happens to the pop that wrote it. Real embedded broker and files, virtual time."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from broker.pop import AckOutcome
from remoting.client import RemotingClient
from remoting.codec.codes import ResponseCode
from tests.broker.helpers import put_record
from tests.broker.test_pop_wire import GROUP, messages, pop_request
from tests.conftest import SMALL_STORE
from tests.proxy.test_pop import start_pop
from tests.semantics.helpers import create_topic, use_virtual_store_clock

#: A store that waits for each put's flush; a message body of at most 128 bytes: a CK of one message fits, one of
#: eight does not (MESSAGE_ILLEGAL), so a pop over both queues below stores the first queue's CK, then fails.
SMALL_CKS = {**SMALL_STORE, "flush_disk_type": "SYNC_FLUSH", "max_message_size": 128}


async def test_a_pop_failing_on_its_second_queue_still_settles_the_first_queues_move(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Queue 0's CK is written, queue 1's refused: the pop answers SYSTEM_ERROR. Queue 0's move must still be
    committed once its CK is stored, and so must the moves of later pops of the queue behind it."""
    async with EmbeddedCluster(tmp_path / "c", **SMALL_CKS) as cluster:
        clock = use_virtual_store_clock(cluster)
        await create_topic(cluster, "PopH", queues=2)
        put_record(cluster, "PopH", 0, b"q0-first")
        for i in range(8):
            put_record(cluster, "PopH", 1, f"q1-{i}".encode())
        async with RemotingClient() as client:
            failed = await client.invoke(cluster.broker_addr, pop_request(clock, "PopH"), 10)
            assert failed.code == ResponseCode.SYSTEM_ERROR, (failed.code, failed.remark)
            put_record(cluster, "PopH", 0, b"q0-second")
            again = await client.invoke(cluster.broker_addr, pop_request(clock, "PopH", queueId="0"), 10)
            assert [m.body for m in messages(again)] == [b"q0-second"]
        await trio.sleep(5)
        assert cluster.controller.context.offsets.query(GROUP, "PopH", 0) == 2


async def test_a_pop_whose_ck_wait_is_cancelled_does_not_put_its_ck_twice(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The client goes away while its pop waits for the CK's flush (a gRPC cancel cancels the task): the CK lands all
    the same, so it must not be put again (a second CK would bring the message back after its ACK met the first).
    5.3.3 never treats a wait given up as a failed put (PopBufferMergeService.putCkToStore's future completes
    alone)."""
    async with EmbeddedCluster(tmp_path / "c", **SMALL_CKS) as cluster:
        use_virtual_store_clock(cluster)
        await create_topic(cluster, "PopD")
        put_record(cluster, "PopD", 0, b"once")
        async with trio.open_nursery() as nursery:
            pop, _ = await start_pop(cluster, nursery)
            with pop.writes() as ends:
                [popped] = pop.pop("GD", "PopD", 1, 2_000, None)
            with trio.CancelScope() as scope:
                scope.cancel()
                await pop.landed(ends, "ck")
            await trio.sleep(1.5)  # the held CKs' retry runs every second
            with pop.writes() as ends:
                assert pop.ack("GD", "PopD", popped.handle) is AckOutcome.OK
            await pop.landed(ends, "ack")
            await trio.sleep(30)
            assert pop.pop("GD", "PopD", 32, 30_000, None) == [], "an acknowledged message came back"
            nursery.cancel_scope.cancel()


async def test_a_ck_put_twice_revives_nothing_its_twin_met_an_ack_of(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A CK put again after a put that timed out but landed later (a DLedger entry committed past
    WAIT_QUORUM_ACK_TIMEOUT: 5.3.3's PopBufferMergeService puts it again too) is the same CK twice: the ACK that met
    the first must count for the second, as PopReviveService.consumeReviveMessage merges CKs of one mergeKey."""
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE) as cluster:
        use_virtual_store_clock(cluster)
        await create_topic(cluster, "PopT")
        put_record(cluster, "PopT", 0, b"once")
        async with trio.open_nursery() as nursery:
            pop, _ = await start_pop(cluster, nursery)
            [popped] = pop.pop("GT", "PopT", 1, 2_000, None)
            pop._write_ck("GT", "PopT", [popped.handle])  # the CK put again, as run_held_cks does
            await trio.sleep(1)
            assert pop.ack("GT", "PopT", popped.handle) is AckOutcome.OK
            await trio.sleep(30)
            assert pop.pop("GT", "PopT", 32, 30_000, None) == [], "an acknowledged message came back"
            nursery.cancel_scope.cancel()
