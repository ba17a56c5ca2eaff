"""Discovery documents for the group versions we serve (guide §1.1).

`GET /apis/<group>/<version>` answers an APIResourceList: the aggregator's availability probe (no Accept
header, 5 s budget) and its legacy discovery read it, so it is computed from static descriptions only,
never from informers or the API server. We publish exactly the resources and verbs we implement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube.client import APPLY_PATCH, JSON_PATCH, MERGE_PATCH

__all__ = ["Reader", "ServedResource", "resource_list"]


@dataclass(frozen=True)
class Reader:
    """A read-only subresource that answers something other than the kind (a Pod's log, an EventList):
    discovery lists it with its verb, OpenAPI describes its query parameters and answer.

    Most are read with `get`; a question that needs a body (`instancetypes/fit`, like a
    SubjectAccessReview) is asked with `create`: POSTed in the answer's own shape, its spec filled, and
    answered with its status filled, nothing stored."""

    name: str
    description: str
    schema: JSONObj
    """The answer's schema, inline (a string for text)."""
    produces: str = "application/json"
    query: tuple[str, ...] = ()
    """The query parameters it reads (openapi_paths knows their types)."""
    verb: str = "get"
    """`get`, or `create` for a question POSTed with a body of `schema`."""
    kind: str = ""
    """The kind discovery names for it (the resource's own when empty, as pods/log names Pod; a question
    names its own, as pods/eviction names Eviction)."""


@dataclass(frozen=True)
class ServedResource:
    """One resource of a served group version, as discovery describes it."""

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    verbs: tuple[str, ...]
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(name, verbs) of each subresource, e.g. ("status", ("get", "patch", "update"))."""
    patch_types: tuple[str, ...] = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH)
    """The Content-Types PATCH accepts (any other is a 415, strategic merge included); the handlers check
    a request against these and OpenAPI advertises exactly these."""
    readers: tuple[Reader, ...] = ()
    """Read-only subresources with answers of their own (`instances/log`)."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def entries(self) -> list[JSONObj]:
        main: JSONObj = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": sorted(self.verbs),
        }
        if self.short_names:
            main["shortNames"] = list(self.short_names)
        if self.categories:
            main["categories"] = list(self.categories)
        subs = [
            {
                "name": f"{self.plural}/{name}",
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": kind or self.kind,
                "verbs": sorted(verbs),
            }
            for name, verbs, kind in (
                *((name, verbs, "") for name, verbs in self.subresources),
                *((r.name, (r.verb,), r.kind) for r in self.readers),
            )
        ]
        return [main, *subs]


def resource_list(group_version: str, resources: Sequence[ServedResource]) -> JSONObj:
    """The APIResourceList of one group version."""
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": [e for r in resources if r.api_version == group_version for e in r.entries()],
    }
