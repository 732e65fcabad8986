"""QUERY_MESSAGE against the broker's IndexFile service as RocketMQ 4.9.8 builds and reads it
(store/src/main/java/org/apache/rocketmq/store/index/IndexService.java, IndexFile.java,
broker/src/main/java/org/apache/rocketmq/broker/processor/QueryMessageProcessor.java), over real sockets."""

from __future__ import annotations

from broker.context import BrokerState
from broker.embedded import EmbeddedCluster
from processors.query import QueryMessageProcessor
from processors.send import SendMessageProcessor
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.message import iter_records
from remoting.processor import RequestContext
from tests.broker.helpers import create_topic_request
from tests.processors.conftest import TOPIC as PROCESSOR_TOPIC
from tests.processors.conftest import send_request, tags_props

TOPIC = "IndexTopic"
WINDOW = {"beginTimestamp": "0", "endTimestamp": str(2**62)}


async def _call(client: RemotingClient, addr: str, command: RemotingCommand) -> RemotingCommand:
    return await client.invoke(addr, command, 5)


async def _send(client: RemotingClient, addr: str, body: bytes, keys: str) -> None:
    answer = await _call(client, addr, send_request(TOPIC, body, properties=tags_props(keys=keys)))
    assert answer.code == ResponseCode.SUCCESS, answer.remark


async def _bodies_by_key(client: RemotingClient, addr: str, key: str, max_num: int = 32) -> list[bytes]:
    fields = {"topic": TOPIC, "key": key, "maxNum": str(max_num), **WINDOW}
    answer = await _call(client, addr, request(RequestCode.QUERY_MESSAGE, fields))
    assert answer.code in (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND), answer.remark
    return [m.body for m in iter_records(answer.body)] if answer.code == ResponseCode.SUCCESS else []


async def test_message_index_enable_updated_at_run_time_rules_the_next_messages(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """CommitLogDispatcherBuildIndex reads ``isMessageIndexEnable()`` from the live MessageStoreConfig at every
    dispatch (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java), and UPDATE_BROKER_CONFIG sets
    it there (Configuration.update): ``mqadmin updateBrokerConfig -k messageIndexEnable -v false`` stops indexing at
    once, ``true`` starts it again, without a restart. Messages indexed before stay found."""
    addr = embedded_cluster.broker_addr
    async with RemotingClient() as client:
        assert (await _call(client, addr, create_topic_request(TOPIC, queues=1))).code == ResponseCode.SUCCESS
        await _send(client, addr, b"before", "k-before")

        off = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"messageIndexEnable=false\n")
        assert (await _call(client, addr, off)).code == ResponseCode.SUCCESS
        await _send(client, addr, b"while off", "k-off")
        assert await _bodies_by_key(client, addr, "k-off") == []
        assert await _bodies_by_key(client, addr, "k-before") == [b"before"]

        on = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"messageIndexEnable=true\n")
        assert (await _call(client, addr, on)).code == ResponseCode.SUCCESS
        await _send(client, addr, b"after", "k-after")
        assert await _bodies_by_key(client, addr, "k-after") == [b"after"]
        assert await _bodies_by_key(client, addr, "k-off") == []


async def test_only_the_exact_string_true_makes_a_unique_key_query(embedded_cluster: EmbeddedCluster) -> None:
    """QueryMessageProcessor.queryMessage forces ``maxNum`` to defaultQueryMaxNum only when the extField
    ``_UNIQUE_KEY_QUERY`` ``equals("true")`` (broker/src/main/java/org/apache/rocketmq/broker/processor/
    QueryMessageProcessor.java): ``TRUE``, ``1`` or `` true `` leave the request's ``maxNum``. Ours took them all."""
    addr = embedded_cluster.broker_addr
    async with RemotingClient() as client:
        assert (await _call(client, addr, create_topic_request(TOPIC, queues=1))).code == ResponseCode.SUCCESS
        await _send(client, addr, b"first", "k-flag")
        await _send(client, addr, b"second", "k-flag")
        counts = {}
        for flag in ("true", "TRUE", "1", " true ", "True"):
            fields = {"topic": TOPIC, "key": "k-flag", "maxNum": "1", "_UNIQUE_KEY_QUERY": flag, **WINDOW}
            answer = await _call(client, addr, request(RequestCode.QUERY_MESSAGE, fields))
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            counts[flag] = len(list(iter_records(answer.body)))
    assert counts == {"true": 2, "TRUE": 1, "1": 1, " true ": 1, "True": 1}


