"""A small typed client over kubernetes-asyncio's transport that speaks plain JSON.

kubernetes-asyncio gives us kubeconfig and in-cluster auth and a pooled HTTPS session; its generated models
are slow and do not cover CRDs, so every call here goes through one raw request path and returns dicts.
Errors come back as our own hierarchy (kube.errors); throttling and unavailability are retried.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from gpustack_operator.kube import errors
from gpustack_operator.kube.resources import Resource

log = logging.getLogger(__name__)

FIELD_MANAGER = "gpustack-operator"
JSONObj = dict[str, Any]

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


class Client:
    """Typed verbs over any Resource; construct with `connect()`."""

    def __init__(self, api: k8s_client.ApiClient, retries: int = 5) -> None:
        self._api = api
        self._retries = retries

    @property
    def host(self) -> str:
        return str(self._api.configuration.host)

    async def close(self) -> None:
        await self._api.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        timeout: float | None = 60.0,
    ) -> JSONObj:
        """One API request with retries of transient failures; returns the decoded JSON body."""
        attempt = 0
        while True:
            try:
                return await self._request_once(method, path, body, params, content_type, timeout)
            except errors.KubeError as err:
                attempt += 1
                if not err.transient or attempt > self._retries:
                    raise
                delay = err.retry_after if err.retry_after is not None else min(0.2 * 2**attempt, 5.0)
                log.info("retrying %s %s in %.1fs after %s", method, path, delay, err.reason)
                await asyncio.sleep(delay)

    async def _request_once(
        self,
        method: str,
        path: str,
        body: Any,
        params: Mapping[str, str] | None,
        content_type: str,
        timeout: float | None,
    ) -> JSONObj:
        try:
            resp = await self._api.call_api(
                path,
                method,
                query_params=list((params or {}).items()),
                header_params={"Content-Type": content_type, "Accept": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout,
            )
        except (TimeoutError, OSError) as exc:
            raise errors.Unavailable(status=0, reason="ConnectionError", message=str(exc)) from exc
        async with resp:
            data = await resp.read()
            if not 200 <= resp.status <= 299:
                raise errors.from_response(resp.status, data, resp.headers.get("Retry-After"))
        return json.loads(data) if data else {}

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> JSONObj:
        return await self.request("GET", res.path(name, namespace))

    async def get_or_none(self, res: Resource, name: str, namespace: str | None = None) -> JSONObj | None:
        try:
            return await self.get(res, name, namespace)
        except errors.NotFound:
            return None

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[JSONObj]:
        params: dict[str, str] = {}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        doc = await self.request("GET", res.path(namespace=namespace), params=params)
        return list(doc.get("items") or [])

    async def create(
        self, res: Resource, obj: JSONObj, namespace: str | None = None, dry_run: bool = False
    ) -> JSONObj:
        ns = namespace or obj.get("metadata", {}).get("namespace")
        params = {"dryRun": "All"} if dry_run else None
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
    ) -> JSONObj:
        return await self.request(
            "PATCH",
            res.path(name, namespace, subresource),
            body=patch,
            content_type=content_type,
            params={"fieldManager": FIELD_MANAGER},
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


async def connect(kubeconfig: Path | None = None) -> Client:
    """A Client from a kubeconfig file, or from the in-cluster service account when kubeconfig is None."""
    configuration = k8s_client.Configuration()
    if kubeconfig is not None:
        await k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    else:
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    return Client(k8s_client.ApiClient(configuration))
