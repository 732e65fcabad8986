"""The JSON endpoints behind the pages, under ``/api/``. Each reads its arguments from the query string (GET,
DELETE) or a JSON body (POST), calls one function of the page modules with the app's admin client, and answers JSON.

Errors: a missing or malformed argument answers 400; a body that is not ``application/json`` 415 (so that a
cross-site form or no-preflight fetch cannot change anything); a refusal by a broker or name server answers 502 with
its response code and remark; a client-side failure (no route, no name server, a timeout, a reply that does not
decode) 502 with its message; an ACL edit some broker refused or did not answer 502 with every broker's outcome (and
the first refusal's code and remark); a message not found 404. The body is always ``{"error": {...}}``
(:func:`error_response`), never a stack trace.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from client.admin import Admin
from client.errors import MQBrokerError, MQClientError
from dashboard import acl, cluster, dlq, groups, messages, topics
from dashboard.auth import check_login, login, logout, session_user
from dashboard.history import is_day
from dashboard.ops import AdminSwitch
from dashboard.proxy import ProxyAddrs
from dashboard.sampler import Sampler, broker_series, busiest_topics, topic_series
from dashboard.settings import DashboardSettings
from dashboard.trace import default_finder, trace_of
from remoting.codec.errors import CodecError
from remoting.errors import RemotingError, sole_exception

#: The exceptions :func:`error_response` answers; anything else is a bug (a plain 500, no trace shown).
HANDLED = (MQClientError, RemotingError, OSError, ValueError)


class BadRequest(ValueError):
    """A missing or malformed argument; the message names it."""


class UnsupportedMediaType(BadRequest):
    """A request body sent as anything but ``application/json`` (answered 415)."""


def error_response(exc: Exception) -> JSONResponse:
    """The JSON error for ``exc`` (see the module docstring)."""
    if isinstance(exc, MQBrokerError):
        body = {"code": exc.code, "remark": exc.remark, "address": exc.address, "message": str(exc)}
        return JSONResponse({"error": body}, status_code=502)
    if isinstance(exc, acl.EditFailed):  # every broker's outcome; the first refusal's code and remark, if any
        edit: dict[str, Any] = {"message": str(exc), "brokers": exc.outcomes}
        if exc.refusal is not None:
            edit.update(acl.error_body(exc.refusal), detail=str(exc), message=str(exc))
        return JSONResponse({"error": edit}, status_code=502)
    bad_argument = isinstance(exc, ValueError) and not isinstance(exc, CodecError)  # CodecError: a peer's reply
    status = 404 if isinstance(exc, messages.NotFoundError) else 400 if bad_argument else 502
    status = 415 if isinstance(exc, UnsupportedMediaType) else status
    return JSONResponse({"error": {"message": str(exc) or type(exc).__name__}}, status_code=status)


Endpoint = Callable[[Request], Awaitable[Response]]


def answering_errors(endpoint: Endpoint) -> Endpoint:
    """``endpoint`` with the errors of :data:`HANDLED` (also when raised in a task group) answered as JSON."""

    async def wrapped(request: Request) -> Response:
        try:
            return await endpoint(request)
        except (*HANDLED, BaseExceptionGroup) as exc:
            inner = sole_exception(exc)
            if not isinstance(inner, HANDLED):
                raise
            return error_response(inner)

    return wrapped


def _admin(request: Request) -> Admin:
    admin: Admin = request.app.state.admin
    return admin


def _arg(request: Request, name: str) -> str:
    value = request.query_params.get(name, "").strip()
    if not value:
        raise BadRequest(f"missing argument {name!r}")
    return value


#: The bits of Java's integer types.
_JAVA_BITS = {"int": 32, "long": 64}


def _int(value: Any, name: str, bits: int = 64) -> int:
    """An integer argument that fits the Java field it fills (``bits``: 32 for an ``int``, 64 for a ``long``), as
    Jackson binds rocketmq-dashboard's; BadRequest for anything else, JSON's ``Infinity`` (OverflowError in ``int``)
    included."""
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        raise BadRequest(f"{name} must be an integer, got {value!r}") from None
    if not -(1 << (bits - 1)) <= number < 1 << (bits - 1):
        raise BadRequest(f"{name} {number} is out of range for a {bits}-bit integer")
    return number


async def _body(request: Request) -> dict[str, Any]:
    """The JSON object the request carries; only an ``application/json`` one, which a cross-site form cannot send."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        raise UnsupportedMediaType(f"the request body must be application/json, not {media_type or 'untyped'}")
    try:
        body = await request.json()
    except ValueError:
        raise BadRequest("the request body must be a JSON object") from None
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    return body


