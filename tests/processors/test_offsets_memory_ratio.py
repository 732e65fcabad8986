"""QUERY_CONSUMER_OFFSET for a group without an offset follows ``accessMessageInMemoryMaxRatio`` (found by a review;
failed before: the distance was fixed at 40 % of RAM).

RocketMQ 4.9.8 (broker/processor/ConsumerManageProcessor.java queryConsumerOffset ->
store/DefaultMessageStore.java checkInDiskByConsumeOffset -> checkInDiskByCommitOffset) counts the queue's first
message as "on disk" when it lies more than ``TOTAL_PHYSICAL_MEMORY_SIZE * accessMessageInMemoryMaxRatio / 100``
bytes behind the CommitLog head, the ratio read from the store's configuration; then a new group gets QUERY_NOT_FOUND
(22) and the client starts where its ConsumeFromWhere says (the last offset by default), not at 0.
"""

from __future__ import annotations

from pathlib import Path

from broker.embedded import EmbeddedCluster
from processors.offsets import QUERY_NOT_FOUND_REMARK
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from store.metadata_files import TopicConfig
from tests.conftest import SMALL_STORE
from tests.processors.conftest import send_request

TOPIC = "RevOffsetTopic"


async def test_a_new_group_is_not_found_when_the_first_message_is_beyond_the_configured_memory_ratio(
    tmp_path: Path,
) -> None:
    # Ratio 0: every message but the newest byte is "on disk" for RocketMQ.
    async with (
        EmbeddedCluster(tmp_path / "cluster", access_message_in_memory_max_ratio=0, **SMALL_STORE) as cluster,
        RemotingClient() as client,
    ):
        addr = cluster.broker_addr
        cluster.controller.context.topics.update_topic(TopicConfig(TOPIC, 1, 1))
        for _ in range(3):
            sent = await client.invoke(addr, send_request(TOPIC, b"x" * 100), 5)
            assert sent.code == ResponseCode.SUCCESS, sent.remark
        query = request(
            RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "rev_new_group", "topic": TOPIC, "queueId": "0"}
        )
        answer = await client.invoke(addr, query, 5)
        assert (answer.code, answer.remark) == (ResponseCode.QUERY_NOT_FOUND, QUERY_NOT_FOUND_REMARK), (
            f"with accessMessageInMemoryMaxRatio=0 the first message is on disk (more than 0 bytes behind), "
            f"RocketMQ answers QUERY_NOT_FOUND; got code {answer.code} offset {answer.ext_fields.get('offset')}"
        )
