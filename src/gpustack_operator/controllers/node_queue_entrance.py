"""NodeQueueEntranceReconciler: a LocalQueue for every pool's ClusterQueue in every user namespace.

Why this module exists: Kueue admits a Pod only through a LocalQueue of its own namespace, so each
InstanceType's ClusterQueue (labelled `resource.gpustack.ai/type=instancetypes`) needs an entrance in
every namespace but the system namespace and kube-system, including namespaces created later (contract
§7.9). The Pod label naming the queue holds 63 characters while ClusterQueue names may be longer, so the
LocalQueue is `format_local_queue_name(cq)` and carries the full name in `schedule.gpustack.ai/queue`.
It is controlled by the ClusterQueue, so it goes when the queue goes.

The key is one entrance, `<namespace>/<cluster queue>`: a new queue enqueues one key per namespace, a new
namespace one key per queue, a LocalQueue someone deleted or changed its own key, and each reconcile
reads three cached objects and writes only when the LocalQueue is missing or differs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, cast

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import QUEUE_ANNOTATION, RESOURCE_TYPE_INSTANCE_TYPES, RESOURCE_TYPE_LABEL
from gpustack_operator.api.types import kueue
from gpustack_operator.controllerkit.cache import Cache
from gpustack_operator.controllerkit.rbac import Rule
from gpustack_operator.controllerkit.reconciler import DONE, Result
from gpustack_operator.controllerkit.spec import ControllerSpec
from gpustack_operator.controllerkit.watches import Watch, mapped
from gpustack_operator.controllers.dependencies import Dependencies
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES, NAMESPACES
from gpustack_operator.rules.naming.queues import format_local_queue_name

__all__ = ["FIELD_MANAGER", "KUBE_SYSTEM", "NodeQueueEntranceReconciler", "controller", "local_queue"]

log = logging.getLogger(__name__)

FIELD_MANAGER = "gpustack-node-queue-entrance"
KUBE_SYSTEM = "kube-system"
Keys = Callable[[JSONObj], list[str]]


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _live(obj: Mapping[str, Any] | None) -> bool:
    return obj is not None and not _meta(obj).get("deletionTimestamp")


def is_entrance_queue(cq: Mapping[str, Any]) -> bool:
    """An InstanceType's ClusterQueue, which every user namespace gets an entrance to."""
    return (_meta(cq).get("labels") or {}).get(RESOURCE_TYPE_LABEL) == RESOURCE_TYPE_INSTANCE_TYPES


def local_queue(namespace: str, cq: Mapping[str, Any]) -> kueue.LocalQueue:
    """The entrance LocalQueue of ClusterQueue `cq` in `namespace`."""
    name = str(_meta(cq)["name"])
    owner = {
        "apiVersion": kueue.API_VERSION,
        "kind": CLUSTER_QUEUES.kind,
        "name": name,
        "uid": _meta(cq).get("uid", ""),
        "controller": True,
    }
    return {
        "apiVersion": kueue.API_VERSION,
        "kind": LOCAL_QUEUES.kind,
        "metadata": {
            "name": format_local_queue_name(name),
            "namespace": namespace,
            "annotations": {QUEUE_ANNOTATION: name},
            "ownerReferences": [owner],
        },
        "spec": {"clusterQueue": name},
    }


def _in_place(have: Mapping[str, Any], cq: Mapping[str, Any]) -> bool:
    """The cached LocalQueue already is the entrance (others' annotations and owners may be there too)."""
    meta, name, uid = _meta(have), _meta(cq)["name"], _meta(cq).get("uid")
    owned = any(
        (ref.get("kind"), ref.get("name"), ref.get("uid")) == (CLUSTER_QUEUES.kind, name, uid)
        and ref.get("controller") is True
        and not ref.get("blockOwnerDeletion")
        for ref in meta.get("ownerReferences") or ()
    )
    noted = (meta.get("annotations") or {}).get(QUEUE_ANNOTATION) == name
    return owned and noted and _feeds(have) == name


def _feeds(lq: Mapping[str, Any]) -> Any:
    """The ClusterQueue a LocalQueue feeds (spec.clusterQueue)."""
    return (lq.get("spec") or {}).get("clusterQueue")