async def test_a_negative_max_num_answers_system_error(embedded_cluster: EmbeddedCluster) -> None:
    """IndexService.queryOffset sizes its result list with ``new ArrayList<Long>(maxNum)`` before anything else
    (store/src/main/java/org/apache/rocketmq/store/index/IndexService.java): a negative ``maxNum`` throws, which the
    remoting layer answers SYSTEM_ERROR. ``0`` finds nothing (QUERY_NOT_FOUND); a unique-key query's ``maxNum`` is
    replaced first. Ours answered QUERY_NOT_FOUND to a negative one."""
    addr = embedded_cluster.broker_addr
    async with RemotingClient() as client:
        assert (await _call(client, addr, create_topic_request(TOPIC, queues=1))).code == ResponseCode.SUCCESS
        await _send(client, addr, b"kept", "k-neg")
        codes = {}
        for max_num, unique in (("-1", None), ("0", None), ("-1", "true")):
            fields = {"topic": TOPIC, "key": "k-neg", "maxNum": max_num, **WINDOW}
            if unique:
                fields["_UNIQUE_KEY_QUERY"] = unique
            codes[(max_num, unique)] = (await _call(client, addr, request(RequestCode.QUERY_MESSAGE, fields))).code
    assert codes == {
        ("-1", None): ResponseCode.SYSTEM_ERROR,
        ("0", None): ResponseCode.QUERY_NOT_FOUND,
        ("-1", "true"): ResponseCode.SUCCESS,
    }


async def test_a_query_that_finds_nothing_answers_zero_index_times_and_offsets(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """DefaultMessageStore.queryMessage copies the index's last update time and offset into its QueryMessageResult
    only once IndexService.queryOffset found offsets; otherwise they keep their ``long`` defaults, 0, and
    QueryMessageProcessor puts them in the QUERY_NOT_FOUND answer's header as they are
    (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java, QueryMessageResult.java). Ours answered
    the index's newest time and offset."""
    addr = embedded_cluster.broker_addr
    async with RemotingClient() as client:
        assert (await _call(client, addr, create_topic_request(TOPIC, queues=1))).code == ResponseCode.SUCCESS
        await _send(client, addr, b"indexed", "k-present")
        for key in ("k-present", "k-absent"):
            fields = {"topic": TOPIC, "key": key, "maxNum": "32", **WINDOW}
            answer = await _call(client, addr, request(RequestCode.QUERY_MESSAGE, fields))
            stamps = (answer.ext_fields["indexLastUpdateTimestamp"], answer.ext_fields["indexLastUpdatePhyoffset"])
            if key == "k-present":
                assert answer.code == ResponseCode.SUCCESS and int(stamps[0]) > 0, (answer.code, stamps)
            else:
                assert (answer.code, stamps) == (ResponseCode.QUERY_NOT_FOUND, ("0", "0"))


async def test_a_key_whose_records_were_deleted_answers_the_index_figures(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    """When the index still finds offsets for the key but retention deleted their CommitLog segment,
    DefaultMessageStore.queryMessage has copied the index's last update time and offset into QueryMessageResult
    before reading the records: QueryMessageProcessor answers QUERY_NOT_FOUND with those figures, not 0
    (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java)."""
    sender = SendMessageProcessor(broker)
    for keys in ("k-gone", "k-filler", "k-filler"):  # 600 KB each: the third rolls to the next 1 MiB segment
        sent = await sender.process(peer_ctx, send_request(body=b"x" * 600_000, properties=tags_props(keys=keys)))
        assert sent is not None and sent.code == ResponseCode.SUCCESS, sent
    for segment in broker.store.commitlog.queue.take_first(1):
        segment.destroy()
    fields = {"topic": PROCESSOR_TOPIC, "key": "k-gone", "maxNum": "32", **WINDOW}
    answer = await QueryMessageProcessor(broker).process(peer_ctx, request(RequestCode.QUERY_MESSAGE, fields))
    assert answer is not None and answer.code == ResponseCode.QUERY_NOT_FOUND, answer
    index = broker.store.index
    assert index is not None and index.query(PROCESSOR_TOPIC, "k-gone", 32, 0, 2**62), "the index lost the key"
    assert answer.ext_fields["indexLastUpdateTimestamp"] == str(index.last_update_timestamp)
    assert answer.ext_fields["indexLastUpdatePhyoffset"] == str(index.last_update_phy_offset)
