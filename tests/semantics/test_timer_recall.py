"""RECALL_MESSAGE (RocketMQ 5.3) over real sockets, in virtual time: a timer message's send answer carries a recall
handle (a normal message's does not); recalling it stores a delete marker in the timer and the message never reaches
its topic, while its neighbours in the same slot do; the recall holds across a clean restart, a crash rebuild of the
wheel and a wheel too short for the delay (the marker rolls on with the message); bad, foreign, mismatched and stale
handles, an unknown topic and a broker with recall off are answered with RocketMQ's codes and remarks."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import orjson
import pytest
import trio

from broker.embedded import EmbeddedCluster
from broker.timer import TIMER_TOPIC, TimerStore
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.headers import RecallMessageRequestHeader, SendMessageRequestHeader
from remoting.codec.message import MessageRecord
from remoting.codec.message_properties import encode_properties
from remoting.codec.recall_handle import decode_recall_handle, encode_recall_handle
from tests.conftest import SMALL_STORE
from tests.semantics.helpers import create_topic, use_virtual_store_clock
from tests.semantics.test_timer import _read_all, _timer_metrics, open_timer_store, run_timer


@pytest.fixture
async def recall_cluster(tmp_path: Path) -> AsyncIterator[EmbeddedCluster]:
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE, recall_message_enable=True) as cluster:
        yield cluster


async def _send(
    client: RemotingClient, cluster: EmbeddedCluster, topic: str, body: bytes, uniq: str, **props: str
) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="pg-recall",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=0,
        sys_flag=0,
        born_timestamp=0,
        flag=0,
        properties=encode_properties({"UNIQ_KEY": uniq, **props}),
    )
    command = request(RequestCode.SEND_MESSAGE, header.to_ext_fields(), body)
    answer = await client.invoke(cluster.broker_addr, command, 5)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return answer


async def _recall(client: RemotingClient, cluster: EmbeddedCluster, topic: str, handle: str) -> RemotingCommand:
    header = RecallMessageRequestHeader(topic=topic, recall_handle=handle)
    return await client.invoke(cluster.broker_addr, request(RequestCode.RECALL_MESSAGE, header.to_ext_fields()), 5)


async def _prepared(cluster: EmbeddedCluster, topic: str) -> Callable[[], int]:
    """The cluster on virtual store time with ``topic`` created; returns the store's clock."""
    clock = use_virtual_store_clock(cluster)
    await create_topic(cluster, topic)
    return clock


def _bodies(cluster: EmbeddedCluster, topic: str) -> list[bytes]:
    return sorted(m.body for m in _read_all(cluster.controller.context.store, topic, 0))