def _flag(body: dict[str, Any], name: str) -> bool:
    """A yes/no field: a JSON boolean or the text ``true``/``false`` (any case); absent or null is false (Jackson's
    null for a primitive ``boolean``, as rocketmq-dashboard's request models)."""
    value = body.get(name)
    if value is None:
        return False
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if not isinstance(value, bool):
        raise BadRequest(f"{name} must be true or false, got {value!r}")
    return value


def _names(body: dict[str, Any], key: str) -> list[str]:
    """A list of names (``clusterNameList``...): absent or null is empty, blank entries are dropped; BadRequest for
    anything but a list of texts."""
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRequest(f"{key} must be a list of names, got {value!r}")
    return [v.strip() for v in value if v.strip()]


def _field(body: dict[str, Any], name: str) -> str:
    value = str(body.get(name) or "").strip()
    if not value:
        raise BadRequest(f"missing field {name!r}")
    return value


# -- cluster -------------------------------------------------------------------------------------------------


async def get_cluster(request: Request) -> JSONResponse:
    return JSONResponse(await cluster.cluster_overview(_admin(request)))


async def get_broker(request: Request) -> JSONResponse:
    return JSONResponse(await cluster.broker_detail(_admin(request), _arg(request, "addr")))


# -- topics --------------------------------------------------------------------------------------------------


async def get_topics(request: Request) -> JSONResponse:
    return JSONResponse({"topics": await topics.topic_list(_admin(request))})


async def get_topic(request: Request) -> JSONResponse:
    return JSONResponse(await topics.topic_detail(_admin(request), _arg(request, "topic")))


async def post_topic(request: Request) -> JSONResponse:
    """rocketmq-dashboard's ``/topic/createOrUpdate.do``: the brokers are ``clusterNameList`` and ``brokerNameList``
    (or the older single ``cluster``, or ``brokerAddr``); see :func:`dashboard.topics.create_topic` for none and for
    ``messageType``."""
    body = await _body(request)
    cluster = str(body.get("cluster") or "").strip()
    written = await topics.create_topic(
        _admin(request),
        _field(body, "topic"),
        read_queue_nums=_int(body.get("readQueueNums", 4), "readQueueNums", 32),
        write_queue_nums=_int(body.get("writeQueueNums", 4), "writeQueueNums", 32),
        perm=_int(body.get("perm", 6), "perm", 32),
        order=_flag(body, "order"),
        clusters=_names(body, "clusterNameList") + ([cluster] if cluster else []),
        brokers=_names(body, "brokerNameList"),
        broker_addr=str(body.get("brokerAddr") or "") or None,
        message_type=str(body.get("messageType") or ""),
    )
    return JSONResponse(written)


async def get_topic_config(request: Request) -> JSONResponse:
    topic = _arg(request, "topic")
    return JSONResponse({"topic": topic, "brokers": await topics.topic_configs(_admin(request), topic)})


async def delete_topic(request: Request) -> JSONResponse:
    topic = _arg(request, "topic")
    await _admin(request).delete_topic(topic)
    return JSONResponse({"deleted": topic})


async def post_topic_message(request: Request) -> JSONResponse:
    body = await _body(request)
    result = await topics.send_test_message(
        _admin(request),
        _field(body, "topic"),
        str(body.get("body") or ""),
        str(body.get("tags") or "") or None,
        str(body.get("keys") or "") or None,
        trace=_flag(body, "traceEnabled"),
    )
    return JSONResponse(result)


