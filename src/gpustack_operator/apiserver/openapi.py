"""OpenAPI v2 and v3 for the group versions we serve, from the same schema source as the CRDs (guide §2).

v3: kube-apiserver merges our `/openapi/v3` root (only our own group versions, so the CRD's v1alpha1
document is never hijacked) and proxies `/openapi/v3/apis/<group>/<version>` to us when a client asks:
that is what `kubectl explain instancetypes` reads, and what kubectl's validation probe checks (a `patch`
operation with a `fieldValidation` parameter means the server validates). Each document is
self-contained. A stale `?hash=` gets the current document, never a 3xx (the proxy turns it into a 502).

v2: `/openapi/v2` is one Swagger 2.0 document of every group version (`swagger.py`); the aggregator
downloads it per APIService about once a minute, keeps that APIService's paths and merges them into
kube-apiserver's `/openapi/v2` (what `kubectl explain --output=plaintext-openapiv2` and kubectl's v2
fallbacks read). Its schemas are the v3 ones converted to what Swagger 2.0 can say (see `swagger.py`).

Both versions are rendered from one description of our paths and kinds (`openapi_paths.py`): kinds
carry the list-valued `x-kubernetes-group-version-kind`, operations the object-valued one and
`x-kubernetes-action`; strategic merge patch is never advertised (we answer it 415). Every body is
rendered once at start; each answer carries an `Etag` (the body's SHA-512) and an `If-None-Match`
that names it gets a 304, which is how the aggregator's periodic v2 download stays cheap. JSON is the
only representation; an `Accept` that admits no JSON (protobuf only) is a 406.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

from aiohttp import web

from gpustack_operator.api.json import JSONObj
from gpustack_operator.apiserver.discovery import ServedResource
from gpustack_operator.apiserver.negotiation import Representation, negotiate
from gpustack_operator.apiserver.openapi_paths import (
    TITLE,
    Operation,
    PathItem,
    kind_definitions,
    param_type,
    path_items,
    payload,
)
from gpustack_operator.apiserver.status import not_acceptable, not_found
from gpustack_operator.apiserver.swagger import swagger_document

__all__ = ["TITLE", "OpenAPI", "group_version_document"]


def _ref(name: str) -> JSONObj:
    return {"$ref": f"#/components/schemas/{name}"}


def _content(schema: JSONObj, types: Sequence[str] = ("application/json",)) -> JSONObj:
    return {t: {"schema": schema} for t in types}


def _operation(op: Operation) -> JSONObj:
    out: JSONObj = {
        "operationId": op.operation_id,
        "x-kubernetes-action": op.action,
        "x-kubernetes-group-version-kind": op.gvk,
        "responses": {
            "200": {"description": "OK", "content": _content(payload(op, op.response, _ref), (op.produces,))},
            "default": {"description": "Status", "content": _content(payload(op, "status", _ref))},
        },
    }
    if op.query:
        out["parameters"] = [
            {"name": name, "in": "query", "schema": {"type": param_type(name)}} for name in op.query
        ]
    if op.body is not None:
        body = payload(op, op.body, _ref)
        out["requestBody"] = {"required": True, "content": _content(body, op.consumes)}
    return out


def _path(item: PathItem) -> JSONObj:
    out: JSONObj = {op.method: _operation(op) for op in item.operations}
    if item.path_params:
        out["parameters"] = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in item.path_params
        ]
    return out


def group_version_document(
    group_version: str,
    resources: Sequence[ServedResource],
    schemas: Mapping[str, JSONObj],
    *,
    title: str = TITLE,
) -> JSONObj:
    """The OpenAPI 3.0 document of one group version; `schemas` maps each kind to its object schema."""
    paths: JSONObj = {}
    components: JSONObj = {}
    for resource in resources:
        if resource.api_version != group_version:
            continue
        paths.update({item.path: _path(item) for item in path_items(resource)})
        components.update(kind_definitions(resource, schemas[resource.kind], _ref))
    return {
        "openapi": "3.0.0",
        "info": {"title": title, "version": group_version.rsplit("/", 1)[-1]},
        "paths": paths,
        "components": {"schemas": components},
    }


def _render(document: JSONObj) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


def _hash(body: bytes) -> str:
    return hashlib.sha512(body).hexdigest().upper()


class OpenAPI:
    """`/openapi/v2` (when given a Swagger document), the `/openapi/v3` root and per-group-version
    documents, each rendered once."""

    @classmethod
    def for_resources(cls, resources: Sequence[ServedResource], schemas: Mapping[str, JSONObj]) -> OpenAPI:
        gvs = sorted({r.api_version for r in resources})
        return cls(
            {gv: group_version_document(gv, resources, schemas) for gv in gvs},
            swagger=swagger_document(resources, schemas),
        )

    def __init__(self, documents: Mapping[str, JSONObj], *, swagger: JSONObj | None = None) -> None:
        self._bodies = {gv: _render(doc) for gv, doc in documents.items()}
        self._hashes = {gv: _hash(body) for gv, body in self._bodies.items()}
        root = {
            "paths": {
                f"apis/{gv}": {"serverRelativeURL": f"/openapi/v3/apis/{gv}?hash={self._hashes[gv]}"}
                for gv in sorted(self._bodies)
            }
        }
        self._root = _render(root)
        self._swagger = None if swagger is None else _render(swagger)

    def add_routes(self, router: web.UrlDispatcher) -> None:
        """v3 always; v2 only with a Swagger document (without one, the aggregator skips our 404)."""
        router.add_get("/openapi/v3", self.root)
        router.add_get("/openapi/v3/apis/{group}/{version}", self.document)
        if self._swagger is not None:
            router.add_get("/openapi/v2", self.v2)

    async def v2(self, request: web.Request) -> web.Response:
        assert self._swagger is not None  # routed only with a document
        return self._answer(request, self._swagger, _hash(self._swagger), immutable=False)

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
        if negotiate(request.headers.get("Accept", ""), is_list=False) is not Representation.JSON:
            raise not_acceptable(("application/json",))
        headers = {"Etag": f'"{etag}"', "Vary": "Accept"}
        if immutable:
            headers["Cache-Control"] = "public, immutable"
        if request.headers.get("If-None-Match") == headers["Etag"]:
            return web.Response(status=304, headers=headers)
        return web.Response(body=body, content_type="application/json", headers=headers)
