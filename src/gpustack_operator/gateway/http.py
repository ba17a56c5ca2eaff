"""The gateway's HTTP API (contract §9) on aiohttp: subscriptions, lists, and watches.

- `POST /workers?cluster=<c>[&cluster=…][&force=true][&gvk=worker.gpustack.ai/v1/<Kind>…]`, or the same in a
  JSON body `{token, force, clusters, gvks}` (query and body are merged); no cluster is a 400.
  `DELETE /workers?cluster=<c>` (or body `{clusters}`) unsubscribes. `GET /workers` lists their states.
- `GET /<plural>?cluster=…&cluster=…[&namespace=][&aggregated=true]` answers from the informer caches:
  `{kind, clusters: [state of each], items: [{cluster, object}]}`; a cluster that is not synced (or not
  subscribed) contributes no items and says why in `clusters`, never silently missing. No cluster named:
  every subscribed one. `aggregated=true` (instancetypes only) answers AggregatedInstanceTypes.
- `watch=true` streams `{type, cluster, object}` events: first a STATUS event per cluster and an ADDED
  per cached object of the synced ones, then every change, as newline-delimited JSON (chunked) or, when
  the request asks to upgrade, one websocket text message per event. DELETED with a null object means
  "drop all of this cluster's objects of this kind" (unsubscribed); STATUS events follow state changes.
Unknown query parameters and malformed bodies are a 400 with a message.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from .aggregate import aggregate
from .events import Delivery, Event, Subscription, encode
from .fleet import Fleet
from .kinds import GROUP_VERSION, KINDS, PLURALS

__all__ = ["BadRequestError", "add_routes"]

log = logging.getLogger(__name__)

WORKERS_PARAMS = frozenset({"cluster", "force", "gvk", "token"})
LIST_PARAMS = frozenset({"cluster", "watch", "aggregated", "namespace"})


class BadRequestError(ValueError):
    """Bad input: answered 400 with the message."""


def _bad(message: str) -> web.Response:
    return web.json_response(
        {"kind": "Status", "status": "Failure", "code": 400, "message": message}, status=400
    )


def _bool(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).lower()
    if text in ("true", "1", ""):
        return True
    if text in ("false", "0"):
        return False
    raise BadRequestError(f"{name} must be true or false, got {value!r}")


def _check_params(query: Mapping[str, str], allowed: frozenset[str]) -> None:
    unknown = sorted(set(query) - allowed)
    if unknown:
        raise BadRequestError(
            f"unknown query parameter(s): {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})"
        )


def _kind_of_gvk(text: str) -> str:
    group_version, _, kind = text.rpartition("/")
    if group_version != GROUP_VERSION or kind not in KINDS:
        kinds = ", ".join(KINDS)
        raise BadRequestError(f"gvk {text!r}: want {GROUP_VERSION}/<Kind> with Kind one of {kinds}")
    return kind


async def _subscription_request(request: web.Request) -> dict[str, Any]:
    """The merged query and body of POST/DELETE /workers."""
    _check_params(request.query, WORKERS_PARAMS)
    body: Any = {}
    if request.can_read_body:
        raw = await request.read()
        if raw.strip():
            try:
                body = json.loads(raw)
            except ValueError as e:
                raise BadRequestError(f"body is not JSON: {e}") from e
            if not isinstance(body, dict):
                raise BadRequestError("body must be a JSON object {token, force, clusters, gvks}")
            unknown = sorted(set(body) - {"token", "force", "clusters", "gvks"})
            if unknown:
                raise BadRequestError(f"unknown body field(s): {', '.join(unknown)}")
    clusters = list(request.query.getall("cluster", []))
    body_clusters = body.get("clusters") or []
    if not isinstance(body_clusters, list) or not all(isinstance(c, str) for c in body_clusters):
        raise BadRequestError("clusters must be a list of cluster names")
    clusters += body_clusters
    clusters = [c for c in dict.fromkeys(clusters) if c]
    if not clusters:
        raise BadRequestError('cluster is required: ?cluster=<name> or a body {"clusters": [...]}')
    gvks = list(request.query.getall("gvk", [])) + list(body.get("gvks") or [])
    token = body.get("token") or request.query.get("token")
    if token is not None and not isinstance(token, str):
        raise BadRequestError("token must be a string")
    force = _bool("force", body.get("force", request.query.get("force", "false")))
    return {
        "clusters": clusters,
        "kinds": [_kind_of_gvk(str(g)) for g in gvks],
        "token": token,
        "force": force,
    }


def add_routes(app: web.Application, fleet: Fleet) -> None:
    """Register the API's routes on `app`."""

    async def subscribe(request: web.Request) -> web.Response:
        try:
            req = await _subscription_request(request)
        except BadRequestError as e:
            return _bad(str(e))
        started = []
        for name in req["clusters"]:
            if await fleet.subscribe(name, token=req["token"], force=req["force"], kinds=req["kinds"]):
                started.append(name)
        return web.json_response({"started": started, "clusters": [fleet.status(c) for c in req["clusters"]]})

    async def unsubscribe(request: web.Request) -> web.Response:
        try:
            req = await _subscription_request(request)
        except BadRequestError as e:
            return _bad(str(e))
        removed = [name for name in req["clusters"] if await fleet.unsubscribe(name)]
        return web.json_response({"removed": removed})

    async def workers(request: web.Request) -> web.Response:
        return web.json_response({"clusters": [fleet.status(c) for c in fleet.names(())]})

    app.router.add_post("/workers", subscribe)
    app.router.add_delete("/workers", unsubscribe)
    app.router.add_get("/workers", workers)
    for plural, kind in PLURALS.items():
        app.router.add_get(f"/{plural}", _lister(fleet, kind))