# -- consumer groups and producers ---------------------------------------------------------------------------


async def get_groups(request: Request) -> JSONResponse:
    rows, unread = await groups.group_list(_admin(request))
    return JSONResponse({"groups": rows, "unreadBrokers": unread})


async def get_group(request: Request) -> JSONResponse:
    return JSONResponse(await groups.group_detail(_admin(request), _arg(request, "group")))


async def get_group_client(request: Request) -> JSONResponse:
    jstack = request.query_params.get("jstack", "").strip().lower() == "true"
    group, client_id = _arg(request, "group"), _arg(request, "clientId")
    return JSONResponse(await groups.client_running_info(_admin(request), group, client_id, jstack=jstack))


async def post_group_reset(request: Request) -> JSONResponse:
    body = await _body(request)
    timestamp = _int(body.get("timestamp"), "timestamp")
    result = await groups.reset_offsets(_admin(request), _field(body, "group"), _field(body, "topic"), timestamp)
    return JSONResponse(result)


async def delete_group(request: Request) -> JSONResponse:
    group = _arg(request, "group")
    return JSONResponse({"deleted": group, "brokers": await groups.delete_group(_admin(request), group)})


async def get_group_config(request: Request) -> JSONResponse:
    group = _arg(request, "group")
    return JSONResponse({"group": group, "brokers": await groups.group_configs(_admin(request), group)})


async def post_group_config(request: Request) -> JSONResponse:
    """rocketmq-dashboard's ``/consumer/createOrUpdate.do``: ``subscriptionGroupConfig`` (its ``groupName`` and the
    settings of :data:`dashboard.groups.EDITABLE` it carries), ``clusterNameList``, ``brokerNameList``."""
    body = await _body(request)
    config = body.get("subscriptionGroupConfig")
    if not isinstance(config, dict):
        raise BadRequest("subscriptionGroupConfig must be a JSON object")
    changes: dict[str, Any] = {}
    for key, (field, kind) in groups.EDITABLE.items():
        if config.get(key) is not None:
            changes[field] = _flag(config, key) if kind == "boolean" else _int(config[key], key, _JAVA_BITS[kind])
    written = await groups.update_group(
        _admin(request),
        _field(config, "groupName"),
        changes,
        clusters=_names(body, "clusterNameList"),
        brokers=_names(body, "brokerNameList"),
    )
    return JSONResponse(written)


async def post_group_delete(request: Request) -> JSONResponse:
    """rocketmq-dashboard's ``/consumer/deleteSubGroup.do``: ``groupName`` and ``brokerNameList``."""
    body = await _body(request)
    group = _field(body, "groupName")
    result = await groups.delete_group_on(_admin(request), group, _names(body, "brokerNameList"))
    return JSONResponse({"deleted": group, **result})


async def get_producers(request: Request) -> JSONResponse:
    group, topic = _arg(request, "group"), _arg(request, "topic")
    connections = await groups.producer_connections(_admin(request), group, topic)
    return JSONResponse({"group": group, "topic": topic, "connections": connections})


async def get_all_producers(request: Request) -> JSONResponse:
    return JSONResponse({"producers": await groups.all_producers(_admin(request))})


# -- messages ------------------------------------------------------------------------------------------------


async def get_messages_by_time(request: Request) -> JSONResponse:
    now = int(time.time() * 1000)
    begin = _int(request.query_params.get("begin", now - 3_600_000), "begin")
    end = _int(request.query_params.get("end", now), "end")
    return JSONResponse(await messages.by_time(_admin(request), _arg(request, "topic"), begin, end))


async def get_messages_by_key(request: Request) -> JSONResponse:
    found = await messages.by_key(_admin(request), _arg(request, "topic"), _arg(request, "key"))
    return JSONResponse({"messages": found})


async def get_message(request: Request) -> JSONResponse:
    admin = _admin(request)
    msg = await messages.find(admin, _arg(request, "id"), request.query_params.get("topic", "").strip() or None)
    return JSONResponse({**messages.detail(msg), "consumers": await messages.consume_states(admin, msg)})


