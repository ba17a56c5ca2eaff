"""A served kind that is a view over a core object of the same name (rules.companions says why).

Every verb goes to the object behind (a Secret, a PersistentVolumeClaim, a StorageClass) through the
worker's client, restricted to the objects labelled as the view's: list and watch add the label to the
client's selector, and get/update/patch/delete answer NotFound for an unlabelled object of that name. The
client's query parameters pass through (selectors, limit/continue, resourceVersion, watch, timeouts,
dryRun, fieldManager, propagationPolicy), so paging, optimistic concurrency, dry runs and watches behave
as on the object behind; its answers are converted back to the view, and its refusals are re-worded to
name the view's resource (a 404 or 409 on `secrets "x"` reads `instancesshpublickeys... "x"`).

Writes: create converts the view (rules.companions validates it, a 422 naming the view's field);
update (PUT) and merge patch read the object behind, build its replacement from the view and write it
conditionally on the resourceVersion (the view's, else the one read), so concurrent writers get a 409;
delete reads it first and deletes with a UID precondition. Only JSON merge patches are accepted (kubectl
edit/patch --type=merge/apply); the others are 415 as for Settings.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from gpustack_operator.api.json import JSONObj, as_mapping
from gpustack_operator.apiserver.discovery import ServedResource
from gpustack_operator.apiserver.negotiation import negotiate
from gpustack_operator.apiserver.registry.generic.cachedreads import decimal
from gpustack_operator.apiserver.registry.generic.crdproxy import (
    WATCH_SLACK,
    decode_json,
    include_object,
    manager_from_user_agent,
    patch_type,
    url_namespace,
    verb_of,
    watch_seconds,
)
from gpustack_operator.apiserver.registry.generic.representation import (
    render_event,
    render_list,
    render_object,
)
from gpustack_operator.apiserver.requestinfo import is_watch
from gpustack_operator.apiserver.status import (
    StatusError,
    bad_request,
    from_kube_error,
    invalid,
    method_not_allowed,
    not_found,
)
from gpustack_operator.apiserver.table import Column
from gpustack_operator.controllerkit.rbac import Rule
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.errors import KubeError
from gpustack_operator.kube.patches import merge_patch
from gpustack_operator.kube.resources import Resource
from gpustack_operator.rules.companions import CompanionError, View

__all__ = ["BackedView", "backed_rules"]

log = logging.getLogger(__name__)

_OURS = frozenset({"includeObject"})
_WRITE_KEYS = frozenset({"dryRun", "fieldManager", "fieldValidation"})
_DELETE_KEYS = frozenset({"dryRun", "gracePeriodSeconds", "propagationPolicy", "orphanDependents"})
_READ_KEYS = frozenset(
    {
        "labelSelector",
        "fieldSelector",
        "limit",
        "continue",
        "resourceVersion",
        "resourceVersionMatch",
        "timeoutSeconds",
        "allowWatchBookmarks",
        "sendInitialEvents",
        "watch",
    }
)


def backed_rules(backing: Resource, *, writes: bool = True) -> tuple[Rule, ...]:
    """What serving a view calls on the objects behind it with the worker's credentials."""
    verbs = ("get", "list", "watch", "create", "update", "delete") if writes else ("get", "list", "watch")
    return (Rule.of(backing, *verbs),)


