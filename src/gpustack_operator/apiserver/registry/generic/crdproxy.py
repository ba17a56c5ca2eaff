"""A served version as a proxy over the CRD's stored version (guide §6; contract §3.1 `WithCurdProxy`).

A namespaced resource is served under `/namespaces/<ns>/` with every verb, and across all namespaces
(`kubectl get -A`) with list and watch only, as kube-apiserver does; the namespace goes to the CRD as is.

Every verb goes to the CRD through the worker's own client (kube.Client) with the client's query
parameters (selectors, limit/continue, resourceVersion(Match), watch, bookmarks, sendInitialEvents,
dryRun, fieldManager, fieldValidation, force), and `apiVersion` is rewritten by conversion/ both ways.
resourceVersions, continue tokens and the CRD's 410s pass through untouched: v1 and v1alpha1 share etcd's
revisions. The CRD's Status errors come back with their code, reason and message. Status-subresource rules
(create drops status, /status writes only status) are the CRD's own, since /status goes to /status.
Watches are streamed event by event, never buffered; a client that goes away cancels the upstream watch.
GET and LIST may be answered from the worker's informer cache instead (cachedreads.py says when),
and WATCH from its one upstream watch (watchcache.py); the answer is rendered by the same code
either way. A read-only subresource with an answer of its own (a discovery.Reader, such as `devices/cards`)
is its module's handler, mounted here beside `/status` under the same item path.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import yaml
from aiohttp import web
from multidict import CIMultiDict

from gpustack_operator.api.json import JSONObj
from gpustack_operator.apiserver.discovery import ServedResource
from gpustack_operator.apiserver.negotiation import negotiate
from gpustack_operator.apiserver.registry.generic.cachedreads import CachedReads, Informed, decimal
from gpustack_operator.apiserver.registry.generic.representation import (
    render_event,
    render_list,
    render_object,
)
from gpustack_operator.apiserver.registry.generic.watchcache import Events, WatchCache, watch_cache
from gpustack_operator.apiserver.requestinfo import is_watch
from gpustack_operator.apiserver.status import (
    bad_request,
    method_not_allowed,
    unsupported_media_type,
)
from gpustack_operator.apiserver.table import Column
from gpustack_operator.controllerkit.rbac import Rule, Verb
from gpustack_operator.conversion.apiversion import VersionPair
from gpustack_operator.kube.client import APPLY_PATCH, MERGE_PATCH, Client
from gpustack_operator.kube.errors import KubeError
from gpustack_operator.kube.resources import Resource

__all__ = [
    "STATUS_SUBRESOURCE",
    "VERBS",
    "CRDProxy",
    "decode_json",
    "manager_from_user_agent",
    "patch_type",
    "proxy_rules",
]

log = logging.getLogger(__name__)

VERBS: tuple[Verb, ...] = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
"""Every verb a proxied resource serves: what its discovery entry publishes."""
STATUS_SUBRESOURCE: tuple[tuple[str, tuple[Verb, ...]], ...] = (("status", ("get", "patch", "update")),)


def proxy_rules(
    stored: Resource,
    verbs: Sequence[Verb] = VERBS,
    subresources: Sequence[tuple[str, Sequence[Verb]]] = STATUS_SUBRESOURCE,
) -> tuple[Rule, ...]:
    """What proxying the served verbs to the stored resource calls with the worker's credentials (each
    request was authorized for its user by a SubjectAccessReview first)."""
    return (
        Rule.of(stored, *verbs),
        *(Rule.of(stored, *sub_verbs, subresource=sub) for sub, sub_verbs in subresources),
    )


"""The status subresource as a proxied resource serves it (`/status` goes to the CRD's `/status`)."""
WATCH_SLACK = 60.0
"""Seconds of upstream silence tolerated beyond the watch's own timeout before it counts as dead."""
DEFAULT_WATCH_SECONDS = 3600.0
"""The longest kube-apiserver keeps a watch open when the client names no timeout (30-60 min)."""
_OURS = frozenset({"includeObject"})


class CRDProxy:
    """Handlers for one served resource over its CRD; `add_routes` mounts them."""

    def __init__(
        self,
        client: Client,
        served: ServedResource,
        stored: Resource,
        versions: VersionPair,
        columns: Sequence[Column],
        *,
        cache: Informed | None = None,
        readers: Mapping[str, Callable[[web.Request], Awaitable[web.StreamResponse]]] | None = None,
    ) -> None:
        self.client = client
        self.served = served
        self.stored = stored
        self.versions = versions
        self.columns = columns
        if cache is not None and served.namespaced:
            raise ValueError("cached reads serve cluster-scoped resources only")
        self.reads = CachedReads(stored, cache)
        self.watches = watch_cache(stored, cache)
        self.readers = dict(readers or {})
        """The handlers of the read-only subresources (discovery.Reader) served beside the CRD's, by name."""
        if not self.readers.keys() <= {reader.name for reader in served.readers}:
            raise ValueError(f"{served.plural}: {sorted(self.readers)} are not all readers discovery lists")

    def add_routes(self, router: web.UrlDispatcher) -> None:
        group_version = f"/apis/{self.served.group}/{self.served.version}"
        base = f"{group_version}/{self.served.plural}"
        if self.served.namespaced:
            router.add_route("*", base, self.every_namespace)
            base = f"{group_version}/namespaces/{{namespace}}/{self.served.plural}"
        router.add_route("*", base, self.collection)
        router.add_route("*", base + "/{name}", self.item)
        if any(name == "status" for name, _ in self.served.subresources):
            router.add_route("*", base + "/{name}/status", self.status)
        for name, handler in self.readers.items():
            router.add_get(f"{base}/{{name}}/{name}", handler)

    # ---- routes ------------------------------------------------------------------------------------------
    async def every_namespace(self, request: web.Request) -> web.StreamResponse:
        """A namespaced resource across all namespaces (`kubectl get -A`): list and watch only, as kube."""
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
        if request.method == "DELETE":
            return await self._write(request, "DELETE", None, await self._optional_body(request))
        raise method_not_allowed(verb_of(request.method), self.served.kind)

    async def item(self, request: web.Request) -> web.StreamResponse:
        return await self._item(request, None)

    async def status(self, request: web.Request) -> web.StreamResponse:
        if request.method == "DELETE":
            raise method_not_allowed("delete", self.served.kind)
        return await self._item(request, "status")

    async def _item(self, request: web.Request, sub: str | None) -> web.StreamResponse:
        name = request.match_info["name"]
        if request.method in ("GET", "HEAD"):
            return await self._get(request, name, sub)
        if request.method == "PUT":
            body = await self._object_body(request)
            return await self._write(request, "PUT", name, self.versions.to_stored(body), sub)
        if request.method == "PATCH":
            content_type, patch = await self._patch_body(request)
            return await self._write(request, "PATCH", name, patch, sub, content_type)
        if request.method == "DELETE":
            return await self._write(request, "DELETE", name, await self._optional_body(request))
        raise method_not_allowed(verb_of(request.method), self.served.kind)

    # ---- reads -------------------------------------------------------------------------------------------
    async def _get(self, request: web.Request, name: str, sub: str | None) -> web.Response:
        rep = negotiate(request.headers.get("Accept", ""), is_list=False)
        params = _forwarded(request)
        obj = self.reads.get(name, params, rep)
        if obj is None:
            obj = await self.client.request(
                "GET", self.stored.path(name, url_namespace(request), sub), params=params, retries=0
            )
        body = render_object(rep, self.versions.to_served(obj), self.columns, include_object(request))
        return web.json_response(body)

    async def _list(self, request: web.Request) -> web.Response:
        rep = negotiate(request.headers.get("Accept", ""), is_list=True)
        params = _forwarded(request)
        doc = self.reads.list(params)
        if doc is None:
            doc = await self.client.request(
                "GET", self.stored.path(None, url_namespace(request)), params=params, retries=0
            )
        body = render_list(rep, self.versions.to_served(doc), self.columns, include_object(request))
        return web.json_response(body)

    async def _watch(self, request: web.Request) -> web.StreamResponse:
        rep = negotiate(request.headers.get("Accept", ""), is_list=False)
        include = include_object(request)
        params = _forwarded(request)

        def encode(stored: JSONObj, first: bool) -> bytes:
            event = self.versions.event_to_served(stored)
            out = render_event(rep, event, self.columns, include, headers=first)
            return json.dumps(out, separators=(",", ":")).encode() + b"\n"

        async def send(events: Events, shared: WatchCache | None) -> web.StreamResponse:
            resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            await resp.write(b"")  # the headers go now, as kube's do, not with a first event
            first = True
            try:
                async for stored in events:
                    if shared is None:
                        await resp.write(encode(stored, first))
                    else:
                        await resp.write(shared.encoded(stored, first, (rep, include), encode))
                    first = False
            except (KubeError, ValueError) as e:  # the headers are out: end the stream; clients re-watch
                log.info("Watch of %s upstream ended: %s", self.served.plural, e)
            except ConnectionResetError:  # gone before aiohttp cancelled us: a quiet end, not a 500
                log.debug("Watch of %s ended by the client", self.served.plural)
            except asyncio.CancelledError:
                log.debug("Watch of %s ended by the client", self.served.plural)
                raise
            return resp

        cached = self.watches.open(params, floor=self.reads.floor) if self.watches else None
        if cached is not None:  # served from the informer's one upstream watch (watchcache.py)
            try:
                return await send(cached, self.watches)
            finally:
                await cached.aclose()  # a client gone mid-write leaves no timer behind
        seconds = watch_seconds(params.get("timeoutSeconds"))
        async with self.client.stream(
            self.stored.path(None, url_namespace(request)), params=params, read_timeout=seconds + WATCH_SLACK
        ) as lines:
            return await send((json.loads(line) async for line in lines), None)

    # ---- writes ------------------------------------------------------------------------------------------
    async def _create(self, request: web.Request) -> web.Response:
        body = await self._object_body(request)
        warnings: list[str] = []
        created = await self.client.request(
            "POST",
            self.stored.path(None, url_namespace(request)),
            body=self.versions.to_stored(body),
            params=_write_params(request),
            retries=0,
            warnings=warnings,
        )
        self.reads.wrote(created)
        return _answer(self.versions.to_served(created), warnings, status=201)

    async def _write(
        self,
        request: web.Request,
        method: str,
        name: str | None,
        body: Any,
        sub: str | None = None,
        content_type: str = "application/json",
    ) -> web.Response:
        namespace = url_namespace(request)
        path = self.stored.path(name, namespace, sub) if name else self.stored.path(None, namespace)
        warnings: list[str] = []
        answer = await self.client.request(
            method,
            path,
            body=body,
            params=_write_params(request, content_type),
            content_type=content_type,
            retries=0,
            warnings=warnings,
        )
        self.reads.wrote(answer)
        return _answer(self.versions.to_served(answer), warnings)

    # ---- bodies ------------------------------------------------------------------------------------------
    async def _object_body(self, request: web.Request) -> JSONObj:
        doc = decode_json(await request.read())
        if not isinstance(doc, dict):
            raise bad_request("the body of the request must be a JSON object")
        api_version = doc.get("apiVersion")
        if api_version != self.versions.served_api_version:
            raise bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({self.versions.served_api_version})"
            )
        return doc

    async def _optional_body(self, request: web.Request) -> JSONObj | None:
        raw = await request.read()
        if not raw.strip():
            return None
        doc = decode_json(raw)
        if not isinstance(doc, dict):
            raise bad_request("the body of the request must be a DeleteOptions object")
        return doc

    async def _patch_body(self, request: web.Request) -> tuple[str, Any]:
        content_type = patch_type(request, self.served)
        raw = await request.read()
        if content_type == APPLY_PATCH:
            try:
                doc = yaml.safe_load(raw)
            except yaml.YAMLError as e:
                raise bad_request(f"error decoding YAML: {e}") from None
            if not isinstance(doc, dict):
                raise bad_request("an apply patch must be an object")
            if doc.get("apiVersion") != self.versions.served_api_version:
                raise bad_request(
                    "Incorrect version specified in apply patch. Specified patch version: "
                    f"{doc.get('apiVersion')}, expected: {self.versions.served_api_version}"
                )
            return content_type, self.versions.to_stored(doc)
        doc = decode_json(raw)
        if content_type == MERGE_PATCH:
            if not isinstance(doc, dict):
                raise bad_request("a merge patch must be a JSON object")
            return content_type, self.versions.to_stored(doc)
        if not isinstance(doc, list):
            raise bad_request("a JSON patch must be a JSON array of operations")
        return content_type, doc