async def get_message_trace(request: Request) -> JSONResponse:
    """The trace from the app's trace topics, or from the ``traceTopic`` the request names (rocketmq-dashboard's
    ``viewMessageTraceGraph.query`` takes it with each request)."""
    topic = request.query_params.get("traceTopic", "").strip()
    finder = default_finder(topic) if topic else request.app.state.trace_finder
    return JSONResponse(await trace_of(finder, _admin(request), _arg(request, "id")))


async def post_message_resend(request: Request) -> JSONResponse:
    body = await _body(request)
    client_id = str(body.get("clientId") or "") or None
    result = await messages.resend(_admin(request), _field(body, "group"), _field(body, "offsetMsgId"), client_id)
    return JSONResponse(result)


# -- dead letters -------------------------------------------------------------------------------------------


def _ids(body: dict[str, Any], name: str) -> list[str]:
    """A non-empty list of message ids."""
    value = body.get(name)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise BadRequest(f"{name} must be a non-empty list of message ids")
    return [v.strip() for v in value]


async def get_dlq_messages(request: Request) -> JSONResponse:
    now = int(time.time() * 1000)
    begin = _int(request.query_params.get("begin", now - 3 * 3_600_000), "begin")
    end = _int(request.query_params.get("end", now), "end")
    return JSONResponse(await dlq.by_time(_admin(request), _arg(request, "group"), begin, end))


def _origins(body: dict[str, Any]) -> list[tuple[str, str | None]]:
    """The originals to resend: ``messages``, a non-empty list of ``{"originMsgId", "originTopic"}`` (the topic
    optional), else ``originMsgIds`` (offset msgIds alone)."""
    if "messages" not in body:
        return [(msg_id, None) for msg_id in _ids(body, "originMsgIds")]
    items = body["messages"]
    if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items):
        raise BadRequest("messages must be a non-empty list of {originMsgId, originTopic}")
    origins: list[tuple[str, str | None]] = []
    for item in items:
        msg_id, topic = item.get("originMsgId"), item.get("originTopic")
        if not isinstance(msg_id, str) or not msg_id.strip() or not isinstance(topic, str | None):
            raise BadRequest("each of messages needs an originMsgId (and an originTopic, if any, as text)")
        origins.append((msg_id.strip(), (topic or "").strip() or None))
    return origins


async def post_dlq_resend(request: Request) -> JSONResponse:
    body = await _body(request)
    client_id = str(body.get("clientId") or "").strip() or None
    results = await dlq.resend(_admin(request), _field(body, "group"), _origins(body), client_id)
    return JSONResponse({"results": results})


async def post_dlq_export(request: Request) -> Response:
    """One dead letter's workbook (rocketmq-dashboard's ``exportDlqMessage.do``, which its ``role-permission.yml``
    allows a Normal user); several ids are a 400: they are the batch, :func:`post_dlq_export_batch`. A message that
    cannot be read is the error (404 when there is no such message), not a workbook, as rocketmq-dashboard."""
    body = await _body(request)
    ids = _ids(body, "msgIds")
    if len(ids) != 1:
        raise BadRequest("msgIds must name one message here; export several with /api/dlq/export/batch")
    return await _workbook(request, body, ids, "dlq", strict=True)


async def post_dlq_export_batch(request: Request) -> Response:
    """The workbook of several dead letters (rocketmq-dashboard's ``batchExportDlqMessage.do``, which its
    ``role-permission.yml`` does not allow a Normal user)."""
    body = await _body(request)
    return await _workbook(request, body, _ids(body, "msgIds"), "dlqs")


async def _workbook(
    request: Request, body: dict[str, Any], ids: list[str], name: str, *, strict: bool = False
) -> Response:
    """The workbook ``name``.xlsx, its sheet ``name``, as rocketmq-dashboard's ``ExcelUtil.writeExcel`` names both."""
    workbook = await dlq.export(_admin(request), _field(body, "group"), ids, strict=strict, name=name)
    disposition = f'attachment; filename="{name}.xlsx"'
    return Response(workbook, media_type=dlq.XLSX, headers={"Content-Disposition": disposition})


