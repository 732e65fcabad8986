"""Admin changes to topics and subscription groups are on disk before they are answered, as RocketMQ's
``TopicConfigManager.updateTopicConfig`` and ``SubscriptionGroupManager.updateSubscriptionGroupConfig`` persist
before returning: a broker killed right after the answer keeps them.

The managers' background save tasks are deliberately not running here, so only the handler itself can have written
the files the test reads."""

from __future__ import annotations

import orjson

from broker.context import BrokerState, config_dir_of
from processors.admin import AdminBrokerProcessor
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.headers.admin import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
)
from remoting.processor import RequestContext
from store.metadata_files import subscription_group_file, topics_file


async def _answer(broker: BrokerState, ctx: RequestContext, command: RemotingCommand) -> None:
    answer = await AdminBrokerProcessor(broker).process(ctx, command)
    assert answer is not None and answer.code == ResponseCode.SUCCESS, answer


def _topics_on_disk(broker: BrokerState) -> set[str]:
    table = topics_file(config_dir_of(broker.config)).load()
    return set() if table is None else set(table.topic_config_table)


def _groups_on_disk(broker: BrokerState) -> set[str]:
    table = subscription_group_file(config_dir_of(broker.config)).load()
    return set() if table is None else set(table.subscription_group_table)


async def test_a_created_or_deleted_topic_is_in_topics_json_when_answered(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    header = CreateTopicRequestHeader(
        topic="Saved",
        default_topic="TBW102",
        read_queue_nums=4,
        write_queue_nums=4,
        perm=6,
        topic_filter_type="SINGLE_TAG",
        order=False,
    )
    await _answer(broker, peer_ctx, request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields()))
    assert "Saved" in _topics_on_disk(broker)

    fields = DeleteTopicRequestHeader(topic="Saved").to_ext_fields()
    await _answer(broker, peer_ctx, request(RequestCode.DELETE_TOPIC_IN_BROKER, fields))
    assert "Saved" not in _topics_on_disk(broker)


async def test_a_created_or_deleted_group_is_in_its_file_when_answered(
    broker: BrokerState, peer_ctx: RequestContext
) -> None:
    body = orjson.dumps({"groupName": "saved_group", "retryQueueNums": 1, "retryMaxTimes": 16})
    await _answer(broker, peer_ctx, request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body))
    assert "saved_group" in _groups_on_disk(broker)

    fields = DeleteSubscriptionGroupRequestHeader(group_name="saved_group").to_ext_fields()
    await _answer(broker, peer_ctx, request(RequestCode.DELETE_SUBSCRIPTIONGROUP, fields))
    assert "saved_group" not in _groups_on_disk(broker)