async def test_a_recalled_timer_message_is_never_delivered_and_its_neighbours_are(
    recall_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = await _prepared(recall_cluster, "Recall")
    async with RemotingClient() as client:
        at = (clock() // 100 + 100) * 100  # on a precision boundary: parked with TIMER_OUT_MS = at - 100
        answers = {
            name: await _send(client, recall_cluster, "Recall", name.encode(), f"ID-{name}", TIMER_DELIVER_MS=str(at))
            for name in ("gone", "kept", "kept-too")
        }
        normal = await _send(client, recall_cluster, "Recall", b"now", "ID-now")
        assert "recallHandle" not in normal.ext_fields
        handle = answers["gone"].ext_fields["recallHandle"]
        assert decode_recall_handle(handle) == ("Recall", "broker-a", str(at - 100 + 1), "ID-gone")
        answer = await _recall(client, recall_cluster, "Recall", handle)
        assert (answer.code, answer.ext_fields["msgId"]) == (ResponseCode.SUCCESS, "ID-gone")
        assert answer.ext_fields["MSG_REGION"] == "DefaultRegion"
        # A second recall of the same handle is answered as RocketMQ answers it: one more marker, SUCCESS.
        assert (await _recall(client, recall_cluster, "Recall", handle)).code == ResponseCode.SUCCESS
        await trio.sleep(15)
        assert _bodies(recall_cluster, "Recall") == [b"kept", b"kept-too", b"now"]
        timers = recall_cluster.controller.timer.timers
        assert (timers.recalled, recall_cluster.controller.timer.pending) == (1, 0)
        # Its time has passed: the handle is stale now.
        stale = await _recall(client, recall_cluster, "Recall", answers["kept"].ext_fields["recallHandle"])
        assert (stale.code, stale.remark) == (ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
    assert _bodies(recall_cluster, "Recall") == [b"kept", b"kept-too", b"now"]


async def test_a_recall_takes_its_message_off_the_timer_metrics_at_once(
    recall_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3's TimerMessageStore.doEnqueue files a delete marker with ``addMetric(msg, -1)``
    (store/src/main/java/org/apache/rocketmq/store/timer/TimerMessageStore.java): GET_TIMER_METRICS stops counting a
    recalled message as soon as the recall is filed, and its drop at the due time takes nothing more off. A marker
    that matches no message (a handle of a message never sent) takes one off only until its slot comes. Ours kept
    the recalled message counted until its due time."""
    clock = await _prepared(recall_cluster, "RecallCount")
    async with RemotingClient() as client:
        at = (clock() // 100 + 100) * 100
        answers = {
            name: await _send(
                client, recall_cluster, "RecallCount", name.encode(), f"ID-{name}", TIMER_DELIVER_MS=str(t)
            )
            for name, t in (("gone", at), ("kept", at), ("later", at + 60_000))
        }
        await trio.sleep(1)
        assert await _timer_metrics(recall_cluster) == {"RecallCount": 3}
        answer = await _recall(client, recall_cluster, "RecallCount", answers["gone"].ext_fields["recallHandle"])
        assert answer.code == ResponseCode.SUCCESS
        await trio.sleep(1)
        assert await _timer_metrics(recall_cluster) == {"RecallCount": 2}
        never_sent = encode_recall_handle("RecallCount", "broker-a", str(at - 100 + 1), "ID-never-sent")
        assert (await _recall(client, recall_cluster, "RecallCount", never_sent)).code == ResponseCode.SUCCESS
        await trio.sleep(15)
        assert _bodies(recall_cluster, "RecallCount") == [b"kept"]
        assert await _timer_metrics(recall_cluster) == {"RecallCount": 1}
        await trio.sleep(60)
        assert _bodies(recall_cluster, "RecallCount") == [b"kept", b"later"]
        assert await _timer_metrics(recall_cluster) == {"RecallCount": 0}


async def test_a_recall_takes_its_message_off_its_slots_congestion_count(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3's TimerMessageStore.doEnqueue takes one off a slot's count for a delete marker (``isDelete ?
    slot.num - 1 : slot.num + 1``), and that count is what ``isReject`` (``timerCongestNumEachSlot``, here 1) and
    ``getAllCongestNum`` (the runtime info's ``timerCongestNum``) read: a recalled message and its marker leave their
    slot as if neither was sent. Ours counted the marker as one more entry, so the slot refused the next send
    (SYSTEM_ERROR, flow control) and ``timerCongestNum`` said 2."""
    settings = {"recall_message_enable": True, "timer_congest_num_each_slot": 1}
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE, **settings) as cluster:
        clock = await _prepared(cluster, "RecallCongest")
        async with RemotingClient() as client:
            at = (clock() // 100 + 100) * 100
            gone = await _send(client, cluster, "RecallCongest", b"gone", "ID-gone", TIMER_DELIVER_MS=str(at))
            await trio.sleep(1)
            answer = await _recall(client, cluster, "RecallCongest", gone.ext_fields["recallHandle"])
            assert answer.code == ResponseCode.SUCCESS
            await trio.sleep(1)
            assert cluster.controller.timer.stats()["timerCongestNum"] == "0"
            await _send(client, cluster, "RecallCongest", b"kept", "ID-kept", TIMER_DELIVER_MS=str(at))
            await trio.sleep(15)
            assert _bodies(cluster, "RecallCongest") == [b"kept"]


async def test_bad_handles_and_requests_get_rocketmqs_answers(
    recall_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = await _prepared(recall_cluster, "RecallBad")
    await create_topic(recall_cluster, "RecallOther")
    in_a_minute = str(clock() + 60_000)
    cases = [
        ("RecallBad", "not a handle", ResponseCode.ILLEGAL_OPERATION, "recall handle is invalid"),
        ("RecallBad", encode_recall_handle("RecallOther", "broker-a", in_a_minute, "X"),
         ResponseCode.ILLEGAL_OPERATION, "recall failed, topic not match"),
        ("RecallBad", encode_recall_handle("RecallBad", "broker-z", in_a_minute, "X"),
         ResponseCode.ILLEGAL_OPERATION, "recall failed, broker service not available"),
        ("RecallBad", encode_recall_handle("RecallBad", "broker-a", str(clock() - 1), "X"),
         ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid"),
        ("RecallBad", encode_recall_handle("RecallBad", "broker-a", str(clock() + 3 * 86_400_000 + 60_000), "X"),
         ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid"),
        ("RecallBad", encode_recall_handle("RecallBad", "broker-a", "soon", "X"),
         ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid"),
        ("NoSuchTopic", encode_recall_handle("NoSuchTopic", "broker-a", in_a_minute, "X"),
         ResponseCode.TOPIC_NOT_EXIST, "recall failed, the topic[NoSuchTopic] not exist"),
    ]  # fmt: skip
    store = recall_cluster.controller.context.store
    async with RemotingClient() as client:
        for topic, handle, code, remark in cases:
            answer = await _recall(client, recall_cluster, topic, handle)
            assert (answer.code, answer.remark) == (code, remark), handle
        missing = request(RequestCode.RECALL_MESSAGE, {"topic": "RecallBad"})
        answer = await client.invoke(recall_cluster.broker_addr, missing, 5)
        assert answer.code == ResponseCode.SYSTEM_ERROR and "recallHandle" in (answer.remark or "")
    assert store.max_offset_in_queue(TIMER_TOPIC, 0) == 0  # no marker stored for any of them


async def test_recall_is_off_unless_enabled_as_in_rocketmq(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = await _prepared(embedded_cluster, "RecallOff")
    async with RemotingClient() as client:
        sent = await _send(client, embedded_cluster, "RecallOff", b"x", "ID-off", TIMER_DELAY_MS="5000")
        at = int(decode_recall_handle(sent.ext_fields["recallHandle"]).timestamp)
        assert clock() < at <= clock() + 5_001
        answer = await _recall(client, embedded_cluster, "RecallOff", sent.ext_fields["recallHandle"])
        assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
        await trio.sleep(10)
    assert _bodies(embedded_cluster, "RecallOff") == [b"x"]


async def test_a_delete_marker_whose_time_passed_is_refused_on_the_send_path(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = await _prepared(embedded_cluster, "RecallLate")
    async with RemotingClient() as client:
        props = {"UNIQ_KEY": "M", "TIMER_DELIVER_MS": str(clock() - 1), "TIMER_DEL_UNIQKEY": "RecallLate+X"}
        header = SendMessageRequestHeader("pg", "RecallLate", "TBW102", 4, 0, 0, 0, 0, encode_properties(props))
        answer = await client.invoke(
            embedded_cluster.broker_addr, request(RequestCode.SEND_MESSAGE, header.to_ext_fields(), b"0"), 5
        )
    assert answer.code == ResponseCode.MESSAGE_ILLEGAL
    assert "if set del msg, the delay time should be bigger than the current time" in (answer.remark or "")
    assert _bodies(embedded_cluster, "RecallLate") == []


async def test_a_recall_holds_across_a_clean_restart(
    recall_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = await _prepared(recall_cluster, "RecallRestart")
    async with RemotingClient() as client:
        handles = []
        for i in range(6):
            sent = await _send(
                client, recall_cluster, "RecallRestart", f"r{i}".encode(), f"ID-{i}", TIMER_DELAY_SEC=str(20 + i)
            )
            handles.append(sent.ext_fields["recallHandle"])
        for i in (1, 4):
            assert (await _recall(client, recall_cluster, "RecallRestart", handles[i])).code == ResponseCode.SUCCESS
    autojump_clock.autojump_threshold = math.inf
    await recall_cluster.restart_broker()
    autojump_clock.autojump_threshold = 0
    use_virtual_store_clock(recall_cluster, clock)
    await trio.sleep(40)
    assert _bodies(recall_cluster, "RecallRestart") == [b"r0", b"r2", b"r3", b"r5"]
    assert recall_cluster.controller.timer.timers.recalled == 2


async def test_a_recall_holds_when_the_marker_rolls_on_with_its_message(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # A 2 s wheel (20 slots of 100 ms): a 25 s timer and its marker go round about a dozen times, filed apart.
    overrides = {
        **SMALL_STORE,
        "timer_wheel_slots": 20,
        "mapped_file_size_timer_log": 32 * 64,
        "recall_message_enable": True,
    }
    async with EmbeddedCluster(tmp_path, **overrides) as cluster:
        clock = await _prepared(cluster, "RecallFar")
        async with RemotingClient() as client:
            at = clock() + 25_000
            far = await _send(client, cluster, "RecallFar", b"far", "ID-far", TIMER_DELIVER_MS=str(at))
            await _send(client, cluster, "RecallFar", b"beside", "ID-beside", TIMER_DELIVER_MS=str(at))
            await trio.sleep(3.3)
            answer = await _recall(client, cluster, "RecallFar", far.ext_fields["recallHandle"])
            assert answer.code == ResponseCode.SUCCESS
        await trio.sleep(30)
        assert _bodies(cluster, "RecallFar") == [b"beside"]
        assert cluster.controller.timer.timers.rolled >= 12
        assert cluster.controller.timer.timers.recalled == 1
        assert await _timer_metrics(cluster) == {"RecallFar": 0}  # each roll of the marker gave back what it took


def _timer_record(topic: str, deliver_ms: int, uniq: str, marker: bool = False) -> MessageRecord:
    props = {"REAL_TOPIC": topic, "REAL_QID": "0", "TIMER_OUT_MS": str(deliver_ms), "UNIQ_KEY": uniq}
    if marker:
        props |= {"TIMER_OUT_MS": str(deliver_ms + 1), "TIMER_DEL_UNIQKEY": f"{topic}+{uniq}"}
    return MessageRecord(topic=TIMER_TOPIC, body=uniq.encode(), properties=encode_properties(props))


def test_after_a_crash_the_rebuilt_wheel_files_the_markers_again(tmp_path: Path) -> None:
    now = [1_000_000]
    store, config_dir, timers = open_timer_store(tmp_path, now)
    for i in range(6):
        store.append(_timer_record("Crashed", now[0] + 1_000 * (i + 1), f"c{i}"))
    store.append(_timer_record("Crashed", now[0] + 2_000, "c1", marker=True))
    assert timers.enqueue(100) == 7
    assert timers.pending == 6  # a marker is not a message to deliver
    timers.save_checkpoint(timers.checkpoint(clean=False))
    store.append(_timer_record("Crashed", now[0] + 5_000, "c4", marker=True))  # stored, never filed before the crash
    timers.close()

    again = TimerStore(store, config_dir, slots=64)
    again.load()
    assert again.enqueue(100) == 8
    now[0] += 10_000
    run_timer(again, now[0])  # c4 and its marker roll (both due 5 s ahead, beyond the 4.8 s window) and meet again
    assert sorted(m.body for m in _read_all(store, "Crashed", 0)) == [b"c0", b"c2", b"c3", b"c5"]
    assert (again.recalled, again.pending) == (2, 0)
    again.close()
    store.close()


def test_a_checkpoint_counted_before_markers_took_one_off_is_counted_again(tmp_path: Path) -> None:
    """A clean ``timerCheck.json`` of the previous version counted a pending recall's message as pending (its marker
    took nothing off): loaded as is, the marker's give-back at its slot left the topic one too high for good. Its
    counts are taken again from the wheel's entries, so the count ends at 0 once everything is delivered."""
    now = [1_000_000]
    store, config_dir, timers = open_timer_store(tmp_path, now)
    store.append(_timer_record("Upgraded", now[0] + 3_000, "u0"))
    store.append(_timer_record("Upgraded", now[0] + 3_000, "u0", marker=True))
    store.append(_timer_record("Upgraded", now[0] + 4_000, "u1"))
    assert timers.enqueue(100) == 3
    timers.save_checkpoint(timers.checkpoint(clean=True))
    timers.close()
    path = config_dir / "timerCheck.json"
    root = orjson.loads(path.read_bytes())
    root.pop("timingMarkers", None)  # as the previous version wrote it: markers not counted
    root["timingCount"]["Upgraded"][0] = 2
    path.write_bytes(orjson.dumps(root))
    upgraded = TimerStore(store, config_dir, slots=64)
    upgraded.load()
    now[0] += 10_000
    run_timer(upgraded, now[0])
    assert {topic: metric[0] for topic, metric in upgraded.timing.items()} == {"Upgraded": 0}
