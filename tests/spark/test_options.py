"""Option parsing and offset arithmetic of the Spark source, without Spark."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting.codec.bodies import MessageQueue
from spark.offsets import admit, from_json, to_json
from spark.options import OffsetKind, OffsetSpec, OptionError, SourceOptions

NS = {"nameServer": "127.0.0.1:9876"}


def test_offset_options_accept_earliest_latest_timestamps_and_json() -> None:
    assert OffsetSpec.parse("o", "EARLIEST").kind is OffsetKind.EARLIEST
    assert OffsetSpec.parse("o", "latest").kind is OffsetKind.LATEST
    assert OffsetSpec.parse("o", "1700000000000") == OffsetSpec(OffsetKind.TIMESTAMP, timestamp_ms=1_700_000_000_000)
    assert OffsetSpec.parse("o", "2023-11-14T22:13:20Z").timestamp_ms == 1_700_000_000_000
    assert OffsetSpec.parse("o", "2023-11-14T22:13:20").timestamp_ms == 1_700_000_000_000  # no zone: UTC
    spec = OffsetSpec.parse("o", '{"T": {"0": 5, "broker-a:1": -2}}')
    assert spec.per_queue == {"T": {"0": 5, "broker-a:1": -2}}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "nameServer is required"),
        ({"nameServer": "nohost"}, "not host:port"),
        ({**NS, "topic": "bad topic"}, r"option topic='bad topic': The specified topic\[bad topic\] contains illegal"),
        ({**NS, "startingOffsets": "soon"}, "startingOffsets"),
        ({**NS, "endingOffsets": '{"T": {"0": -3}}'}, "integer >= -2"),
        ({**NS, "endingOffsets": '{"T": [1]}'}, "must map queue ids"),
        ({**NS, "maxRecordsPerTrigger": "lots"}, "maxRecordsPerTrigger"),
        ({**NS, "maxRecordsPerTrigger": "0"}, "maxRecordsPerTrigger"),
        ({**NS, "tags": "A", "subExpression": "B"}, "tags and subExpression are one option under two names"),
        ({**NS, "maxRecordsPerTrigger": "5", "maxOffsetsPerTrigger": "6"}, "one option under two names"),
        ({**NS, "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
        # rocketmq-spark's group: refused there ("can not be specified"); it used to be taken and ignored here
        ({**NS, "topic": "T", "Group": "my-group"}, "option group is not taken.*consumerGroup.*producerGroup"),
    ],
)
def test_bad_options_raise_an_option_error_naming_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        SourceOptions.parse(options)


def test_option_names_are_case_insensitive_and_topics_a_comma_list() -> None:
    parsed = SourceOptions.parse({"NAMESERVER": "h:1;g:2", "Topic": "a, b", "maxrecordspertrigger": "7"})
    assert (parsed.name_server, parsed.topics, parsed.max_records_per_trigger) == ("h:1;g:2", ("a", "b"), 7)


def test_a_name_server_list_with_empty_items_is_accepted_without_them() -> None:
    """RocketMQ splits ``namesrvAddr`` on ";" and Java's ``String.split`` drops the trailing empty item, so
    ``"127.0.0.1:9876;"`` works for every RocketMQ client (our ``ClientConfig`` drops every empty item). It used to
    fail at planning with ``'' is not host:port``. A list with no address at all is still refused."""
    parsed = SourceOptions.parse({"nameServer": " 127.0.0.1:9876; ;h:2;", "topic": "T"})
    assert parsed.name_server == "127.0.0.1:9876;h:2"
    assert parsed.client_config().namesrv_addr == ("127.0.0.1:9876", "h:2")
    with pytest.raises(OptionError, match="nameServer is required"):
        SourceOptions.parse({"nameServer": ";"})


def test_offset_tables_round_trip_through_the_checkpoint_json() -> None:
    table = {MessageQueue("T", "broker-a", 0): 3, MessageQueue("T", "broker-b", 0): 9, MessageQueue("U", "b:x", 2): 1}
    assert to_json(table) == {"T": {"broker-a:0": 3, "broker-b:0": 9}, "U": {"b:x:2": 1}}
    assert from_json(to_json(table)) == table


@given(
    st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), min_size=1, max_size=6),
    st.integers(1, 200),
)
def test_admission_takes_at_most_the_limit_and_never_leaves_a_backlog_idle_while_budget_remains(
    queues: list[tuple[int, int]], limit: int
) -> None:
    start = {MessageQueue("T", "b", i): s for i, (s, _) in enumerate(queues)}
    latest = {MessageQueue("T", "b", i): s + extra for i, (s, extra) in enumerate(queues)}
    end = admit(start, latest, limit)
    taken = {mq: end[mq] - start[mq] for mq in start}
    assert all(0 <= taken[mq] <= latest[mq] - start[mq] for mq in start)
    backlog = sum(latest[mq] - start[mq] for mq in start)
    assert sum(taken.values()) == min(limit, backlog)


def test_a_rate_limit_below_the_queue_count_reaches_every_backlogged_queue_in_turn() -> None:
    """Three queues with 100 messages each, ``maxRecordsPerTrigger=2``: the single-row shares went to the queues in
    sorted order every batch, so queue 2 waited until queues 0 and 1 were drained (forever while producers kept them
    busy). They now go in turn, starting where the previous batch stopped; each batch still takes exactly 2 (Kafka's
    ``KafkaMicroBatchStream.rateLimit`` rounds small shares up to one row, past the limit)."""
    queues = [MessageQueue("T", "broker-a", i) for i in range(3)]
    start = {mq: 0 for mq in queues}
    latest = {mq: 100 for mq in queues}
    taken = []
    for _ in range(3):
        end = admit(start, latest, 2)
        taken.append([end[mq] - start[mq] for mq in queues])
        start = end
    assert taken == [[1, 1, 0], [1, 0, 1], [0, 1, 1]]


def test_rocketmq_sparks_nested_offsets_json_names_each_queue_by_its_broker() -> None:
    """rocketmq-spark's offsets JSON nests queues under their broker, ``{"topic": {"broker": {"queueId": offset}}}``
    (``JsonUtils.partitionOffsets``, the form its docs give for ``startingOffsets`` / ``endingOffsets``). A query
    carried over with it failed at planning: the nested object was taken for an offset that is not an integer."""
    text = '{"T": {"broker-a": {"0": 23, "1": -1}, "broker-b": {"0": -2}}, "U": {"2": 4}}'
    spec = OffsetSpec.parse("startingOffsets", text)
    assert spec.per_queue == {"T": {"broker-a:0": 23, "broker-a:1": -1, "broker-b:0": -2}, "U": {"2": 4}}
    with pytest.raises(OptionError, match=r"startingOffsets: offset 'x' of T/broker-a:0 must be an integer >= -2"):
        OffsetSpec.parse("startingOffsets", '{"T": {"broker-a": {"0": "x"}}}')
    with pytest.raises(OptionError, match="queue key 'broker-a:q' of 'T'"):
        OffsetSpec.parse("startingOffsets", '{"T": {"broker-a": {"q": 1}}}')


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({**NS, "topic": "T", "consumerGroup": "my group"}, "option consumerGroup.*illegal characters"),
        ({**NS, "topic": "T", "consumerGroup": "g" * 256}, "option consumerGroup.*longer than group max length 255"),
        ({**NS, "topic": "T", "producerGroup": "sink/group"}, "option producerGroup.*illegal characters"),
        ({**NS, "topic": "T", "producerGroup": "DEFAULT_PRODUCER"}, "option producerGroup.*DEFAULT_PRODUCER"),
        ({**NS, "topic": "T", "commitTopic": "commits log"}, "option commitTopic.*illegal characters"),
        ({**NS, "topic": "T", "commitTopic": "c" * 128}, "option commitTopic.*longer than topic max length 127"),
        ({**NS, "topic": "T", "commitTopic": "SCHEDULE_TOPIC_XXXX"}, "option commitTopic.*forbidden"),
        ({**NS, "topic": "Café"}, r"option topic='Café': The specified topic\[Café\] contains illegal characters"),
    ],
)
def test_group_and_topic_names_rocketmq_refuses_are_option_errors(options: dict[str, str], message: str) -> None:
    """Java's clients refuse these names before sending anything (``client/.../Validators.java`` ``checkGroup``,
    ``checkTopic``, ``isNotAllowedSendTopic``; ``DefaultMQProducerImpl.checkConfig`` refuses DEFAULT_PRODUCER); the
    source took them and failed only inside a task, or, for ``consumerGroup``, pulled and mirrored a stream's progress
    under a group no RocketMQ client can name. ``Café`` passed the topic check (``str.isalnum`` takes any Unicode
    letter; RocketMQ allows ``[%|a-zA-Z0-9_-]`` only)."""
    with pytest.raises(OptionError, match=message):
        SourceOptions.parse(options)


@pytest.mark.parametrize(
    ("topics", "remark"),
    [
        ("T,Café", "The specified topic[Café] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
        ("t" * 128, "The specified topic is longer than topic max length 127."),
    ],
)
def test_a_topic_option_rocketmq_refuses_is_refused_with_the_validators_remark(topics: str, remark: str) -> None:
    """The ``topic`` option is checked as Java's ``Validators.checkTopic`` checks a topic
    (``client/src/main/java/org/apache/rocketmq/client/Validators.java``, 4.9.8), with its remark, as the group and
    commit topic options are; it said only "not a valid RocketMQ topic name", whatever was wrong."""
    with pytest.raises(OptionError) as caught:
        SourceOptions.parse({**NS, "topic": topics})
    assert str(caught.value).endswith(f": {remark}")


@pytest.mark.parametrize("name", ["maxRecordsPerTrigger", "maxOffsetsPerTrigger"])
def test_a_batch_read_warns_that_it_ignores_a_rate_limit(caplog: pytest.LogCaptureFixture, name: str) -> None:
    """A rate limit is a stream's: a batch read reads its whole range. rocketmq-spark's
    ``RocketMQSourceProvider.validateBatchOptions`` logs "maxOffsetsPerTrigger option ignored in batch queries"; ours
    said nothing, so a read meant to be bounded by it read everything without a word."""
    from spark.reader import RocketMQBatchReader

    with caplog.at_level("WARNING", logger="spark.reader"):
        RocketMQBatchReader(SourceOptions.parse({**NS, "topic": "T", name: "10"}))
        RocketMQBatchReader(SourceOptions.parse({**NS, "topic": "T"}))
    assert [r.getMessage() for r in caplog.records if r.name == "spark.reader"] == [
        "option maxRecordsPerTrigger (maxOffsetsPerTrigger) ignored in batch queries: a batch read reads all its range"
    ]
