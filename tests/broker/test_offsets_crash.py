"""Consumer offsets across a SIGKILL of a real broker process: what the periodic flush (``flushConsumerOffsetInterval``)
saved comes back, and a ``consumerOffset.json`` torn afterwards is read from its ``.bak``, never an empty table
(broker/src/main/java/org/apache/rocketmq/broker/offset/ConsumerOffsetManager.java persisted by BrokerController's
scheduled task; common/src/main/java/org/apache/rocketmq/common/ConfigManager.java ``load``/``loadBak``)."""

from __future__ import annotations

from pathlib import Path

import trio

from client import Admin
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from store.metadata_files import consumer_offset_file
from tests.e2e.harness import kill_all
from tests.e2e.nodes import BrokerNode, NamesrvNode

TOPIC = "OffsetCrashTopic"
GROUP = "OffsetCrashGroup"
KEY = f"{TOPIC}@{GROUP}"


async def commit(client: RemotingClient, addr: str, offsets: dict[int, int]) -> None:
    for queue_id, offset in offsets.items():
        fields = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(queue_id), "commitOffset": str(offset)}
        answer = await client.invoke(addr, request(RequestCode.UPDATE_CONSUMER_OFFSET, fields), 5)
        assert answer.code == ResponseCode.SUCCESS, answer.remark


async def query(client: RemotingClient, addr: str) -> dict[int, int]:
    found = {}
    for queue_id in range(4):
        fields = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(queue_id)}
        answer = await client.invoke(addr, request(RequestCode.QUERY_CONSUMER_OFFSET, fields), 5)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        found[queue_id] = int(answer.ext_fields["offset"])
    return found


async def saved(config_dir: Path, offsets: dict[int, int]) -> None:
    """Wait until ``consumerOffset.json`` holds ``offsets`` (the broker's flush wrote them)."""
    file = consumer_offset_file(config_dir)
    with trio.fail_after(30):
        while True:
            table = file.load_main() or {}  # never torn: the save renames a complete file into place
            if table.get(KEY) == offsets:
                return
            await trio.sleep(0.05)


async def test_a_sigkilled_broker_keeps_its_flushed_offsets_and_a_torn_file_falls_back_to_the_bak(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    config_dir = tmp_path / "broker" / "config"
    first, second = {q: 10 + q for q in range(4)}, {q: 20 + q for q in range(4)}
    try:
        async with trio.open_nursery() as nursery:
            namesrv = NamesrvNode("namesrv", logs)
            await namesrv.start(nursery)
            broker = BrokerNode("broker", logs, tmp_path / "broker", namesrv.addr, flushConsumerOffsetInterval=200)
            await broker.start(nursery)
            async with Admin(namesrv.addr) as admin:
                await admin.create_topic(TOPIC, read_queue_nums=4, write_queue_nums=4, broker_addr=broker.addr)
            async with RemotingClient() as client:
                await commit(client, broker.addr, first)
                await saved(config_dir, first)
                await commit(client, broker.addr, second)
                await saved(config_dir, second)  # the file saved with `first` is the .bak now
                await commit(client, broker.addr, {0: 99})  # maybe saved before the kill, maybe not
            await broker.kill()

            await broker.start(nursery)
            async with RemotingClient() as client:
                after_kill = await query(client, broker.addr)
            assert after_kill in ({**second, 0: 99}, second)
            await broker.kill()

            # The .bak is the table the last save replaced: which one depends on when the flushes fell (one between
            # two of the commits above saves a partial table), so read it from disk before tearing the main file.
            offsets_file = consumer_offset_file(config_dir)
            bak = offsets_file.decode(offsets_file.bak_path.read_bytes())[KEY]
            file = offsets_file.path
            file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])  # torn after the kill
            await broker.start(nursery)
            async with RemotingClient() as client:
                from_bak = await query(client, broker.addr)
            assert from_bak == bak
            nursery.cancel_scope.cancel()
    finally:
        await kill_all()
