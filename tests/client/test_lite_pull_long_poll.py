"""The lite pull consumer's long poll and its waits after a refused pull, as 4.9.8's DefaultLitePullConsumer
(``brokerSuspendMaxTimeMillis`` 20 s, ``consumerTimeoutMillisWhenSuspend`` 30 s, checked by ``checkConfig``) and
DefaultLitePullConsumerImpl's ``PullTaskImpl`` (a FLOW_CONTROL answer: PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL,
20 ms) in client/src/main/java/org/apache/rocketmq/client/. A fake master (real sockets) records the pulls; virtual
time."""

from __future__ import annotations

import itertools

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.consumer.lite_pull import LitePullConsumer
from remoting.codec.bodies import ConsumeFromWhere, MessageQueue
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.dispatch import RequestContext
from tests.client.test_producer_faults import _fake_master

TOPIC = "LiteLongPoll"


class PullRecorder:
    """A master that records each pull (its time and ``suspendTimeoutMillis``) and answers it with ``answer`` (None:
    never); no stored offset (QUERY_NOT_FOUND), SUCCESS for the rest."""

    def __init__(self, answer: int | None) -> None:
        self.answer = answer
        self.pulls: list[tuple[float, str]] = []

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.PULL_MESSAGE:
            self.pulls.append((trio.current_time(), request.ext_fields["suspendTimeoutMillis"]))
            return None if self.answer is None else request.response(self.answer, "busy")
        if request.code == RequestCode.QUERY_CONSUMER_OFFSET:
            return request.response(ResponseCode.QUERY_NOT_FOUND)
        return request.response(ResponseCode.SUCCESS)


async def _pulls(cluster: EmbeddedCluster, recorder: PullRecorder, seconds: float, **settings: float) -> list[float]:
    """Run an assigned consumer on the recorder's queue for ``seconds``; the gaps between its pulls."""
    async with _fake_master(cluster, TOPIC, "broker-lp", recorder):
        consumer = LitePullConsumer(
            "lite-long-poll", cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            **settings,
        )  # fmt: skip
        async with consumer:
            await consumer.assign([MessageQueue(TOPIC, "broker-lp", 0)])
            await trio.sleep(seconds)
    times = [t for t, _ in recorder.pulls]
    return [round(b - a, 3) for a, b in itertools.pairwise(times)]


async def test_a_lite_pull_is_held_and_timed_out_as_javas_by_default(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """pullSyncImpl asks the broker to hold the pull brokerSuspendMaxTimeMillis (20 s) and waits for it
    consumerTimeoutMillisWhenSuspend (30 s), then pullTimeDelayMillsWhenException (1 s). Ours asked 5 s, waited 15."""
    recorder = PullRecorder(None)
    gaps = await _pulls(embedded_cluster, recorder, 100.0)
    assert {suspend for _, suspend in recorder.pulls} == {"20000"}
    assert gaps[:2] == [31.0, 31.0], gaps


async def test_the_lite_pull_hold_and_timeout_are_settings(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """DefaultLitePullConsumer's setBrokerSuspendMaxTimeMillis / setConsumerTimeoutMillisWhenSuspend, ours in
    seconds; checkConfig refuses a timeout below the hold."""
    recorder = PullRecorder(None)
    settings = {"broker_suspend_max_time": 2.0, "consumer_timeout_when_suspend": 4.0}
    gaps = await _pulls(embedded_cluster, recorder, 30.0, **settings)
    assert {suspend for _, suspend in recorder.pulls} == {"2000"}
    assert gaps[:2] == [5.0, 5.0], gaps
    with pytest.raises(ValueError, match="consumer_timeout_when_suspend must greater than broker_suspend_max_time"):
        LitePullConsumer("lite-bad-poll", embedded_cluster.namesrv_addr, consumer_timeout_when_suspend=19.0)


async def test_a_lite_pull_the_broker_flow_controls_goes_again_after_20_ms(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """PullTaskImpl.run: a pull answered FLOW_CONTROL (MQBrokerException) is made again after
    PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL (20 ms), any other failure after pullTimeDelayMillsWhenException.
    Ours waited the 1 s of a failure for both."""
    gaps = await _pulls(embedded_cluster, PullRecorder(ResponseCode.FLOW_CONTROL), 3.0)
    assert gaps and set(gaps) == {0.02}, gaps
