"""OpenAPI v3 for the group versions we serve, from the same schema source as the CRDs (guide §2.3, §2.4).

kube-apiserver merges our `/openapi/v3` root (only our own group versions, so the CRD's v1alpha1 document
is never hijacked) and proxies `/openapi/v3/apis/<group>/<version>` to us when a client asks: that is what
`kubectl explain instancetypes` reads, and what kubectl's validation probe checks (a `patch` operation
with a `fieldValidation` parameter means the server validates). Each document is self-contained; kinds
carry the list-valued `x-kubernetes-group-version-kind`, operations the object-valued one. Strategic
merge patch is not advertised (we answer it 415). `/openapi/v2` is not served: a 404 there makes the
aggregator skip it, and v3 is what kubectl uses. A stale `?hash=` gets the current document, never a 3xx.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import web

from gpustack_operator.apiserver.discovery import ServedResource
from gpustack_operator.apiserver.status import not_found

__all__ = ["TITLE", "OpenAPI", "group_version_document"]

TITLE = "GPUStack - Open Source Accelerator Management Platform"

JSONObj = dict[str, Any]
PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml")
_PATCH_REF = {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}
_STATUS_REF = {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Status"}


def _definition_name(resource: ServedResource, suffix: str = "") -> str:
    reversed_group = ".".join(reversed(resource.group.split(".")))
    return f"{reversed_group}.{resource.version}.{resource.kind}{suffix}"


def _ref(name: str) -> JSONObj:
    return {"$ref": f"#/components/schemas/{name}"}


def _query(*names: str) -> list[JSONObj]:
    return [
        {"name": n, "in": "query", "schema": {"type": "boolean" if n == "force" else "string"}} for n in names
    ]


def _operation(resource: ServedResource, action: str, response: JSONObj, **extra: Any) -> JSONObj:
    gvk = {"group": resource.group, "version": resource.version, "kind": resource.kind}
    op: JSONObj = {
        "operationId": f"{action}{resource.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
        "responses": {
            "200": {"content": {"application/json": {"schema": response}}},
            "default": {"content": {"application/json": {"schema": _STATUS_REF}}},
        },
    }
    op.update(extra)
    return op


def _body(schema: JSONObj, types: Sequence[str] = ("application/json",)) -> JSONObj:
    return {"required": True, "content": {t: {"schema": schema} for t in types}}


def _writes(resource: ServedResource, obj: JSONObj, verbs: Sequence[str]) -> JSONObj:
    ops: JSONObj = {}
    if "get" in verbs:
        ops["get"] = _operation(resource, "get", obj)
    if "update" in verbs:
        params = _query("dryRun", "fieldManager", "fieldValidation")
        ops["put"] = _operation(resource, "put", obj, parameters=params, requestBody=_body(obj))
    if "patch" in verbs:
        params = _query("dryRun", "fieldManager", "fieldValidation", "force")
        ops["patch"] = _operation(
            resource, "patch", obj, parameters=params, requestBody=_body(_PATCH_REF, PATCH_TYPES)
        )
    return ops


def _paths(resource: ServedResource) -> JSONObj:
    base = f"/apis/{resource.group}/{resource.version}/{resource.plural}"
    obj, listed = _ref(_definition_name(resource)), _ref(_definition_name(resource, "List"))
    verbs = set(resource.verbs)
    collection: JSONObj = {}
    if "list" in verbs:
        collection["get"] = _operation(
            resource,
            "list",
            listed,
            parameters=_query(
                "labelSelector", "fieldSelector", "resourceVersion", "limit", "continue", "watch"
            ),
        )
    if "create" in verbs:
        params = _query("dryRun", "fieldManager", "fieldValidation")
        collection["post"] = _operation(resource, "post", obj, parameters=params, requestBody=_body(obj))
    if "deletecollection" in verbs:
        collection["delete"] = _operation(resource, "deletecollection", _STATUS_REF)
    name = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]
    item = _writes(resource, obj, tuple(verbs))
    if "delete" in verbs:
        item["delete"] = _operation(
            resource, "delete", obj, parameters=_query("dryRun", "gracePeriodSeconds")
        )
    paths = {base: collection, f"{base}/{{name}}": {**item, "parameters": name}}
    for sub, sub_verbs in resource.subresources:
        paths[f"{base}/{{name}}/{sub}"] = {**_writes(resource, obj, sub_verbs), "parameters": name}
    return {p: ops for p, ops in paths.items() if set(ops) - {"parameters"}}


def group_version_document(
    group_version: str,
    resources: Sequence[ServedResource],
    schemas: Mapping[str, JSONObj],
    *,
    title: str = TITLE,
) -> JSONObj:
    """The OpenAPI 3.0 document of one group version; `schemas` maps each kind to its object schema."""
    paths: JSONObj = {}
    components: JSONObj = {
        "io.k8s.apimachinery.pkg.apis.meta.v1.Patch": {
            "description": "Patch is the body of a PATCH request; its Content-Type names the patch type.",
            "type": "object",
        },
        "io.k8s.apimachinery.pkg.apis.meta.v1.Status": {
            "description": "Status is a return value for calls that don't return other objects.",
            "type": "object",
        },
    }
    for resource in resources:
        if resource.api_version != group_version:
            continue
        paths.update(_paths(resource))
        gvk = [{"group": resource.group, "version": resource.version, "kind": resource.kind}]
        components[_definition_name(resource)] = {
            **schemas[resource.kind],
            "x-kubernetes-group-version-kind": gvk,
        }
        list_gvk = [{**gvk[0], "kind": f"{resource.kind}List"}]
        components[_definition_name(resource, "List")] = {
            "description": f"{resource.kind}List is a list of {resource.kind}.",
            "type": "object",
            "required": ["items"],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "items": {"type": "array", "items": _ref(_definition_name(resource))},
            },
            "x-kubernetes-group-version-kind": list_gvk,
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": title, "version": group_version.rsplit("/", 1)[-1]},
        "paths": paths,
        "components": {"schemas": components},
    }


def _hash(body: bytes) -> str:
    return hashlib.sha512(body).hexdigest().upper()


class OpenAPI:
    """The `/openapi/v3` root and per-group-version documents, rendered once."""

    @classmethod
    def for_resources(cls, resources: Sequence[ServedResource], schemas: Mapping[str, JSONObj]) -> OpenAPI:
        gvs = sorted({r.api_version for r in resources})
        return cls({gv: group_version_document(gv, resources, schemas) for gv in gvs})

    def __init__(self, documents: Mapping[str, JSONObj]) -> None:
        self._bodies = {gv: json.dumps(doc, separators=(",", ":")).encode() for gv, doc in documents.items()}
        self._hashes = {gv: _hash(body) for gv, body in self._bodies.items()}
        root = {
            "paths": {
                f"apis/{gv}": {"serverRelativeURL": f"/openapi/v3/apis/{gv}?hash={self._hashes[gv]}"}
                for gv in sorted(self._bodies)
            }
        }
        self._root = json.dumps(root, separators=(",", ":")).encode()

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/openapi/v3", self.root)
        router.add_get("/openapi/v3/apis/{group}/{version}", self.document)

    async def root(self, request: web.Request) -> web.Response:
        return self._answer(request, self._root, _hash(self._root), immutable=False)

    async def document(self, request: web.Request) -> web.Response:
        gv = f"{request.match_info['group']}/{request.match_info['version']}"
        if gv not in self._bodies:
            raise not_found()
        current = self._hashes[gv]
        return self._answer(
            request, self._bodies[gv], current, immutable=request.query.get("hash") == current
        )

    @staticmethod
    def _answer(request: web.Request, body: bytes, etag: str, *, immutable: bool) -> web.Response:
        headers = {"Etag": f'"{etag}"', "Vary": "Accept"}
        if immutable:
            headers["Cache-Control"] = "public, immutable"
        if request.headers.get("If-None-Match") == headers["Etag"]:
            return web.Response(status=304, headers=headers)
        return web.Response(body=body, content_type="application/json", headers=headers)
