"""`apiVersion` rewrites between a served and a stored version of one group, both ways.

What is rewritten, per the aggregated-API guide §6.2: the object, a list and each of its items, a watch
event's object (BOOKMARKs too, or client-go drops them), and Table rows' full objects. What is left alone:
Status objects, `meta.k8s.io` objects (Table, PartialObjectMetadata) and `metadata.managedFields`, which
record the version the CRD stored and must stay decodable by it. Inputs are never mutated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import V1, V1ALPHA1, WORKER_GROUP

__all__ = ["WORKER", "VersionPair"]


@dataclass(frozen=True)
class VersionPair:
    """One group served at `served` and stored at `stored`, with identical schemas (a cast)."""

    group: str
    served: str
    stored: str

    @property
    def served_api_version(self) -> str:
        return f"{self.group}/{self.served}"

    @property
    def stored_api_version(self) -> str:
        return f"{self.group}/{self.stored}"

    def to_served(self, doc: JSONObj) -> JSONObj:
        """An object, a List or a Table from the stored version, as the served version shows it."""
        return _rewrite(doc, self.stored_api_version, self.served_api_version)

    def to_stored(self, doc: JSONObj) -> JSONObj:
        """A request body in the served version (an object or an apply patch), for the stored version."""
        return _rewrite(doc, self.served_api_version, self.stored_api_version)

    def event_to_served(self, event: JSONObj) -> JSONObj:
        """A watch event (`{"type", "object"}`); ERROR events carry a Status and pass unchanged."""
        obj = event.get("object")
        if not isinstance(obj, dict):
            return event
        return {**event, "object": self.to_served(obj)}


def _rewrite(doc: JSONObj, old: str, new: str) -> JSONObj:
    if not isinstance(doc, dict):
        return doc
    out = dict(doc)
    if out.get("apiVersion") == old:
        out["apiVersion"] = new
    items = out.get("items")
    if isinstance(items, list):
        out["items"] = [_rewrite(item, old, new) for item in items]
    rows = out.get("rows")
    if out.get("kind") == "Table" and isinstance(rows, list):
        out["rows"] = [_rewrite_row(row, old, new) for row in rows]
    return out


def _rewrite_row(row: Any, old: str, new: str) -> Any:
    if not isinstance(row, dict) or not isinstance(row.get("object"), dict):
        return row
    return {**row, "object": _rewrite(row["object"], old, new)}


WORKER = VersionPair(WORKER_GROUP, V1, V1ALPHA1)
"""Every worker.gpustack.ai kind (InstanceType, Devices, Instance): v1 served by our aggregated API over the
v1alpha1 CRD."""
