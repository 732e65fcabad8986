"""What a request needs: the topics and groups it touches and the permission each needs, per request code
(RocketMQ's ``acl/src/main/java/org/apache/rocketmq/acl/plain/PlainAccessValidator.java``, ``parse``).

A group is checked as its retry topic ``%RETRY%<group>``. Codes not listed need no resource (only the account, its
signature and, for the admin codes, the admin flag). Ours, beyond 4.9.8's ``parse``: a batch send (320) and a reply
(324, 325) are checked as the sends they are (RocketMQ 5 checks 320 too; 4.9.8 let any account publish to any topic
through them), and a send to a retry topic needs SUB on that topic itself as well as on the header's group (4.9.8
checked only the header's group, and the message goes to the group the topic names).

A heartbeat body that does not decode raises :class:`ResourceError` with the message RocketMQ's decoder gives, which
the check answers as an ACL failure. Header fields are never refused here: 4.9.8's ``decodeCommandCustomHeader``
(``remoting/src/main/java/org/apache/rocketmq/remoting/protocol/RemotingCommand.java``) throws "the custom field <x>
is null" and ``Integer.parseInt``/``Long.parseLong`` failures inside its per-field ``try`` whose ``catch`` only logs,
so a missing group or topic is no resource (``addResourceAndPerm`` skips null) and the processor decides.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.acl.permission import PUB, SUB
from broker.acl.plain_config import RETRY_PREFIX
from remoting.codec.bodies import HeartbeatData
from remoting.codec.codes import RequestCode
from remoting.codec.command import RemotingCommand
from remoting.codec.errors import CodecError

Needed = dict[str, int]


class ResourceError(ValueError):
    """The request's fields or body could not be read; the message is what RocketMQ's decoder says."""


def _add(needed: Needed, resource: str | None, perm: int) -> None:
    if resource is not None:
        needed[resource] = perm


def _group(group: str | None) -> str | None:
    return None if group is None else RETRY_PREFIX + group


def _send(topic_key: str, group_key: str) -> Callable[[RemotingCommand, Needed], None]:
    def needs(cmd: RemotingCommand, needed: Needed) -> None:
        topic = cmd.ext_fields.get(topic_key)
        if topic is not None and topic.startswith(RETRY_PREFIX):
            _add(needed, _group(cmd.ext_fields.get(group_key)), SUB)
            _add(needed, topic, SUB)
        else:
            _add(needed, topic, PUB)

    return needs


def _send_back(cmd: RemotingCommand, needed: Needed) -> None:
    _add(needed, _group(cmd.ext_fields.get("group")), SUB)


def _pull(cmd: RemotingCommand, needed: Needed) -> None:
    _add(needed, cmd.ext_fields.get("topic"), SUB)
    _add(needed, _group(cmd.ext_fields.get("consumerGroup")), SUB)


def _recall(cmd: RemotingCommand, needed: Needed) -> None:
    _add(needed, cmd.ext_fields.get("topic"), PUB)


def _query(cmd: RemotingCommand, needed: Needed) -> None:
    _add(needed, cmd.ext_fields.get("topic"), SUB)


def _heartbeat(cmd: RemotingCommand, needed: Needed) -> None:
    try:
        data = HeartbeatData.decode(cmd.body)
    except CodecError as exc:
        raise ResourceError(str(exc)) from None
    for consumer in data.consumer_data_set:
        _add(needed, _group(consumer.group_name), SUB)
        for subscription in consumer.subscription_data_set:
            _add(needed, subscription.topic, SUB)


def _unregister(cmd: RemotingCommand, needed: Needed) -> None:
    _add(needed, _group(cmd.ext_fields.get("consumerGroup")), SUB)


def _consumer_list(cmd: RemotingCommand, needed: Needed) -> None:
    _add(needed, _group(cmd.ext_fields.get("consumerGroup")), SUB)


def _update_offset(cmd: RemotingCommand, needed: Needed) -> None:
    fields = cmd.ext_fields
    # Nothing is required: 4.9.8's decodeCommandCustomHeader only logs a missing field or a number that
    # Integer.parseInt / Long.parseLong refuses, so the ACL parse admits it and the offset processor decides.
    _add(needed, _group(fields.get("consumerGroup")), SUB)
    _add(needed, fields.get("topic"), SUB)


_RULES: dict[int, Callable[[RemotingCommand, Needed], None]] = {
    RequestCode.SEND_MESSAGE: _send("topic", "group"),
    RequestCode.SEND_MESSAGE_V2: _send("b", "a"),
    RequestCode.SEND_BATCH_MESSAGE: _send("b", "a"),
    RequestCode.SEND_REPLY_MESSAGE: _send("topic", "group"),
    RequestCode.SEND_REPLY_MESSAGE_V2: _send("b", "a"),
    RequestCode.RECALL_MESSAGE: _recall,
    RequestCode.CONSUMER_SEND_MSG_BACK: _send_back,
    RequestCode.PULL_MESSAGE: _pull,
    # RocketMQ 5.3.3's headers: SUB on their topic and group (@RocketMQAction / @RocketMQResource on
    # remoting/src/main/java/org/apache/rocketmq/remoting/protocol/header/PopMessageRequestHeader.java and the rest;
    # BATCH_ACK_MESSAGE has no header, so no resource).
    RequestCode.POP_MESSAGE: _pull,
    RequestCode.ACK_MESSAGE: _pull,
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: _pull,
    RequestCode.NOTIFICATION: _pull,
    RequestCode.PEEK_MESSAGE: _pull,
    RequestCode.POLLING_INFO: _pull,  # Action.GET in 5.3.3; ACL 1.0 has no GET: SUB
    RequestCode.QUERY_MESSAGE: _query,
    RequestCode.HEART_BEAT: _heartbeat,
    RequestCode.UNREGISTER_CLIENT: _unregister,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: _consumer_list,
    RequestCode.UPDATE_CONSUMER_OFFSET: _update_offset,
}


def needed_resources(cmd: RemotingCommand) -> Needed:
    """``{resource: PUB or SUB}`` for ``cmd`` (see the module docstring). Raises :class:`ResourceError`."""
    needed: Needed = {}
    rule = _RULES.get(cmd.code)
    if rule is not None:
        rule(cmd, needed)
    return needed
