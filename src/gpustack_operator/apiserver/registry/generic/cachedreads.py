"""GET and LIST of a proxied resource from the worker's informer cache, when that answers them correctly.

Why this module exists: proxying every read to the CRD costs a round trip, a decode and a re-encode (a
LIST of 100 InstanceTypes was 1.85x reading the CRD directly; issue 11 wants 1.3x). The worker already
holds every v1alpha1 InstanceType in its shared informer, so reads come from there, as the Go original's
controller-runtime client reads from its cache. Each method answers the stored-version document, or None:
then the caller asks the API server exactly as before. Nothing here waits.

resourceVersion rules (guide §3.3). Versions are opaque except for one comparison, "the cache has seen
at least N", done on integers: etcd revisions are what kube-apiserver hands out, and kube itself compares
them this way for NotOlderThan. From the cache:
- LIST with no resourceVersion, or "0", or N with no match / `NotOlderThan` when the cache has seen N.
  "No resourceVersion" means "most recent" to kube; the cache answers it as it was at its last event, the
  staleness controller-runtime's cached client accepts. Writes made through this proxy are not lost to it:
  the highest version a write answered with is a floor, and until the informer has seen it every read
  goes to the API server (read-your-writes for clients of v1; a write straight to the CRD is seen once the
  watch delivers it, usually within milliseconds). A delete answers with the object as it was, so a list
  right after one may still show it for that moment; a watch from that list's version then delivers the
  DELETED event (what `kubectl delete --wait` relies on). A deletecollection's answer is a list, whose
  version is etcd's revision of the moment, not an InstanceType event the informer would ever see: it sets
  no floor.
- `limit` only when everything that matches fits (no continue token is ever made).
- Selectors as selectors.py parses them.
To the API server: `resourceVersionMatch=Exact`, `continue`, `sendInitialEvents`, any parameter not named
in `LIST_PARAMS`, a selector not parsed, an unsynced cache or one that lost its version (a 410 relist).

GET: from the cache when the object is there (and the version rules above hold); a miss asks the API
server, so a just-created object is never a false 404. A GET in plain JSON must carry the object's
`metadata.managedFields` (`kubectl apply --server-side` reads them through GET to migrate client-side-
apply ownership), which informers drop to save memory (kube/slim.py): the worker's InstanceType informer
keeps them (`Informer.keep_managed_fields`, set by the aggregated API), and a cached object without them
is read from the API server instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from gpustack_operator.api.json import JSONObj
from gpustack_operator.apiserver.negotiation import Representation
from gpustack_operator.apiserver.registry.generic.selectors import parse_selectors
from gpustack_operator.kube.resources import Resource
from gpustack_operator.kube.store import Store

__all__ = ["GET_PARAMS", "LIST_PARAMS", "CachedReads", "Informed", "decimal", "object_version"]


LIST_PARAMS = frozenset(
    {
        "labelSelector",
        "fieldSelector",
        "limit",
        "resourceVersion",
        "resourceVersionMatch",
        "timeoutSeconds",
        "allowWatchBookmarks",
        "pretty",
    }
)
"""Query parameters a cached LIST honours (or may ignore, as kube does on a list); any other: the API."""
GET_PARAMS = frozenset({"resourceVersion", "pretty"})


class Informed(Protocol):
    """The part of kube.informer.Informer read here."""

    resource_version: str

    @property
    def store(self) -> Store: ...

    def has_synced(self) -> bool: ...


def decimal(text: str) -> int | None:
    """A non-negative decimal (a resourceVersion compared as an etcd revision, a limit), else None."""
    return int(text) if text.isascii() and text.isdigit() else None


def object_version(obj: Any) -> int | None:
    """An object's resourceVersion as a number, or None."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return decimal(str((meta or {}).get("resourceVersion") or ""))


class CachedReads:
    """Cache-first reads of one cluster-scoped resource; `informer` None: every read goes to the API."""

    def __init__(self, stored: Resource, informer: Informed | None) -> None:
        self.stored = stored
        self.informer = informer
        self.floor = 0
        """The highest resourceVersion a write through the proxy answered with."""
        self.served = self.passed = 0
        """Reads answered from the cache, and reads left to the API server (for tests and benches)."""

    def wrote(self, answer: Any) -> None:
        """Note a write's answer: reads wait for the cache to reach its version."""
        if isinstance(answer, dict) and "items" in answer:
            return
        version = object_version(answer)
        if version is not None and version > self.floor:
            self.floor = version

    def list(self, params: Mapping[str, str]) -> JSONObj | None:
        """The stored-version list the API server would answer, or None: ask it."""
        doc = self._list(params)
        self._count(doc)
        return doc

    def get(self, name: str, params: Mapping[str, str], rep: Representation) -> JSONObj | None:
        """The stored-version object, or None: ask the API server (a miss, JSON, or the version rules)."""
        obj = self._get(name, params, rep)
        self._count(obj)
        return obj

    def _count(self, answer: JSONObj | None) -> None:
        if answer is None:
            self.passed += 1
        else:
            self.served += 1

    def _get(self, name: str, params: Mapping[str, str], rep: Representation) -> JSONObj | None:
        if not params.keys() <= GET_PARAMS:
            return None
        store = self._store(params.get("resourceVersion", ""))
        obj = store.get(name) if store is not None else None
        if obj is not None and rep is Representation.JSON and "managedFields" not in obj["metadata"]:
            return None  # a slimmed copy: the plain object must carry its managedFields
        return obj

    def _list(self, params: Mapping[str, str]) -> JSONObj | None:
        if not params.keys() <= LIST_PARAMS:
            return None
        match_rule = params.get("resourceVersionMatch", "")
        if match_rule not in ("", "NotOlderThan") or (match_rule and not params.get("resourceVersion")):
            return None  # Exact, or a rule kube refuses: its answer, not ours
        limit = decimal(params.get("limit", "0") or "0")
        match = parse_selectors(params.get("labelSelector", ""), params.get("fieldSelector", ""))
        if limit is None or match is None:
            return None
        store = self._store(params.get("resourceVersion", ""))
        if store is None or self.informer is None:
            return None
        version = self.informer.resource_version
        items = sorted(
            (obj for obj in store.list() if match(obj)),
            key=lambda obj: str((obj.get("metadata") or {}).get("name", "")),
        )
        if limit and len(items) > limit:
            return None
        return {
            "apiVersion": self.stored.api_version,
            "kind": f"{self.stored.kind}List",
            "metadata": {"resourceVersion": version},
            "items": items,
        }

    def _store(self, wanted: str) -> Store | None:
        """The informer's store when it may answer a read at `wanted` ("" and "0": any), else None."""
        informer = self.informer
        if informer is None or not informer.has_synced():
            return None
        seen = decimal(informer.resource_version)
        need = decimal(wanted) if wanted else 0
        if seen is None or need is None or seen < max(need, self.floor):
            return None
        return informer.store
