"""BROADCASTING offsets in ``offsets.json`` and its ``offsets.json.bak``, as Java's LocalFileOffsetStore keeps them
(client/src/main/java/org/apache/rocketmq/client/consumer/store/LocalFileOffsetStore.java, written by
``MixAll.string2File``): every save first copies the previous file to the ``.bak``, and a main file that is empty or
does not parse is read from the ``.bak`` instead, so a damaged file does not send the consumer back to
consume-from-where."""

from __future__ import annotations

from pathlib import Path

import pytest

from client.consumer.offset_store import LocalFileOffsetStore
from remoting.codec.bodies import MessageQueue

MQ = MessageQueue("T", "broker-a", 0)
OTHER = MessageQueue("T", "broker-a", 1)


@pytest.mark.parametrize("damage", ["", "{not json", '{"offsetTable": [{"topic": "T"'])
async def test_a_damaged_offsets_json_is_read_from_its_bak(tmp_path: Path, damage: str) -> None:
    first = LocalFileOffsetStore(tmp_path, "10.0.0.1@1", "g")
    await first.load()
    first.update(MQ, 10)
    first.update(OTHER, 7)
    await first.persist_all([MQ, OTHER])
    first.update(MQ, 20)
    await first.persist_all([MQ])  # the file of the save before becomes offsets.json.bak
    first.close()
    assert first.path.with_name("offsets.json.bak").exists()
    first.path.write_text(damage)

    again = LocalFileOffsetStore(tmp_path, "10.0.0.1@1", "g")
    await again.load()
    assert again.read_memory(MQ) == 10 and again.read_memory(OTHER) == 7
    assert await again.read(MQ) == 10
    again.update(MQ, 11)
    await again.persist_all([MQ])  # merges into the .bak's offsets: the other queue's entry is kept
    again.close()

    third = LocalFileOffsetStore(tmp_path, "10.0.0.1@1", "g")
    await third.load()
    assert (await third.read(MQ), await third.read(OTHER)) == (11, 7)
    third.close()
