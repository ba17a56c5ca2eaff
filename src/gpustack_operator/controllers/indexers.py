"""Secondary indexes of the Kueue kinds, declared once and shared by every controller that queries them.

Why this module exists: "which LocalQueues point at this ClusterQueue", "which ClusterQueues use this
flavor", "which Workloads hold quota in this ClusterQueue" are questions several controllers ask; scanning
the cache on every reconcile grows with the cluster, an index does not. Each index is a name (the field
path, as Kueue's own indexer names it) plus a pure function from an object to the values it is filed under;
a controller lists the `Index` in its ControllerSpec.indexes and asks `cache.by_index(KIND, NAME, value)`.
The manager refuses two different functions under one name on one informer, which is why they live here.
Functions never raise on a half-written object: they file it under nothing. The `POOL_LABEL` indexes answer
the scheduling chain's "which flavors, Devices and queues share a pool's labels" (rules.naming.pools): a
lookup by one label gives the candidates, which the caller then matches against the whole selector.
"""

from __future__ import annotations

from typing import Any, Final

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import (
    RESOURCE_TYPE_INSTANCE_TYPES,
    RESOURCE_TYPE_LABEL,
    RESOURCE_TYPE_NODES,
)
from gpustack_operator.controllerkit.spec import Index
from gpustack_operator.kube.resources import (
    CLUSTER_QUEUES,
    DEVICES,
    LOCAL_QUEUES,
    RESOURCE_FLAVORS,
    WORKLOADS,
)
from gpustack_operator.rules.naming.pools import is_feature_key, pool_flavor_selector

__all__ = [
    "CLUSTER_QUEUES_BY_FLAVOR",
    "CLUSTER_QUEUES_BY_POOL",
    "CLUSTER_QUEUE_FLAVOR",
    "DEVICES_BY_POOL",
    "LOCAL_QUEUES_BY_CLUSTER_QUEUE",
    "LOCAL_QUEUE_CLUSTER_QUEUE",
    "POOL_LABEL",
    "RESOURCE_FLAVORS_BY_POOL",
    "WORKLOADS_BY_CLUSTER_QUEUE",
    "WORKLOADS_WAITING_BY_FLAVOR",
    "WORKLOAD_CLUSTER_QUEUE",
    "WORKLOAD_WAITING_FLAVOR",
    "assigned_flavors",
    "cluster_queue_flavors",
    "cluster_queue_pool",
    "devices_pool",
    "label_pair",
    "labels_of",
    "local_queue_cluster_queue",
    "resource_flavor_pool",
    "workload_cluster_queue",
    "workload_waiting_flavors",
]


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


WORKLOAD_WAITING_FLAVOR: Final = "status.admission.podSetAssignments.flavors.waiting"


def workload_waiting_flavors(wl: JSONObj) -> list[str]:
    """A Workload holding quota but not admitted yet is filed under every ResourceFlavor assigned to it."""
    conditions = {
        c.get("type"): c.get("status") for c in _at(wl, "status", "conditions") or () if isinstance(c, dict)
    }
    if conditions.get("QuotaReserved") != "True" or "True" in (
        conditions.get("Admitted"),
        conditions.get("Finished"),
    ):
        return []
    return assigned_flavors(wl)


def assigned_flavors(wl: JSONObj) -> list[str]:
    """Every ResourceFlavor the Workload's admission assigned to any of its pod sets, sorted."""
    assignments = _at(wl, "status", "admission", "podSetAssignments") or ()
    flavors = (_at(a, "flavors") or {} for a in assignments if isinstance(a, dict))
    return sorted({name for f in flavors if isinstance(f, dict) for v in f.values() for name in _names(v)})


WORKLOADS_WAITING_BY_FLAVOR = Index(WORKLOADS, WORKLOAD_WAITING_FLAVOR, workload_waiting_flavors)
"""What the per-card check re-evaluates when a Devices ledger of a flavor's nodes changes."""


POOL_LABEL: Final = "metadata.labels.pool"
"""Pool labels (`key=value`) an object is selected by: os/arch, the acceleratable boolean, feature keys."""


def label_pair(key: str, value: str) -> str:
    """How a label is spelt as a POOL_LABEL index value."""
    return f"{key}={value}"


def labels_of(obj: JSONObj) -> dict[str, str]:
    """The object's labels with string values (none when metadata or labels are malformed)."""
    labels = _at(obj, "metadata", "labels")
    return {k: v for k, v in labels.items() if isinstance(v, str)} if isinstance(labels, dict) else {}


def _pool_pairs(obj: JSONObj, owner: str) -> list[str]:
    labels = labels_of(obj)
    if labels.get(RESOURCE_TYPE_LABEL) != owner:
        return []
    return sorted(label_pair(k, v) for k, v in (pool_flavor_selector(labels) or {}).items())


def cluster_queue_pool(cq: JSONObj) -> list[str]:
    """An InstanceType's ClusterQueue is filed under each label of its pool's flavor selector."""
    return _pool_pairs(cq, RESOURCE_TYPE_INSTANCE_TYPES)


def resource_flavor_pool(rf: JSONObj) -> list[str]:
    """A node ResourceFlavor is filed under each label a pool's queue could select it by."""
    return _pool_pairs(rf, RESOURCE_TYPE_NODES)


def devices_pool(devices: JSONObj) -> list[str]:
    """A Devices ledger is filed under each feature key it is labelled `true` with."""
    return sorted(
        label_pair(k, v) for k, v in labels_of(devices).items() if is_feature_key(k) and v == "true"
    )


CLUSTER_QUEUES_BY_POOL = Index(CLUSTER_QUEUES, POOL_LABEL, cluster_queue_pool)
RESOURCE_FLAVORS_BY_POOL = Index(RESOURCE_FLAVORS, POOL_LABEL, resource_flavor_pool)
DEVICES_BY_POOL = Index(DEVICES, POOL_LABEL, devices_pool)