class NodeQueueEntranceReconciler:
    def __init__(self, client: Client, cache: Cache, excluded: frozenset[str]) -> None:
        self.client, self.cache, self.excluded = client, cache, excluded

    async def reconcile(self, key: str) -> Result:
        namespace, _, cq_name = key.partition("/")
        if namespace in self.excluded or not _live(self.cache.get(NAMESPACES, namespace)):
            return DONE  # a terminating namespace refuses new objects; a gone one needs none
        cq = self.cache.get(CLUSTER_QUEUES, cq_name)
        if cq is None or not _live(cq) or not is_entrance_queue(cq):
            return DONE  # its LocalQueues are garbage-collected with it
        want = local_queue(namespace, cq)
        lq_key = f"{namespace}/{want['metadata']['name']}"
        have = self.cache.get(LOCAL_QUEUES, lq_key)
        if have is not None and _in_place(have, cq):
            return DONE
        feeds = _feeds(have or {})
        if feeds and feeds != cq_name:  # spec.clusterQueue is immutable: not ours to repoint
            log.warning("localqueue=%s feeds clusterqueue=%s, not %s; left alone", lq_key, feeds, cq_name)
            return DONE
        await self.client.apply(LOCAL_QUEUES, cast(JSONObj, want), field_manager=FIELD_MANAGER)
        log.info("localqueue=%s %s for clusterqueue=%s", lq_key, "fixed" if have else "created", cq_name)
        return DONE


def _queue_added_or_relabelled(old: JSONObj | None, new: JSONObj | None) -> bool:
    return new is not None and (old is None or _meta(old).get("labels") != _meta(new).get("labels"))


def _namespace_added(old: JSONObj | None, new: JSONObj | None) -> bool:
    return old is None and new is not None


def _entrance_touched(old: JSONObj | None, new: JSONObj | None) -> bool:
    """Not the LocalQueue's status (its counters move with every workload): gone, re-pointed, re-owned."""
    if old is None or new is None:
        return True
    fields = ("annotations", "ownerReferences")
    return old.get("spec") != new.get("spec") or any(_meta(old).get(f) != _meta(new).get(f) for f in fields)


def _watches(cache: Cache, excluded: frozenset[str]) -> tuple[Watch, Watch, Watch]:
    """(ClusterQueues, Namespaces, LocalQueues), each mapped to the entrance keys it affects."""

    def per_namespace(cq: JSONObj) -> list[str]:
        if not is_entrance_queue(cq):
            return []
        names = (str(_meta(ns).get("name")) for ns in cache.list(NAMESPACES))
        return [f"{ns}/{_meta(cq)['name']}" for ns in names if ns not in excluded]

    def per_queue(namespace: JSONObj) -> list[str]:
        ns = str(_meta(namespace).get("name"))
        queues = (cq for cq in cache.list(CLUSTER_QUEUES) if is_entrance_queue(cq))
        return [] if ns in excluded else [f"{ns}/{_meta(cq)['name']}" for cq in queues]

    def own(lq: JSONObj) -> list[str]:
        meta = _meta(lq)
        cq = (lq.get("spec") or {}).get("clusterQueue") or (meta.get("annotations") or {}).get(
            QUEUE_ANNOTATION
        )
        ours = isinstance(cq, str) and meta.get("name") == format_local_queue_name(cq)
        return [f"{meta.get('namespace')}/{cq}"] if ours else []

    return (
        mapped(CLUSTER_QUEUES, per_namespace, _queue_added_or_relabelled),
        mapped(NAMESPACES, per_queue, _namespace_added),
        mapped(LOCAL_QUEUES, own, _entrance_touched),
    )


def controller(deps: Dependencies) -> ControllerSpec:
    excluded = frozenset({deps.environment.pod_namespace, KUBE_SYSTEM})
    queues, namespaces, local_queues = _watches(deps.cache, excluded)
    return ControllerSpec(
        name="node-queue-entrance",
        reconciler=NodeQueueEntranceReconciler(deps.client, deps.cache, excluded),
        primary=queues,
        watches=(namespaces, local_queues),
        concurrency=4,
        rbac=(Rule.of(LOCAL_QUEUES, "create", "patch"),),
    )