class BackedView:
    """Handlers for one view kind over `backing`; `add_routes` mounts them."""

    def __init__(
        self,
        client: Client,
        served: ServedResource,
        backing: Resource,
        view: View,
        columns: tuple[Column, ...],
    ) -> None:
        self.client = client
        self.served = served
        self.backing = backing
        self.view = view
        self.columns = columns

    def add_routes(self, router: web.UrlDispatcher) -> None:
        group_version = f"/apis/{self.served.group}/{self.served.version}"
        base = f"{group_version}/{self.served.plural}"
        if self.served.namespaced:
            router.add_route("*", base, self.every_namespace)
            base = f"{group_version}/namespaces/{{namespace}}/{self.served.plural}"
        router.add_route("*", base, self.collection)
        router.add_route("*", base + "/{name}", self.item)

    # ---- routes ------------------------------------------------------------------------------------------
    async def every_namespace(self, request: web.Request) -> web.StreamResponse:
        if request.method in ("GET", "HEAD"):
            return await self.collection(request)
        raise method_not_allowed(verb_of(request.method), self.served.kind)

    async def collection(self, request: web.Request) -> web.StreamResponse:
        if request.method in ("GET", "HEAD"):
            if is_watch(request.query):
                return await self._watch(request)
            return await self._list(request)
        if request.method == "POST":
            return await self._create(request)
        raise method_not_allowed(verb_of(request.method), self.served.kind)

    async def item(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if request.method in ("GET", "HEAD"):
            rep = negotiate(request.headers.get("Accept", ""), is_list=False)
            obj = self.view.to_view(await self._ours(request, name))
            return web.json_response(render_object(rep, obj, self.columns, include_object(request)))
        if request.method == "PUT":
            body = self._checked(decode_json(await request.read()))
            return await self._replace(request, name, body)
        if request.method == "PATCH":
            patch_type(request, self.served)
            patch = decode_json(await request.read())
            if not isinstance(patch, dict):
                raise bad_request("a merge patch must be a JSON object")
            current = self.view.to_view(await self._ours(request, name))
            return await self._replace(request, name, merge_patch(current, patch))
        if request.method == "DELETE":
            return await self._delete(request, name)
        raise method_not_allowed(verb_of(request.method), self.served.kind)

    # ---- reads -------------------------------------------------------------------------------------------
    async def _ours(self, request: web.Request, name: str) -> JSONObj:
        """The object behind `name`, when it is the view's; NotFound otherwise."""
        params = _params(request, {"resourceVersion"}) if request.method in ("GET", "HEAD") else {}
        _check_version(params)
        try:
            obj = await self.client.request(
                "GET", self.backing.path(name, url_namespace(request)), params=params
            )
        except KubeError as e:
            raise self._reworded(e, name) from None
        if not self.view.owns(obj):
            raise not_found(self.served.plural, self.served.group, name)
        return obj

    async def _list(self, request: web.Request) -> web.Response:
        rep = negotiate(request.headers.get("Accept", ""), is_list=True)
        try:
            doc = await self.client.request(
                "GET",
                self.backing.path(None, url_namespace(request)),
                params=self._selected(request),
                retries=0,
            )
        except KubeError as e:
            raise self._reworded(e, "") from None
        items = [self.view.to_view(item) for item in doc.get("items") or [] if isinstance(item, dict)]
        served = {
            "apiVersion": self.served.api_version,
            "kind": f"{self.served.kind}List",
            "metadata": as_mapping(doc.get("metadata")),
            "items": items,
        }
        return web.json_response(render_list(rep, served, self.columns, include_object(request)))

    async def _watch(self, request: web.Request) -> web.StreamResponse:
        rep = negotiate(request.headers.get("Accept", ""), is_list=False)
        include = include_object(request)
        params = self._selected(request)
        seconds = watch_seconds(params.get("timeoutSeconds"))
        try:
            upstream = self.client.stream(
                self.backing.path(None, url_namespace(request)),
                params=params,
                read_timeout=seconds + WATCH_SLACK,
            )
            lines = await upstream.__aenter__()
        except KubeError as e:
            raise self._reworded(e, "") from None
        try:
            resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            await resp.write(b"")
            first = True
            try:
                async for line in lines:
                    event = self._event(json.loads(line))
                    out = render_event(rep, event, self.columns, include, headers=first)
                    await resp.write(json.dumps(out, separators=(",", ":")).encode() + b"\n")
                    first = False
            except (KubeError, ValueError) as e:
                log.info("Watch of %s upstream ended: %s", self.served.plural, e)
            except ConnectionResetError:
                log.debug("Watch of %s ended by the client", self.served.plural)
            except asyncio.CancelledError:
                log.debug("Watch of %s ended by the client", self.served.plural)
                raise
            return resp
        finally:
            await upstream.__aexit__(None, None, None)

    def _event(self, event: JSONObj) -> JSONObj:
        obj = event.get("object")
        if not isinstance(obj, dict) or obj.get("kind") == "Status":
            return event
        if event.get("type") == "BOOKMARK":
            bookmark = {**obj, "apiVersion": self.served.api_version, "kind": self.served.kind}
            return {**event, "object": bookmark}
        return {**event, "object": self.view.to_view(obj)}

    # ---- writes ------------------------------------------------------------------------------------------
    async def _create(self, request: web.Request) -> web.Response:
        body = self._checked(decode_json(await request.read()))
        namespace = url_namespace(request)
        meta = as_mapping(body.get("metadata"))
        if namespace and meta.get("namespace") not in (None, "", namespace):
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        backing = self._converted(body, None)
        if namespace:
            backing["metadata"]["namespace"] = namespace
        name = str(meta.get("name") or "")
        try:
            created = await self.client.request(
                "POST",
                self.backing.path(None, namespace),
                body=backing,
                params=_write_params(request),
                retries=0,
            )
        except KubeError as e:
            raise self._reworded(e, name) from None
        return web.json_response(self.view.to_view(created), status=201)

    async def _replace(self, request: web.Request, name: str, body: JSONObj) -> web.Response:
        body = self._checked(body)
        meta = as_mapping(body.get("metadata"))
        if meta.get("name") not in (None, name):
            raise bad_request("the name of the object does not match the name on the URL")
        old = await self._ours(request, name)
        backing = self._converted({**body, "metadata": {**meta, "name": name}}, old)
        if self.served.namespaced:
            backing["metadata"]["namespace"] = url_namespace(request)
        old_meta = as_mapping(old.get("metadata"))
        backing["metadata"]["uid"] = old_meta.get("uid")
        if "creationTimestamp" in old_meta:
            backing["metadata"]["creationTimestamp"] = old_meta["creationTimestamp"]
        try:
            written = await self.client.request(
                "PUT",
                self.backing.path(name, url_namespace(request)),
                body=backing,
                params=_write_params(request),
                retries=0,
            )
        except KubeError as e:
            raise self._reworded(e, name) from None
        return web.json_response(self.view.to_view(written))

    async def _delete(self, request: web.Request, name: str) -> web.Response:
        raw = await request.read()
        options = decode_json(raw) if raw.strip() else {}
        if not isinstance(options, dict):
            raise bad_request("the body of the request must be a DeleteOptions object")
        old = await self._ours(request, name)
        uid = as_mapping(old.get("metadata")).get("uid")
        options = {
            **options,
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {**as_mapping(options.get("preconditions")), "uid": uid},
        }
        try:
            answer = await self.client.request(
                "DELETE",
                self.backing.path(name, url_namespace(request)),
                body=options,
                params=_params(request, _DELETE_KEYS),
                retries=0,
            )
        except KubeError as e:
            raise self._reworded(e, name) from None
        if answer.get("kind") == self.backing.kind:
            return web.json_response(self.view.to_view(answer))
        return web.json_response(answer)

    # ---- helpers -----------------------------------------------------------------------------------------
    def _checked(self, doc: Any) -> JSONObj:
        if not isinstance(doc, dict):
            raise bad_request("the body of the request must be a JSON object")
        api_version, kind = doc.get("apiVersion"), doc.get("kind")
        if api_version not in (None, self.served.api_version) or kind not in (None, self.served.kind):
            raise bad_request(
                f"the object ({api_version}, {kind}) is not a {self.served.kind} of {self.served.api_version}"
            )
        if not isinstance(doc.get("metadata", {}), dict):
            raise bad_request("metadata must be an object")
        return doc

    def _converted(self, view: JSONObj, old: Mapping[str, Any] | None) -> JSONObj:
        name = str(as_mapping(view.get("metadata")).get("name") or "")
        try:
            return self.view.to_backing(view, old)
        except CompanionError as e:
            raise invalid(self.served.kind, self.served.group, name, e.errors) from None

    def _selected(self, request: web.Request) -> dict[str, str]:
        params = _params(request, _READ_KEYS)
        _check_version(params)
        selector = params.get("labelSelector", "").strip()
        params["labelSelector"] = f"{self.view.selector},{selector}" if selector else self.view.selector
        return params

    def _reworded(self, err: KubeError, name: str) -> StatusError:
        """The upstream refusal, naming the view's resource instead of the object behind it."""
        passed = from_kube_error(err)
        qualified = f"{self.served.plural}.{self.served.group}"
        details: JSONObj = {**(passed.details or {}), "group": self.served.group, "kind": self.served.plural}
        if name:
            details["name"] = name
        message = passed.message.replace(f'{self.backing.plural} "', f'{qualified} "')
        if self.backing.group:
            message = message.replace(f'{self.backing.plural}.{self.backing.group} "', f'{qualified} "')
        if passed.code >= 500:  # the object behind is unreachable: a retryable answer, never a 500
            return StatusError(503, "ServiceUnavailable", message, details)
        # from_kube_error reads a reason equal to the error's class name (AlreadyExists) as unset and
        # answers the code's generic one (Conflict); kubectl tells AlreadyExists apart, so keep it.
        reason = err.reason if err.reason and err.reason != "KubeError" else passed.reason
        return StatusError(passed.code, reason, message, details)


def _params(request: web.Request, keys: frozenset[str] | set[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in request.query.items():
        if key in keys and key not in _OURS:
            out.setdefault(key, value)
    return out


def _check_version(params: Mapping[str, str]) -> None:
    """A resourceVersion that is not a number is refused here: the API server answers it with a 500."""
    version = params.get("resourceVersion", "")
    if version and decimal(version) is None:
        raise bad_request(f'invalid resourceVersion "{version}": must be a decimal number')


def _write_params(request: web.Request) -> dict[str, str]:
    params = _params(request, _WRITE_KEYS)
    if "fieldManager" not in params:
        manager = manager_from_user_agent(request.headers.get("User-Agent", ""))
        if manager:
            params["fieldManager"] = manager
    return params
