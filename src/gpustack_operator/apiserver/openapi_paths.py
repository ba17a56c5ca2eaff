"""What our OpenAPI documents say, before either dialect writes it down (guide §2.2, §2.3).

`/openapi/v2` (Swagger 2.0, merged by the aggregator) and `/openapi/v3` (proxied per group version) must
describe the same paths, verbs, parameters and kinds, or `kubectl explain` and kubectl's validation probe
would disagree depending on which one they read. So the paths and operations of each `ServedResource`,
and the kind and list schemas with their `x-kubernetes-group-version-kind`, are decided here once;
`openapi.py` and `swagger.py` only render them.

Patch and Status bodies are inline schemas, never `io.k8s.apimachinery.*` definitions: the v2 merge renames
a definition whose content differs from kube-apiserver's own (`..._v2`), so we define only our kinds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gpustack_operator.api.json import JSONObj
from gpustack_operator.apiserver.discovery import Reader, ServedResource

__all__ = [
    "PATCH_SCHEMA",
    "STATUS_SCHEMA",
    "TITLE",
    "Operation",
    "PathItem",
    "definition_name",
    "kind_definitions",
    "param_type",
    "path_items",
    "payload",
]

Body = Literal["object", "patch", "inline"]
Response = Literal["object", "list", "status", "inline"]

TITLE = "GPUStack - Open Source Accelerator Management Platform"
PATCH_SCHEMA: JSONObj = {
    "description": "The body of a PATCH request; its Content-Type names the patch type.",
    "type": "object",
}
STATUS_SCHEMA: JSONObj = {
    "description": "A Kubernetes Status: the answer to a failed call or to a delete.",
    "type": "object",
}

_PARAM_TYPES = {
    "force": "boolean",
    "watch": "boolean",
    "limit": "integer",
    "gracePeriodSeconds": "integer",
    "follow": "boolean",
    "previous": "boolean",
    "timestamps": "boolean",
    "tailLines": "integer",
    "sinceSeconds": "integer",
    "limitBytes": "integer",
}
_WRITE = ("dryRun", "fieldManager", "fieldValidation")
_LIST = ("labelSelector", "fieldSelector", "resourceVersion", "limit", "continue", "watch")
_ID_VERBS = {
    "list": "list",
    "post": "create",
    "deletecollection": "deleteCollection",
    "get": "read",
    "put": "replace",
    "patch": "patch",
    "delete": "delete",
}


def param_type(name: str) -> str:
    """The JSON type of a query parameter (strings unless listed)."""
    return _PARAM_TYPES.get(name, "string")


@dataclass(frozen=True)
class Operation:
    """One HTTP method on one path, as both dialects publish it."""

    method: str
    """get, post, put, patch or delete."""
    action: str
    """`x-kubernetes-action`."""
    operation_id: str
    query: tuple[str, ...]
    body: Body | None
    response: Response
    gvk: JSONObj
    """The object-valued `x-kubernetes-group-version-kind` kubectl matches patch operations by."""
    definition: str
    """The kind's definition name (its list's is this plus `List`)."""
    consumes: tuple[str, ...]
    """The body's Content-Types: the resource's patch types for a patch, else JSON; () without a body."""
    produces: str = "application/json"
    """The answer's Content-Type."""
    schema: JSONObj | None = None
    """The answer's inline schema, for an `inline` response (a Reader's); an `inline` body is of it too."""


@dataclass(frozen=True)
class PathItem:
    path: str
    path_params: tuple[str, ...]
    operations: tuple[Operation, ...]


def definition_name(resource: ServedResource, suffix: str = "") -> str:
    """`ai.gpustack.worker.v1.InstanceType`: reversed group, so no kube or CRD definition has it."""
    reversed_group = ".".join(reversed(resource.group.split(".")))
    return f"{reversed_group}.{resource.version}.{resource.kind}{suffix}"


def _gvk(resource: ServedResource, kind: str = "") -> JSONObj:
    return {"group": resource.group, "version": resource.version, "kind": kind or resource.kind}


def _camel(text: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in text.replace("-", ".").split("."))