# -- ops: the name servers ----------------------------------------------------------------------------------


def _ops(request: Request) -> AdminSwitch:
    switch: AdminSwitch = request.app.state.ops
    return switch


async def get_ops(request: Request) -> JSONResponse:
    return JSONResponse(_ops(request).home())


async def post_ops_namesrv(request: Request) -> JSONResponse:
    """rocketmq-dashboard's ``/ops/updateNameSvrAddr.do``: ``nameSvrAddrList``, the name servers to use now."""
    body = await _body(request)
    await _ops(request).use_namesrv(_field(body, "nameSvrAddrList"))
    return JSONResponse(_ops(request).home())


async def post_ops_namesrv_add(request: Request) -> JSONResponse:
    """rocketmq-dashboard's ``/ops/addNameSvrAddr.do``: ``newNamesrvAddr`` joins the list, not used yet."""
    body = await _body(request)
    _ops(request).add_namesrv(_field(body, "newNamesrvAddr"))
    return JSONResponse(_ops(request).home())


async def post_ops_tls(request: Request) -> JSONResponse:
    """rocketmq-dashboard's ``/ops/updateUseTLS.do``: ``useTLS``."""
    body = await _body(request)
    await _ops(request).use_tls(_flag(body, "useTLS"))
    return JSONResponse(_ops(request).home())


async def post_ops_vip(request: Request) -> JSONResponse:
    """rocketmq-dashboard's ``/ops/updateIsVIPChannel.do``: ``useVIPChannel``."""
    body = await _body(request)
    await _ops(request).use_vip_channel(_flag(body, "useVIPChannel"))
    return JSONResponse(_ops(request).home())


# -- proxy ---------------------------------------------------------------------------------------------------


def _proxies(request: Request) -> ProxyAddrs:
    proxies: ProxyAddrs = request.app.state.proxies
    return proxies


async def get_proxy(request: Request) -> JSONResponse:
    """rocketmq-dashboard's ``/proxy/homePage.query``."""
    return JSONResponse(_proxies(request).home())


async def post_proxy_add(request: Request) -> JSONResponse:
    """rocketmq-dashboard's ``/proxy/addProxyAddr.do``: ``newProxyAddr`` joins the list."""
    _proxies(request).add(_field(await _body(request), "newProxyAddr"))
    return JSONResponse(_proxies(request).home())


async def post_proxy_current(request: Request) -> JSONResponse:
    """rocketmq-dashboard's ``/proxy/updateProxyAddr.do``: ``proxyAddr`` is the current one."""
    _proxies(request).use(_field(await _body(request), "proxyAddr"))
    return JSONResponse(_proxies(request).home())


# -- charts --------------------------------------------------------------------------------------------------


async def _chart_day(request: Request) -> tuple[Sampler, str]:
    """The sampler and the day asked for (``date=yyyy-MM-dd``, as rocketmq-dashboard's ``broker.query``; today when
    absent); a date of another shape is a 400 (it names the file read)."""
    sampler: Sampler = request.app.state.sampler
    day = request.query_params.get("date", "").strip() or sampler.today()
    if not is_day(day):
        raise BadRequest(f"date {day!r} is not yyyy-MM-dd")
    return sampler, day


async def get_chart_brokers(request: Request) -> JSONResponse:
    """rocketmq-dashboard's ``/dashboard/broker.query``."""
    sampler, day = await _chart_day(request)
    brokers = await sampler.broker_lines(day)
    answer = {"interval": sampler.interval, "samples": sampler.samples, "collecting": request.app.state.collecting}
    return JSONResponse({**answer, "date": day, "today": sampler.today(), "series": broker_series(brokers)})


