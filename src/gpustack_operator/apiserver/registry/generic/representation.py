"""A served object, list or watch event in the representation the client negotiated (guide §3.2, §3.5).

Plain JSON passes through; a Table gets the resource's columns; PartialObjectMetadata(List) keeps only
metadata. Status objects (watch ERROR events) are never transformed. A BOOKMARK becomes a row-less Table
that carries its resourceVersion, as kube's watch encoder does.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpustack_operator.api.json import JSONObj
from gpustack_operator.apiserver.negotiation import Representation
from gpustack_operator.apiserver.table import Column, partial_metadata, table

__all__ = ["render_event", "render_list", "render_object"]


def render_object(rep: Representation, obj: JSONObj, columns: Sequence[Column], include: str) -> JSONObj:
    if rep is Representation.TABLE:
        return table(columns, [obj], list_meta={"resourceVersion": _rv(obj)}, include_object=include)
    if rep is Representation.PARTIAL:
        return partial_metadata(obj)
    return obj


def render_list(rep: Representation, doc: JSONObj, columns: Sequence[Column], include: str) -> JSONObj:
    items = doc.get("items") or []
    meta = doc.get("metadata") or {}
    if rep is Representation.TABLE:
        return table(columns, items, list_meta=meta, include_object=include)
    if rep is Representation.PARTIAL_LIST:
        return {
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": meta,
            "items": [partial_metadata(i) for i in items],
        }
    return {**doc, "items": items}


def render_event(
    rep: Representation, event: JSONObj, columns: Sequence[Column], include: str, *, headers: bool
) -> JSONObj:
    """One watch event; `headers` puts column definitions in a Table (the stream's first event)."""
    obj = event.get("object")
    if not isinstance(obj, dict) or obj.get("kind") == "Status" or rep is Representation.JSON:
        return event
    if rep is Representation.TABLE:
        if event.get("type") == "BOOKMARK":
            rendered = table(columns, [], list_meta={"resourceVersion": _rv(obj)}, headers=headers)
        else:
            rendered = table(
                columns,
                [obj],
                list_meta={"resourceVersion": _rv(obj)},
                include_object=include,
                headers=headers,
            )
        return {**event, "object": rendered}
    return {**event, "object": partial_metadata(obj)}


def _rv(obj: JSONObj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