def patch_type(request: web.Request, served: ServedResource) -> str:
    """The PATCH request's Content-Type (parameters dropped), when `served` accepts it; kube's 415 else."""
    content_type = request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
    if content_type not in served.patch_types:
        raise unsupported_media_type(served.patch_types)
    return content_type


def decode_json(raw: bytes) -> Any:
    """A request body as JSON; kube's 400 when it is not."""
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise bad_request(f"error decoding the request body as JSON: {e}") from None


def _forwarded(request: web.Request) -> dict[str, str]:
    """The client's query parameters for the CRD (the first value of each), without our own.

    A resourceVersion that is not a number is refused here: the CRD's storage answers it with a 500.
    """
    out: dict[str, str] = {}
    for key, value in request.query.items():
        if key not in _OURS:
            out.setdefault(key, value)
    version = out.get("resourceVersion", "")
    if version and decimal(version) is None:
        raise bad_request(f'invalid resourceVersion "{version}": must be a decimal number')
    return out


def _write_params(request: web.Request, content_type: str = "") -> dict[str, str]:
    """A write's parameters for the CRD. kube names the field manager of a write that names none after
    the caller's User-Agent; the CRD would see ours, so it is named here as kube would have (an apply
    must name one, and is left for the CRD to refuse)."""
    params = _forwarded(request)
    if request.method != "DELETE" and content_type != APPLY_PATCH and "fieldManager" not in params:
        manager = manager_from_user_agent(request.headers.get("User-Agent", ""))
        if manager:
            params["fieldManager"] = manager
    return params