class _Ops:
    """Builds the operations of one path of one resource; `suffix` names a subresource or scope in ids."""

    def __init__(self, resource: ServedResource, namespaced: bool, suffix: str = "") -> None:
        self.resource = resource
        scope = "Namespaced" if namespaced else ""
        self.id_tail = f"{_camel(resource.group)}{_camel(resource.version)}{scope}{resource.kind}{suffix}"
        self.ops: list[Operation] = []

    def add(
        self, method: str, action: str, query: tuple[str, ...], body: Body | None, response: Response
    ) -> None:
        op_id = _ID_VERBS[action] + self.id_tail
        gvk, kind = _gvk(self.resource), definition_name(self.resource)
        consumes = {None: (), "object": ("application/json",), "patch": self.resource.patch_types}[body]
        self.ops.append(Operation(method, action, op_id, query, body, response, gvk, kind, consumes))

    def reader(self, reader: Reader) -> _Ops:
        """The one operation of a read-only subresource, answering its own schema: a GET, or for a
        `create` question a POST whose body is of that same schema."""
        asks = reader.verb == "create"
        method = "post" if asks else "get"
        gvk, kind = _gvk(self.resource), definition_name(self.resource)
        self.ops.append(
            Operation(
                method,
                method,
                _ID_VERBS[method] + self.id_tail,
                reader.query,
                "inline" if asks else None,
                "inline",
                gvk,
                kind,
                ("application/json",) if asks else (),
                reader.produces,
                reader.schema,
            )
        )
        return self

    def writes(self, verbs: frozenset[str]) -> _Ops:
        """get/update/patch of one object (the item path, or a subresource)."""
        if "get" in verbs:
            self.add("get", "get", (), None, "object")
        if "update" in verbs:
            self.add("put", "put", _WRITE, "object", "object")
        if "patch" in verbs:
            self.add("patch", "patch", (*_WRITE, "force"), "patch", "object")
        return self


def path_items(resource: ServedResource) -> list[PathItem]:
    """Every path of `resource` that has at least one operation, in a stable order.

    A namespaced resource gets `/namespaces/{namespace}/<plural>[/{name}[/<sub>]]` and the
    cross-namespace list `/<plural>`, as kube-apiserver publishes its own namespaced kinds.
    """
    prefix = f"/apis/{resource.group}/{resource.version}"
    verbs = frozenset(resource.verbs)
    items: list[PathItem] = []
    scoped = ("namespace",) if resource.namespaced else ()
    base = f"{prefix}/namespaces/{{namespace}}/{resource.plural}" if scoped else f"{prefix}/{resource.plural}"
    if scoped and "list" in verbs:
        everywhere = _Ops(resource, namespaced=False, suffix="ForAllNamespaces")
        everywhere.add("get", "list", _LIST, None, "list")
        items.append(PathItem(f"{prefix}/{resource.plural}", (), tuple(everywhere.ops)))
    collection = _Ops(resource, resource.namespaced)
    if "list" in verbs:
        collection.add("get", "list", _LIST, None, "list")
    if "create" in verbs:
        collection.add("post", "post", _WRITE, "object", "object")
    if "deletecollection" in verbs:
        collection.add("delete", "deletecollection", (), None, "status")
    items.append(PathItem(base, scoped, tuple(collection.ops)))
    item = _Ops(resource, resource.namespaced).writes(verbs)
    if "delete" in verbs:
        item.add("delete", "delete", ("dryRun", "gracePeriodSeconds"), None, "object")
    items.append(PathItem(f"{base}/{{name}}", (*scoped, "name"), tuple(item.ops)))
    for sub, sub_verbs in resource.subresources:
        ops = _Ops(resource, resource.namespaced, suffix=_camel(sub)).writes(frozenset(sub_verbs))
        items.append(PathItem(f"{base}/{{name}}/{sub}", (*scoped, "name"), tuple(ops.ops)))
    for reader in resource.readers:
        ops = _Ops(resource, resource.namespaced, suffix=_camel(reader.name)).reader(reader)
        items.append(PathItem(f"{base}/{{name}}/{reader.name}", (*scoped, "name"), tuple(ops.ops)))
    return [item for item in items if item.operations]


def payload(op: Operation, what: Body | Response, ref: Callable[[str], JSONObj]) -> JSONObj:
    """The schema of a request body or response of `op`; `ref(name)` writes a reference in the dialect."""
    if what == "object":
        return ref(op.definition)
    if what == "list":
        return ref(op.definition + "List")
    if what == "inline":
        return dict(op.schema or {})
    return dict(PATCH_SCHEMA if what == "patch" else STATUS_SCHEMA)


def kind_definitions(
    resource: ServedResource, schema: Mapping[str, Any], ref: Callable[[str], JSONObj]
) -> dict[str, JSONObj]:
    """The kind's schema and its List's, each with the list-valued gvk `kubectl explain` looks up.

    `ref(name)` writes a reference in the rendering dialect; `schema` is the kind's (the CRD's) schema.
    """
    kind = definition_name(resource)
    return {
        kind: {**schema, "x-kubernetes-group-version-kind": [_gvk(resource)]},
        definition_name(resource, "List"): {
            "description": f"{resource.kind}List is a list of {resource.kind}.",
            "type": "object",
            "required": ["items"],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "items": {"type": "array", "items": ref(kind)},
            },
            "x-kubernetes-group-version-kind": [_gvk(resource, f"{resource.kind}List")],
        },
    }
