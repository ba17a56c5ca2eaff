"""What a request asks for, in the attributes a SubjectAccessReview and the router need.

Mirrors kube-apiserver's RequestInfo (guide §3.1): `/apis/<group>/<version>/[namespaces/<ns>/]<resource>
[/<name>[/<subresource>]]` becomes a resource request with a verb from the method (GET is get, list or
watch; DELETE on a collection is deletecollection); a `metadata.name=` field selector on a list or watch
lifts the name; anything else (discovery, /openapi, /healthz) is a non-resource request on its path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["RequestInfo", "is_watch", "parse"]

_ITEM_VERBS = {
    "GET": "get",
    "HEAD": "get",
    "POST": "create",  # a subresource question (instancetypes/fit), as kube reads pods/eviction
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
_COLLECTION_VERBS = {"GET": "list", "HEAD": "list", "POST": "create", "DELETE": "deletecollection"}


@dataclass(frozen=True)
class RequestInfo:
    """The attributes of one request; `path` and `verb` alone for a non-resource request."""

    path: str
    verb: str
    is_resource: bool = False
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""


def is_watch(query: Mapping[str, str]) -> bool:
    """kube's reading of `watch`: present with any value but "0" or "false" (so `watch=` is a watch too)."""
    if "watch" not in query:
        return False
    return query["watch"].lower() not in ("0", "false")


def _name_from_selector(selector: str) -> str:
    """The name an exact `metadata.name=<x>` (or `==`) term pins, else ""."""
    for term in selector.split(","):
        field, sep, value = term.partition("=")
        if sep and field.strip() == "metadata.name" and not field.endswith("!"):
            return value.removeprefix("=").strip()
    return ""


def parse(method: str, path: str, query: Mapping[str, str]) -> RequestInfo:
    """The RequestInfo of `method path?query` (an unknown method on a resource keeps its lower-case name)."""
    parts = [p for p in path.split("/") if p]
    if len(parts) < 4 or parts[0] != "apis":
        return RequestInfo(path=path, verb=method.lower())
    group, version, rest = parts[1], parts[2], parts[3:]
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    elif rest[0] == "namespaces" and len(rest) == 2:
        # /namespaces/<ns> itself is the namespace object, not a resource of ours.
        return RequestInfo(path=path, verb=method.lower())
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if name:
        verb = _ITEM_VERBS.get(method, method.lower())
    else:
        verb = _COLLECTION_VERBS.get(method, method.lower())
        if verb == "list" and is_watch(query):
            verb = "watch"
        if verb in ("list", "watch"):
            name = _name_from_selector(query.get("fieldSelector", ""))
    return RequestInfo(
        path=path,
        verb=verb,
        is_resource=True,
        group=group,
        version=version,
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name=name,
    )