def manager_from_user_agent(user_agent: str) -> str:
    """kube's default field manager: the User-Agent up to its first `/`, printable characters only, at
    most 128 (`kubectl/v1.37.2 (linux/amd64) kubernetes/abc` -> `kubectl`)."""
    return "".join(ch for ch in user_agent.split("/", 1)[0] if ch.isprintable())[:128]


def _answer(doc: JSONObj, warnings: Sequence[str], status: int = 200) -> web.Response:
    """The CRD's answer, with its `Warning` headers passed on (kubectl prints them as `Warning: ...`)."""
    headers = CIMultiDict([("Warning", warning) for warning in warnings])
    return web.json_response(doc, status=status, headers=headers)


def watch_seconds(text: str | None) -> float:
    """The watch's own timeout (the API server validates the parameter; a bad one never gets this far)."""
    try:
        return max(float(text or DEFAULT_WATCH_SECONDS), 0.0)
    except ValueError:
        return DEFAULT_WATCH_SECONDS


def url_namespace(request: web.Request) -> str | None:
    """The namespace the URL names; None on a cluster-scoped resource or an all-namespaces list."""
    return request.match_info.get("namespace")


def include_object(request: web.Request) -> str:
    return request.query.get("includeObject", "")


def verb_of(method: str) -> str:
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method, method.lower()
    )