async def get_chart_topics(request: Request) -> JSONResponse:
    """rocketmq-dashboard's ``/dashboard/topic.query``."""
    sampler, day = await _chart_day(request)
    topics = await sampler.topic_lines(day)
    topic = request.query_params.get("topic", "").strip()
    answer: dict[str, Any] = {"interval": sampler.interval, "samples": sampler.samples, "date": day}
    answer["busiest"] = busiest_topics(topics)
    answer["topics"] = sorted(topics)
    if topic:
        answer["topic"] = topic
        answer["series"] = topic_series(topics, topic)
    return JSONResponse(answer)


# -- ACL -----------------------------------------------------------------------------------------------------


def _may_change(request: Request) -> bool:
    """Whether this request's user may change things (and see secret keys): anyone without a login, else only an
    administrator (rocketmq-dashboard's ``@Permission`` and its ``getAclConfig(excludeSecretKey)``)."""
    settings: DashboardSettings = request.app.state.settings
    if not settings.login_required:
        return True
    user = session_user(request)
    return user is not None and user.admin


def _perm(value: Any, name: str, *, required: bool = False) -> str | None:
    text = str(value or "").strip()
    if not text and not required:
        return None
    if text not in acl.PERMS:
        raise BadRequest(f"{name} must be one of {', '.join(acl.PERMS)}, got {value!r}")
    return text


def _texts(body: dict[str, Any], name: str) -> tuple[str, ...]:
    value = body.get(name) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRequest(f"{name} must be a list of texts")
    return tuple(v.strip() for v in value if v.strip())


def _account_change(body: dict[str, Any]) -> acl.AccountChange:
    white = body.get("whiteRemoteAddress")
    return acl.AccountChange(
        access_key=_field(body, "accessKey"),
        secret_key=_field(body, "secretKey"),
        admin=_flag(body, "admin"),
        white_remote_address=None if white is None else str(white).strip(),
        default_topic_perm=_perm(body.get("defaultTopicPerm"), "defaultTopicPerm"),
        default_group_perm=_perm(body.get("defaultGroupPerm"), "defaultGroupPerm"),
        topic_perms=_texts(body, "topicPerms"),
        group_perms=_texts(body, "groupPerms"),
    )


async def get_acl(request: Request) -> JSONResponse:
    settings: DashboardSettings = request.app.state.settings
    writable = _may_change(request)
    overview = await acl.acl_overview(_admin(request), show_secrets=writable)
    return JSONResponse({**overview, "writable": writable, "signedAs": settings.access_key, "perms": acl.PERMS})


async def post_acl_account_add(request: Request) -> JSONResponse:
    change = _account_change(await _body(request))
    return JSONResponse({"accessKey": change.access_key, "brokers": await acl.add_account(_admin(request), change)})


async def post_acl_account(request: Request) -> JSONResponse:
    change = _account_change(await _body(request))
    return JSONResponse({"accessKey": change.access_key, "brokers": await acl.update_account(_admin(request), change)})


async def delete_acl_account(request: Request) -> JSONResponse:
    access_key = _arg(request, "accessKey")
    return JSONResponse({"accessKey": access_key, "brokers": await acl.delete_account(_admin(request), access_key)})


async def post_acl_permission(request: Request) -> JSONResponse:
    body = await _body(request)
    kind, resource = _field(body, "kind"), _field(body, "resource")
    perm = _perm(body.get("perm"), "perm", required=True)
    done = await acl.set_permission(_admin(request), _field(body, "accessKey"), kind, resource, perm)
    return JSONResponse({"brokers": done})


async def delete_acl_permission(request: Request) -> JSONResponse:
    kind, resource = _arg(request, "kind"), _arg(request, "resource")
    done = await acl.set_permission(_admin(request), _arg(request, "accessKey"), kind, resource, None)
    return JSONResponse({"brokers": done})


async def post_acl_white(request: Request) -> JSONResponse:
    addresses = list(_texts(await _body(request), "addresses"))
    return JSONResponse({"addresses": addresses, "brokers": await acl.set_global_white(_admin(request), addresses)})


# -- login ---------------------------------------------------------------------------------------------------


