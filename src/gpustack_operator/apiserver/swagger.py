"""`/openapi/v2`: the Swagger 2.0 document kube-apiserver's aggregator merges (guide §2.1, §2.2).

The aggregator downloads `/openapi/v2` from every APIService (as `system:aggregator`, `Accept:
application/json`), keeps the paths under that APIService's `/apis/<group>/<version>/` with the
definitions they reach, and merges them into kube-apiserver's own `/openapi/v2`. That merged document is
what `kubectl explain --output=plaintext-openapiv2` reads, and what kubectl's v2 fallbacks (patch
`consumes`, client-side validation, the `fieldValidation` probe) look at. One document covers every group
version we serve; it is rendered from the same paths and kind schemas as v3 (`openapi_paths.py`).

Our kind schemas are OpenAPI v3 (the CRD's structural schema). Swagger 2.0 lacks some v3 keywords, so
each schema node is converted: `anyOf`, `oneOf` and `not` are dropped (a Quantity's
`anyOf: [integer, string]` leaves an untyped node that keeps `x-kubernetes-int-or-string`, as
kube-apiserver publishes int-or-string), `nullable: true` drops the node's `type`, `items` and
`properties` (an untyped node admits null, and kubectl mishandles an untyped node with properties), and
`writeOnly`/`deprecated` are dropped. Every dropped keyword only loosens the schema; the server still
validates every write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpustack_operator.api.json import JSONObj
from gpustack_operator.apiserver.discovery import ServedResource
from gpustack_operator.apiserver.openapi_paths import (
    TITLE,
    Operation,
    PathItem,
    kind_definitions,
    param_type,
    path_items,
    payload,
)

__all__ = ["swagger_document", "swagger_schema"]

_V3_ONLY = frozenset({"anyOf", "oneOf", "not", "nullable", "writeOnly", "deprecated"})
_UNTYPED_WHEN_NULLABLE = ("type", "items", "properties")


def swagger_schema(node: Mapping[str, Any]) -> JSONObj:
    """One OpenAPI v3 schema node (and everything under it) as a Swagger 2.0 schema."""
    out = {key: value for key, value in node.items() if key not in _V3_ONLY}
    if node.get("nullable") is True:
        for key in _UNTYPED_WHEN_NULLABLE:
            out.pop(key, None)
    if isinstance(out.get("properties"), Mapping):
        out["properties"] = {name: swagger_schema(sub) for name, sub in out["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), Mapping):
            out[key] = swagger_schema(out[key])
    if isinstance(out.get("allOf"), list):
        out["allOf"] = [swagger_schema(sub) for sub in out["allOf"]]
    return out


def _ref(name: str) -> JSONObj:
    return {"$ref": f"#/definitions/{name}"}


def _operation(op: Operation) -> JSONObj:
    params: list[JSONObj] = [
        {"name": name, "in": "query", "type": param_type(name), "uniqueItems": True} for name in op.query
    ]
    out: JSONObj = {
        "operationId": op.operation_id,
        "x-kubernetes-action": op.action,
        "x-kubernetes-group-version-kind": op.gvk,
        "produces": [op.produces],
        "responses": {
            "200": {"description": "OK", "schema": payload(op, op.response, _ref)},
            "default": {"description": "Status", "schema": payload(op, "status", _ref)},
        },
    }
    if op.body is not None:
        params.append({"name": "body", "in": "body", "required": True, "schema": payload(op, op.body, _ref)})
        out["consumes"] = list(op.consumes)
    if params:
        out["parameters"] = params
    return out


def _path(item: PathItem) -> JSONObj:
    out: JSONObj = {op.method: _operation(op) for op in item.operations}
    if item.path_params:
        out["parameters"] = [
            {"name": name, "in": "path", "required": True, "type": "string", "uniqueItems": True}
            for name in item.path_params
        ]
    return out


def swagger_document(
    resources: Sequence[ServedResource], schemas: Mapping[str, Mapping[str, Any]], *, title: str = TITLE
) -> JSONObj:
    """The Swagger 2.0 document of every resource given; `schemas` maps each kind to its v3 schema."""
    paths: JSONObj = {}
    definitions: JSONObj = {}
    for resource in resources:
        paths.update({item.path: _path(item) for item in path_items(resource)})
        for name, schema in kind_definitions(resource, schemas[resource.kind], _ref).items():
            definitions[name] = swagger_schema(schema)
    versions = sorted({r.version for r in resources})
    return {
        "swagger": "2.0",
        "info": {"title": title, "version": ",".join(versions) or "unversioned"},
        "paths": paths,
        "definitions": definitions,
    }
