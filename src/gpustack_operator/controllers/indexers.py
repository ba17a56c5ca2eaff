"""Secondary indexes of the Kueue kinds, declared once and shared by every controller that queries them.

Why this module exists: "which LocalQueues point at this ClusterQueue", "which ClusterQueues use this
flavor", "which Workloads hold quota in this ClusterQueue" are questions several controllers ask; scanning
the cache on every reconcile grows with the cluster, an index does not. Each index is a name (the field
path, as Kueue's own indexer names it) plus a pure function from an object to the values it is filed under;
a controller lists the `Index` in its ControllerSpec.indexes and asks `cache.by_index(KIND, NAME, value)`.
The manager refuses two different functions under one name on one informer, which is why they live here.
Functions never raise on a half-written object: they file it under nothing.
"""

from __future__ import annotations

from typing import Any, Final

from gpustack_operator.controllers.spec import Index
from gpustack_operator.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES, WORKLOADS

__all__ = [
    "CLUSTER_QUEUES_BY_FLAVOR",
    "CLUSTER_QUEUE_FLAVOR",
    "LOCAL_QUEUES_BY_CLUSTER_QUEUE",
    "LOCAL_QUEUE_CLUSTER_QUEUE",
    "WORKLOADS_BY_CLUSTER_QUEUE",
    "WORKLOAD_CLUSTER_QUEUE",
    "cluster_queue_flavors",
    "local_queue_cluster_queue",
    "workload_cluster_queue",
]

JSONObj = dict[str, Any]


def _at(obj: Any, *path: str) -> Any:
    """The value at path through nested dicts, or None where any step is missing or not a dict."""
    for step in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(step)
    return obj


def _names(value: Any) -> list[str]:
    return [value] if isinstance(value, str) and value else []


LOCAL_QUEUE_CLUSTER_QUEUE: Final = "spec.clusterQueue"


def local_queue_cluster_queue(lq: JSONObj) -> list[str]:
    """A LocalQueue is filed under the ClusterQueue it feeds."""
    return _names(_at(lq, "spec", "clusterQueue"))


CLUSTER_QUEUE_FLAVOR: Final = "spec.resourceGroups.flavors.name"


def cluster_queue_flavors(cq: JSONObj) -> list[str]:
    """A ClusterQueue is filed under every ResourceFlavor its resource groups give quota for."""
    groups = _at(cq, "spec", "resourceGroups")
    flavors = (f for g in groups or () if isinstance(g, dict) for f in g.get("flavors") or ())
    return sorted({name for f in flavors for name in _names(_at(f, "name"))})


WORKLOAD_CLUSTER_QUEUE: Final = "status.admission.clusterQueue"


def workload_cluster_queue(wl: JSONObj) -> list[str]:
    """A Workload is filed under the ClusterQueue it reserved quota in (nothing while it has none)."""
    return _names(_at(wl, "status", "admission", "clusterQueue"))


LOCAL_QUEUES_BY_CLUSTER_QUEUE = Index(LOCAL_QUEUES, LOCAL_QUEUE_CLUSTER_QUEUE, local_queue_cluster_queue)
CLUSTER_QUEUES_BY_FLAVOR = Index(CLUSTER_QUEUES, CLUSTER_QUEUE_FLAVOR, cluster_queue_flavors)
WORKLOADS_BY_CLUSTER_QUEUE = Index(WORKLOADS, WORKLOAD_CLUSTER_QUEUE, workload_cluster_queue)
