"""BROADCASTING offsets in ``offsets.json`` and its ``offsets.json.bak``, as Java's LocalFileOffsetStore keeps them
(client/src/main/java/org/apache/rocketmq/client/consumer/store/LocalFileOffsetStore.java, written by
``MixAll.string2File``): every save first copies the previous file to the ``.bak``, and a main file that is empty or
does not parse is read from the ``.bak`` instead, so a damaged file does not send the consumer back to
consume-from-where."""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from pathlib import Path

import pytest
import trio

from client.consumer.offset_store import LocalFileOffsetStore
from remoting.codec.bodies import MessageQueue
from remoting.codec.bodies.admin import loads_fastjson

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


#: ``offsets.json`` as a Java broadcasting consumer writes it: ``OffsetSerializeWrapper.toJson(true)``, fastjson's
#: pretty form of ``{"offsetTable": {MessageQueue: AtomicLong}}`` with the queues as object keys.
JAVA_OFFSETS_JSON = """{
\t"offsetTable":{{
\t\t\t"brokerName":"broker-a",
\t\t\t"queueId":1,
\t\t\t"topic":"T"
\t\t}:7,{
\t\t\t"brokerName":"broker-a",
\t\t\t"queueId":0,
\t\t\t"topic":"T"
\t\t}:20
\t}
}"""


async def test_a_java_consumers_offsets_json_is_read_and_written_in_its_form(tmp_path: Path) -> None:
    """The file sits where a Java consumer of the host keeps it (``<clientId>/<group>/offsets.json``), so it must be
    in the form Java's LocalFileOffsetStore reads and writes (client/src/main/java/org/apache/rocketmq/client/
    consumer/store/OffsetSerializeWrapper.java): a consumer replacing a Java one goes on from its progress, and the
    other way round."""
    store = LocalFileOffsetStore(tmp_path, "10.0.0.1@DEFAULT", "g")
    store.path.parent.mkdir(parents=True)
    store.path.write_text(JAVA_OFFSETS_JSON)
    await store.load()
    assert (await store.read(MQ), await store.read(OTHER)) == (20, 7)
    store.update(MQ, 25)
    await store.persist_all([MQ])
    store.close()

    written = loads_fastjson(store.path.read_bytes())
    assert written == {"offsetTable": {MQ: 25, OTHER: 7}}


async def test_a_save_leaves_the_event_loop_free_while_it_waits_on_the_file(tmp_path: Path) -> None:
    """A save reads, writes and fsyncs ``offsets.json`` and its ``.bak``: on a slow or stalled disk (a busy device,
    a home directory on NFS) that takes as long as the disk does. Java's persistAll runs on the client instance's
    scheduled thread (client/src/main/java/org/apache/rocketmq/client/impl/factory/MQClientInstance.java
    ``persistAllConsumerOffset``), never where the client's messages are handled; ours must not stop the event
    loop, which every consumer and producer of the instance shares. The stalled disk here is a FIFO in the file's
    place, which a thread feeds only after asking the loop to run a callback."""
    store = LocalFileOffsetStore(tmp_path, "10.0.0.1@1", "g")
    await store.load()
    store.update(MQ, 5)
    store.path.parent.mkdir(parents=True)
    os.mkfifo(store.path)
    token = trio.lowlevel.current_trio_token()
    loop_ran: list[bool] = []
    done = threading.Event()

    def disk() -> None:
        while not done.is_set() and stat.S_ISFIFO(os.stat(store.path).st_mode):
            try:
                fd = os.open(store.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:  # ENXIO: nobody reads the file yet
                assert exc.errno == errno.ENXIO
                time.sleep(0.005)
                continue
            if not loop_ran:  # the save waits for the file: is the loop still running meanwhile?
                ran = threading.Event()
                token.run_sync_soon(ran.set)
                loop_ran.append(ran.wait(10))  # only bounds how long a blocked loop takes to fail the test
            os.write(fd, b'{"offsetTable":{}}')
            os.close(fd)
            time.sleep(0.05)

    feeder = threading.Thread(target=disk, daemon=True)
    feeder.start()
    try:
        await store.persist_all([MQ])
    finally:
        done.set()
        feeder.join()
    store.close()
    assert loop_ran == [True]
    assert loads_fastjson(store.path.read_bytes()) == {"offsetTable": {MQ: 5}}