def _lister(fleet: Fleet, kind: str) -> Any:
    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            _check_params(request.query, LIST_PARAMS)
            watch = _bool("watch", request.query.get("watch", "false"))
            aggregated = _bool("aggregated", request.query.get("aggregated", "false"))
            if aggregated and kind != "InstanceType":
                raise BadRequestError("aggregated=true is only for instancetypes")
            if aggregated and watch:
                raise BadRequestError("aggregated=true with watch=true is not built: list again on change")
        except BadRequestError as e:
            return _bad(str(e))
        names = fleet.names(request.query.getall("cluster", []))
        namespace = request.query.get("namespace") or None
        if watch:
            return await _watch(request, fleet, kind, names, namespace)
        items = []
        for name in names:
            watch_ = fleet.clusters.get(name)
            for obj in (watch_.objects(kind, namespace) if watch_ else None) or ():
                items.append((name, obj))
        body: dict[str, Any] = {"kind": f"{kind}List", "clusters": [fleet.status(n) for n in names]}
        if aggregated:
            body["kind"] = "AggregatedInstanceTypeList"
            body["items"] = aggregate(items)
        else:
            body["items"] = [{"cluster": c, "object": o} for c, o in items]
        return web.json_response(body)

    return handler


async def _watch(
    request: web.Request, fleet: Fleet, kind: str, names: list[str], namespace: str | None
) -> web.StreamResponse:
    # Subscribe and take the snapshot with no await between: no event is lost or told twice.
    sub = fleet.hub.subscribe(kind, names)
    initial: list[Event] = [Event(type="STATUS", cluster=n, object=fleet.status(n)) for n in names]
    for name in names:
        watch_ = fleet.clusters.get(name)
        for obj in (watch_.objects(kind, namespace) if watch_ else None) or ():
            initial.append(Event(type="ADDED", cluster=name, object=obj))
    try:
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await _websocket(request, sub, initial, namespace)
        return await _ndjson(request, sub, initial, namespace)
    finally:
        fleet.hub.unsubscribe(sub)


def _in_namespace(event: Event, namespace: str | None) -> bool:
    obj = event["object"]
    if namespace is None or event["type"] == "STATUS" or obj is None:
        return True
    return bool((obj.get("metadata") or {}).get("namespace") == namespace)


async def _events(sub: Subscription, initial: list[Event], namespace: str | None) -> Any:
    """The stream's deliveries: the initial ones (encoded for this stream), then the Hub's."""
    for event in initial:
        yield event, encode(event)
    while (delivery := await sub.next()) is not None:
        if _in_namespace(delivery[0], namespace):
            yield delivery


async def _ndjson(
    request: web.Request, sub: Subscription, initial: list[Event], namespace: str | None
) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    delivery: Delivery
    try:
        async for delivery in _events(sub, initial, namespace):
            await resp.write(delivery[1])
    except ConnectionResetError:  # the client went away mid-stream: nothing to tell it
        log.debug("watch of %s: client gone", sub.kind)
    return resp


async def _websocket(
    request: web.Request, sub: Subscription, initial: list[Event], namespace: str | None
) -> web.StreamResponse:
    ws = web.WebSocketResponse(heartbeat=30.0)
    await ws.prepare(request)
    try:
        async for _, line in _events(sub, initial, namespace):
            if ws.closed:
                break
            await ws.send_str(line[:-1].decode())
    except ConnectionResetError:
        log.debug("websocket watch of %s: client gone", sub.kind)
    await ws.close()
    return ws