async def post_login(request: Request) -> JSONResponse:
    settings: DashboardSettings = request.app.state.settings
    body = await _body(request)
    user = check_login(settings.users_path, str(body.get("username") or ""), str(body.get("password") or ""))
    if user is None:
        return JSONResponse({"error": {"message": "wrong user name or password"}}, status_code=401)
    login(request, user)
    return JSONResponse({"user": user.name, "admin": user.admin})


async def post_logout(request: Request) -> JSONResponse:
    logout(request)
    return JSONResponse({"user": None})


ROUTES = [
    Route("/api/cluster", answering_errors(get_cluster)),
    Route("/api/broker", answering_errors(get_broker)),
    Route("/api/topics", answering_errors(get_topics)),
    Route("/api/topics", answering_errors(post_topic), methods=["POST"]),
    Route("/api/topic", answering_errors(get_topic)),
    Route("/api/topic/config", answering_errors(get_topic_config)),
    Route("/api/topic", answering_errors(delete_topic), methods=["DELETE"]),
    Route("/api/topic/message", answering_errors(post_topic_message), methods=["POST"]),
    Route("/api/groups", answering_errors(get_groups)),
    Route("/api/group", answering_errors(get_group)),
    Route("/api/group", answering_errors(delete_group), methods=["DELETE"]),
    Route("/api/group/client", answering_errors(get_group_client)),
    Route("/api/group/reset", answering_errors(post_group_reset), methods=["POST"]),
    Route("/api/group/config", answering_errors(get_group_config)),
    Route("/api/group/config", answering_errors(post_group_config), methods=["POST"]),
    Route("/api/group/delete", answering_errors(post_group_delete), methods=["POST"]),
    Route("/api/producers", answering_errors(get_producers)),
    Route("/api/producers/all", answering_errors(get_all_producers)),
    Route("/api/messages/time", answering_errors(get_messages_by_time)),
    Route("/api/messages/key", answering_errors(get_messages_by_key)),
    Route("/api/message", answering_errors(get_message)),
    Route("/api/message/trace", answering_errors(get_message_trace)),
    Route("/api/message/resend", answering_errors(post_message_resend), methods=["POST"]),
    Route("/api/dlq", answering_errors(get_dlq_messages)),
    Route("/api/dlq/resend", answering_errors(post_dlq_resend), methods=["POST"]),
    Route("/api/dlq/export", answering_errors(post_dlq_export), methods=["POST"]),
    Route("/api/dlq/export/batch", answering_errors(post_dlq_export_batch), methods=["POST"]),
    Route("/api/charts/brokers", answering_errors(get_chart_brokers)),
    Route("/api/charts/topics", answering_errors(get_chart_topics)),
    Route("/api/acl", answering_errors(get_acl)),
    Route("/api/acl/accounts", answering_errors(post_acl_account_add), methods=["POST"]),
    Route("/api/acl/account", answering_errors(post_acl_account), methods=["POST"]),
    Route("/api/acl/account", answering_errors(delete_acl_account), methods=["DELETE"]),
    Route("/api/acl/permission", answering_errors(post_acl_permission), methods=["POST"]),
    Route("/api/acl/permission", answering_errors(delete_acl_permission), methods=["DELETE"]),
    Route("/api/acl/white", answering_errors(post_acl_white), methods=["POST"]),
    Route("/api/ops", answering_errors(get_ops)),
    Route("/api/ops/namesrv", answering_errors(post_ops_namesrv), methods=["POST"]),
    Route("/api/ops/namesrv/add", answering_errors(post_ops_namesrv_add), methods=["POST"]),
    Route("/api/ops/tls", answering_errors(post_ops_tls), methods=["POST"]),
    Route("/api/ops/vip", answering_errors(post_ops_vip), methods=["POST"]),
    Route("/api/proxy", answering_errors(get_proxy)),
    Route("/api/proxy/add", answering_errors(post_proxy_add), methods=["POST"]),
    Route("/api/proxy/current", answering_errors(post_proxy_current), methods=["POST"]),
    Route("/api/login", answering_errors(post_login), methods=["POST"]),
    Route("/api/logout", answering_errors(post_logout), methods=["POST"]),
]

