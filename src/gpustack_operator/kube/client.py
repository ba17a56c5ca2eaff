"""A small typed client over one pooled HTTPS transport that speaks plain JSON.

The transport is kubernetes-asyncio's ApiClient when a kubeconfig is given (kube.kubeconfig) and our own
service-account connections inside a Pod (kube.incluster over kube.http1, which spare each node agent the
memory of kubernetes-asyncio and aiohttp). kubernetes-asyncio's generated models are slow and do not cover
CRDs, so every call here goes through one raw request path and returns dicts.
Errors come back as our own hierarchy (kube.errors): a dropped connection or a restarting server is
Unavailable, and transient errors are retried with runtime.Backoff (honouring Retry-After). Lists are
paginated; `stream` hands the watch module a long-lived response line by line, `stream_bytes` a Pod's log
chunk by chunk. An optional observer
hears of every request sent (method, resource, response code), so the worker can count its API calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import logging
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypedDict, Unpack

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube import errors
from gpustack_operator.kube.http1 import StreamTimeout
from gpustack_operator.kube.incluster import InClusterConfig, InClusterTransport
from gpustack_operator.kube.resources import Resource
from gpustack_operator.runtime import Backoff, Clock, MonotonicClock, TokenBucket

log = logging.getLogger(__name__)

FIELD_MANAGER = "gpustack-operator"

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

DEFAULT_PAGE_SIZE = 500
DEFAULT_TIMEOUT = 60.0
"""Seconds one request may take unless the Client or the call says otherwise."""


class Unset(enum.Enum):
    """The type of UNSET: "the caller named no value", where None already means "no limit"."""

    UNSET = enum.auto()


UNSET = Unset.UNSET


class Selectors(TypedDict, total=False):
    """The label and field selectors a LIST or WATCH is narrowed by."""

    label_selector: str | None
    field_selector: str | None


class PageQuery(Selectors, total=False):
    """One page of a LIST: the selectors, the page size (None: no limit), and where it starts."""

    limit: int | None
    continue_token: str | None
    resource_version: str | None


class ListQuery(Selectors, total=False):
    """A paged LIST of one snapshot: the selectors, the page size, the resourceVersion of the first page."""

    page_size: int
    resource_version: str | None


RETRY_BACKOFF = Backoff(base=0.2, cap=5.0, jitter=0.2)
"""Between retries of one request: 0.2 s doubling to 5 s; the default 8 retries span about 20 s."""

RequestObserver = Callable[[str, str, int], None]
"""Told of each request sent: (method, or WATCH for a watch; resource as `resource_of` names it; the
response code, 0 when no response came). Each retry is a request of its own."""


class Transport(Protocol):
    """Where requests go: kubernetes-asyncio's ApiClient or InClusterTransport (same call_api keywords)."""

    configuration: Any
    """Has `host`, the API server's URL."""

    async def call_api(self, resource_path: str, method: str, **kw: Any) -> Any: ...

    async def close(self) -> None: ...