#: The rocketmq-dashboard URL of each endpoint's action (its controllers' mappings), which its role-permission.yml
#: patterns are matched against (:mod:`dashboard.permissions`). The DLQ export of one message is
#: ``exportDlqMessage.do``, of several ``batchExportDlqMessage.do`` (its default file allows a Normal user the first
#: only); the ACL 1.0 edits are rocketmq-dashboard 1.x's ``/acl/...`` URLs.
DASHBOARD_URLS: dict[tuple[str, str], str] = {
    ("GET", "/api/cluster"): "/cluster/list.query",
    ("GET", "/api/broker"): "/cluster/brokerConfig.query",
    ("GET", "/api/topics"): "/topic/list.query",
    ("POST", "/api/topics"): "/topic/createOrUpdate.do",
    ("GET", "/api/topic"): "/topic/route.query",
    ("GET", "/api/topic/config"): "/topic/examineTopicConfig.query",
    ("DELETE", "/api/topic"): "/topic/deleteTopic.do",
    ("POST", "/api/topic/message"): "/topic/sendTopicMessage.do",
    ("GET", "/api/groups"): "/consumer/groupList.query",
    ("GET", "/api/group"): "/consumer/queryTopicByConsumer.query",
    ("DELETE", "/api/group"): "/consumer/deleteSubGroup.do",
    ("GET", "/api/group/client"): "/consumer/consumerRunningInfo.query",
    ("POST", "/api/group/reset"): "/consumer/resetOffset.do",
    ("GET", "/api/group/config"): "/consumer/examineSubscriptionGroupConfig.query",
    ("POST", "/api/group/config"): "/consumer/createOrUpdate.do",
    ("POST", "/api/group/delete"): "/consumer/deleteSubGroup.do",
    ("GET", "/api/producers"): "/producer/producerConnection.query",
    ("GET", "/api/producers/all"): "/producer/producerConnection.query",
    ("GET", "/api/messages/time"): "/message/queryMessageByTopic.query",
    ("GET", "/api/messages/key"): "/message/queryMessageByTopicAndKey.query",
    ("GET", "/api/message"): "/message/viewMessage.query",
    ("GET", "/api/message/trace"): "/messageTrace/viewMessageTraceGraph.query",
    ("POST", "/api/message/resend"): "/message/consumeMessageDirectly.do",
    ("GET", "/api/dlq"): "/dlqMessage/queryDlqMessageByConsumerGroup.query",
    ("POST", "/api/dlq/resend"): "/dlqMessage/batchResendDlqMessage.do",
    ("POST", "/api/dlq/export"): "/dlqMessage/exportDlqMessage.do",
    ("POST", "/api/dlq/export/batch"): "/dlqMessage/batchExportDlqMessage.do",
    ("GET", "/api/charts/brokers"): "/dashboard/broker.query",
    ("GET", "/api/charts/topics"): "/dashboard/topic.query",
    ("GET", "/api/acl"): "/acl/config.query",
    ("POST", "/api/acl/accounts"): "/acl/add.do",
    ("POST", "/api/acl/account"): "/acl/update.do",
    ("DELETE", "/api/acl/account"): "/acl/delete.do",
    ("POST", "/api/acl/permission"): "/acl/topic/add.do",
    ("DELETE", "/api/acl/permission"): "/acl/perm/delete.do",
    ("POST", "/api/acl/white"): "/acl/white/list/add.do",
    ("GET", "/api/ops"): "/ops/homePage.query",
    ("GET", "/api/proxy"): "/proxy/homePage.query",
    ("POST", "/api/proxy/add"): "/proxy/addProxyAddr.do",
    ("POST", "/api/proxy/current"): "/proxy/updateProxyAddr.do",
    ("POST", "/api/ops/namesrv"): "/ops/updateNameSvrAddr.do",
    ("POST", "/api/ops/namesrv/add"): "/ops/addNameSvrAddr.do",
    ("POST", "/api/ops/tls"): "/ops/updateUseTLS.do",
    ("POST", "/api/ops/vip"): "/ops/updateIsVIPChannel.do",
}