def resource_of(path: str) -> str:
    """The resource a request path addresses: `pods`, `nodes/status`, `namespaces` ("other" otherwise)."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    if parts[0] == "api":
        rest = parts[2:]
    elif parts[0] == "apis":
        rest = parts[3:]
    else:
        return "other"
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    if not rest:
        return "other"
    return f"{rest[0]}/{rest[2]}" if len(rest) >= 3 else rest[0]


class Client:
    """Typed verbs over any Resource; construct with `connect()`."""

    def __init__(
        self,
        api: Transport,
        retries: int = 8,
        *,
        backoff: Backoff = RETRY_BACKOFF,
        clock: Clock | None = None,
        limiter: TokenBucket | None = None,
        observer: RequestObserver | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        """`timeout`: seconds one request may take when its caller names no timeout of its own."""
        self._api = api
        self._timeout = timeout
        self._limiter = limiter
        self._observer = observer
        self._retries = retries
        self._backoff = backoff
        self._clock: Clock = clock or MonotonicClock()

    @property
    def host(self) -> str:
        return str(self._api.configuration.host)

    async def close(self) -> None:
        await self._api.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- transport -----------------------------------------------------------------------------------------
    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        timeout: float | Unset | None = UNSET,
        retries: int | None = None,
        warnings: list[str] | None = None,
    ) -> JSONObj:
        """One API request, retrying transient failures up to `retries` times; returns the decoded body.
        The `Warning` headers of a successful answer (kube's warn-codes: `fieldValidation=Warn`'s unknown
        fields, deprecations) are appended to `warnings` when one is given.

        A request whose connection broke may have been applied before it broke, so a retried create can
        answer AlreadyExists; pass `retries=0` where a caller must see the first failure. Callers with a
        deadline (leader election) bound the whole call with their own timeout.
        """
        attempts = self._backoff.attempts()
        limit = self._retries if retries is None else retries
        seconds = self._timeout if isinstance(timeout, Unset) else timeout
        while True:
            status = 0
            try:
                resp = await self._send(method, path, body, params, content_type, seconds)
                status = resp.status
                async with resp:
                    data = await resp.read()
                    if not 200 <= resp.status <= 299:
                        raise errors.from_response(resp.status, data, resp.headers.get("Retry-After"))
                if warnings is not None:
                    warnings.extend(resp.headers.getall("Warning", ()))
                return json.loads(data) if data else {}
            except _broken() as exc:  # the answer was cut off or too slow
                err: errors.KubeError = _unavailable(exc)
            except errors.KubeError as exc:
                err = exc
            finally:
                self._observe(method, path, status)
            if not err.transient or attempts.failures >= limit:
                raise err
            delay = attempts.next_delay()
            if err.retry_after is not None:
                delay = err.retry_after
            log.info("retrying %s %s in %.1fs after %s", method, path, delay, err.reason)
            await self._clock.sleep(delay)

    @contextlib.asynccontextmanager
    async def stream(
        self, path: str, *, params: Mapping[str, str], read_timeout: float
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """GET a streaming response (a watch) and yield its lines; errors are ours, nothing is retried.

        `read_timeout` bounds the silence between two chunks, so a connection that died without a FIN is
        noticed; the caller picks it longer than the server's own watch timeout.
        """
        # The lines are closed here, not left to the garbage collector, when the caller stops early or
        # raises: an abandoned generator is finalized later by a task of its own on the loop.
        async with (
            self._streamed(path, params, read_timeout, "WATCH") as resp,
            contextlib.aclosing(_lines(resp)) as lines,
        ):
            yield lines

    @contextlib.asynccontextmanager
    async def stream_bytes(
        self, path: str, *, params: Mapping[str, str], read_timeout: float
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """GET a streaming response that is not line-framed JSON (a Pod's log) and yield its chunks as
        they come, bytes untouched; like `stream`, errors are ours and nothing is retried."""
        async with (
            self._streamed(path, params, read_timeout, "GET") as resp,
            contextlib.aclosing(_chunks(resp)) as chunks,
        ):
            yield chunks

    @contextlib.asynccontextmanager
    async def _streamed(
        self, path: str, params: Mapping[str, str], read_timeout: float, counted_as: str
    ) -> AsyncIterator[Any]:
        """The open response of a long-lived GET; a refusal is raised before anything is yielded."""
        timeout = StreamTimeout(sock_connect=30.0, sock_read=read_timeout)
        try:
            resp = await self._send("GET", path, None, params, "application/json", timeout)
        except errors.KubeError:
            self._observe(counted_as, path, 0)
            raise
        self._observe(counted_as, path, resp.status)
        async with resp:
            if not 200 <= resp.status <= 299:
                raise errors.from_response(resp.status, await resp.read(), resp.headers.get("Retry-After"))
            yield resp

    def _observe(self, method: str, path: str, status: int) -> None:
        if self._observer is not None:
            try:
                self._observer(method, resource_of(path), status)
            except Exception:  # counting must never fail a request
                log.exception("request observer failed")

    async def _send(
        self,
        method: str,
        path: str,
        body: Any,
        params: Mapping[str, str] | None,
        content_type: str,
        timeout: float | StreamTimeout | None,
    ) -> Any:
        if self._limiter is not None:
            await self._limiter.acquire()
        try:
            return await self._api.call_api(
                path,
                method,
                query_params=list((params or {}).items()),
                header_params={"Content-Type": content_type, "Accept": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout,
            )
        except _broken() as exc:
            raise _unavailable(exc) from exc

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> JSONObj:
        return await self.request("GET", res.path(name, namespace))

    async def get_or_none(self, res: Resource, name: str, namespace: str | None = None) -> JSONObj | None:
        try:
            return await self.get(res, name, namespace)
        except errors.NotFound:
            return None

    async def list_page(
        self, res: Resource, namespace: str | None = None, **query: Unpack[PageQuery]
    ) -> JSONObj:
        """One page of a list: the List object with `items` and `metadata.{resourceVersion,continue}`."""
        params: dict[str, str] = {}
        if label_selector := query.get("label_selector"):
            params["labelSelector"] = label_selector
        if field_selector := query.get("field_selector"):
            params["fieldSelector"] = field_selector
        if limit := query.get("limit", DEFAULT_PAGE_SIZE):
            params["limit"] = str(limit)
        if continue_token := query.get("continue_token"):
            params["continue"] = continue_token
        elif (resource_version := query.get("resource_version")) is not None:
            params["resourceVersion"] = resource_version
        return await self.request("GET", res.path(namespace=namespace), params=params)

    async def list_pages(
        self, res: Resource, namespace: str | None = None, **query: Unpack[ListQuery]
    ) -> AsyncIterator[JSONObj]:
        """Every page of one consistent snapshot, in order (the first page carries its resourceVersion).

        A caller that digests each page before asking for the next never holds the whole list twice. A
        continue token that expired mid-list raises Gone; the caller lists again from the start.
        `resource_version` ("0": any cached state is fine) applies to the first page; the others follow
        the snapshot their continue token names.
        """
        token: str | None = None
        while True:
            page = await self.list_page(
                res,
                namespace,
                label_selector=query.get("label_selector"),
                field_selector=query.get("field_selector"),
                limit=query.get("page_size", DEFAULT_PAGE_SIZE),
                continue_token=token,
                resource_version=query.get("resource_version"),
            )
            token = (page.get("metadata") or {}).get("continue")
            yield page
            if not token:
                return

    async def list_all(
        self, res: Resource, namespace: str | None = None, **query: Unpack[ListQuery]
    ) -> tuple[list[JSONObj], str]:
        """Every object, page by page, from one consistent snapshot; returns (items, its resourceVersion)."""
        items: list[JSONObj] = []
        version = ""
        async for page in self.list_pages(res, namespace, **query):
            items.extend(page.get("items") or ())
            version = version or str((page.get("metadata") or {}).get("resourceVersion") or "")
        return items, version

    async def list(
        self, res: Resource, namespace: str | None = None, **selectors: Unpack[Selectors]
    ) -> list[JSONObj]:
        items, _ = await self.list_all(res, namespace, **selectors)
        return items

    async def create(
        self,
        res: Resource,
        obj: JSONObj,
        namespace: str | None = None,
        dry_run: bool = False,
        *,
        field_manager: str = FIELD_MANAGER,
    ) -> JSONObj:
        ns = namespace or obj.get("metadata", {}).get("namespace")
        params = {"fieldManager": field_manager}
        if dry_run:
            params["dryRun"] = "All"
        return await self.request("POST", res.path(namespace=ns), body=obj, params=params)

    async def apply(
        self,
        res: Resource,
        obj: JSONObj,
        *,
        field_manager: str = FIELD_MANAGER,
        force: bool = True,
        subresource: str | None = None,
    ) -> JSONObj:
        """Server-side apply of obj (it must carry apiVersion, kind and metadata.name)."""
        meta = obj["metadata"]
        body = dict(obj, apiVersion=res.api_version, kind=res.kind)
        params = {"fieldManager": field_manager, "force": "true" if force else "false"}
        return await self.request(
            "PATCH",
            res.path(meta["name"], meta.get("namespace"), subresource),
            body=body,
            params=params,
            content_type=APPLY_PATCH,
        )

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        content_type: str = MERGE_PATCH,
        subresource: str | None = None,
        field_manager: str = FIELD_MANAGER,
    ) -> JSONObj:
        return await self.request(
            "PATCH",
            res.path(name, namespace, subresource),
            body=patch,
            content_type=content_type,
            params={"fieldManager": field_manager},
        )

    async def json_patch(
        self,
        res: Resource,
        name: str,
        ops: Sequence[JSONObj],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> JSONObj:
        """RFC 6902 patch; build `ops` with kube.patches (a `test` op makes it a precondition)."""
        return await self.patch(
            res, name, ops, namespace=namespace, content_type=JSON_PATCH, subresource=subresource
        )

    async def patch_status(
        self,
        res: Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        content_type: str = MERGE_PATCH,
        field_manager: str = FIELD_MANAGER,
    ) -> JSONObj:
        """Patch the status subresource (a merge patch unless content_type says otherwise)."""
        return await self.patch(
            res,
            name,
            patch,
            namespace=namespace,
            content_type=content_type,
            subresource="status",
            field_manager=field_manager,
        )

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        missing_ok: bool = True,
        propagation: str = "Background",
    ) -> None:
        try:
            await self.request("DELETE", res.path(name, namespace), body={"propagationPolicy": propagation})
        except errors.NotFound:
            if not missing_ok:
                raise


async def connect(
    kubeconfig: Path | None = None,
    *,
    context: str | None = None,
    qps: float | None = None,
    burst: int | None = None,
    observer: RequestObserver | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Client:
    """A Client from a kubeconfig file (its `context`, else its current one), or from the in-cluster
    service account when kubeconfig is None.

    With qps (and burst, default 2 x qps), every request, watches included, waits for a token first;
    `observer` hears of every request (see RequestObserver); `timeout` bounds each request that names none.
    """
    if kubeconfig is None:
        api: Transport = await asyncio.to_thread(_in_cluster)  # reads the token, CA and env
    else:
        from gpustack_operator.kube.kubeconfig import api_client  # kubernetes-asyncio: ~40 MB, only here

        api = await api_client(kubeconfig, context=context)
    return Client(api, limiter=_limiter(qps, burst), observer=observer, timeout=timeout)


async def connect_url(
    host: str,
    *,
    token: str | None = None,
    insecure: bool = False,
    qps: float | None = None,
    burst: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Client:
    """A Client for an API server (or a proxy in front of one) at `host`, a URL that may carry a path
    prefix (`http://localhost:30080/v2/clusters/c1/proxy`), with an optional bearer token; `insecure`
    skips verifying an HTTPS server's certificate."""
    from gpustack_operator.kube.kubeconfig import url_client  # kubernetes-asyncio: ~40 MB, only here

    api = url_client(host, token=token, insecure=insecure)
    return Client(api, limiter=_limiter(qps, burst), timeout=timeout)


def _limiter(qps: float | None, burst: int | None) -> TokenBucket | None:
    return TokenBucket(qps, burst or max(1, int(2 * qps))) if qps else None


def _in_cluster() -> InClusterTransport:
    return InClusterTransport(InClusterConfig.from_environ())


def _broken() -> tuple[type[BaseException], ...]:
    """What a broken or slow connection raises: TimeoutError and OSError from either transport, and
    aiohttp's ClientError once aiohttp is loaded (kubernetes-asyncio's transport, for kubeconfig files).

    Looked up only when something was raised, so a process on the in-cluster transport never imports aiohttp.
    """
    aiohttp = sys.modules.get("aiohttp")
    return (TimeoutError, OSError) if aiohttp is None else (TimeoutError, OSError, aiohttp.ClientError)


def _unavailable(exc: BaseException) -> errors.Unavailable:
    err = errors.Unavailable(status=0, reason="ConnectionError", message=str(exc) or type(exc).__name__)
    err.__cause__ = exc
    return err


async def _chunks(resp: Any) -> AsyncGenerator[bytes, None]:
    """A streamed response's body chunk by chunk; a broken connection is Unavailable."""
    chunks = resp.content.iter_any()
    try:
        async for chunk in chunks:
            if chunk:
                yield bytes(chunk)
    except _broken() as exc:
        raise _unavailable(exc) from exc
    finally:
        # The in-cluster transport's body is an async generator: close it now rather than leave it to a
        # finalizer task when the stream ends early (an ERROR event, a caller that stops reading).
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()


async def _lines(resp: Any) -> AsyncGenerator[bytes, None]:
    """Split a chunked response into its non-empty lines; a broken connection is Unavailable."""
    pending = bytearray()
    async with contextlib.aclosing(_chunks(resp)) as chunks:
        async for chunk in chunks:
            pending += chunk
            start = 0
            while (end := pending.find(b"\n", start)) >= 0:
                if end > start:
                    yield bytes(pending[start:end])
                start = end + 1
            del pending[:start]
    if pending.strip():
        yield bytes(pending)
