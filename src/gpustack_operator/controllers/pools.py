"""The scheduling chain's lookups in the shared cache: a pool's flavors and Devices, and the queues they feed.

A pool is named by labels, not by names: its ClusterQueue (same name as its InstanceType) carries the pool
schedule labels, and its ResourceFlavors and Devices ledgers are whatever carries the same discriminators
(rules.naming.pools). Both chain controllers ask these questions in both directions (a queue's flavors when
reconciling it; a changed flavor's or Devices' queues when mapping an event), and a settings change
concerns every queue; the answers come from the POOL_LABEL indexes (controllers.indexers), matched
against the whole selector, so foreign objects that happen to share one label never join a pool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import ARCH_LABEL, MANAGED_LABEL, OS_LABEL, RESOURCE_TYPE_LABEL
from gpustack_operator.api.keys import RESOURCE_TYPE_INSTANCE_TYPES as OWNED_QUEUE
from gpustack_operator.controllerkit.cache import Cache
from gpustack_operator.controllerkit.watches import KeyFunc
from gpustack_operator.controllers.indexers import (
    POOL_LABEL,
    devices_pool,
    label_pair,
    labels_of,
    resource_flavor_pool,
)
from gpustack_operator.kube.resources import CLUSTER_QUEUES, DEVICES, RESOURCE_FLAVORS, Resource
from gpustack_operator.rules.naming.labels import TRUE
from gpustack_operator.rules.naming.pools import is_feature_key, pool_flavor_selector

Selector = Mapping[str, str]


def name_of(obj: JSONObj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def deleting(obj: JSONObj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def owned_queue(obj: JSONObj) -> bool:
    """A ClusterQueue the chain owns (an InstanceType's)."""
    return labels_of(obj).get(RESOURCE_TYPE_LABEL) == OWNED_QUEUE


def devices_selector(queue_labels: Selector) -> dict[str, str] | None:
    """The labels of a pool's Devices: the queue's os/arch and `true` feature keys, on managed nodes.

    None when the queue has no feature key (a collapsed CPU pool has no ledger to read).
    """
    keys = {k: v for k, v in queue_labels.items() if is_feature_key(k) and v == TRUE}
    if not keys:
        return None
    pinned = {k: queue_labels[k] for k in (OS_LABEL, ARCH_LABEL) if queue_labels.get(k)}
    return {**pinned, **keys, MANAGED_LABEL: TRUE}


def matches(selector: Selector, obj: JSONObj) -> bool:
    labels = labels_of(obj)
    return all(labels.get(k) == v for k, v in selector.items())


def selected(cache: Cache, resource: Resource, selector: Selector | None) -> list[JSONObj]:
    """Cached objects of the kind carrying every label of `selector` (none for no selector)."""
    if not selector:
        return []
    key, value = max(selector.items(), key=lambda item: is_feature_key(item[0]))
    candidates = cache.by_index(resource, POOL_LABEL, label_pair(key, value))
    return sorted((obj for obj in candidates if matches(selector, obj)), key=name_of)


def pool_flavors(cache: Cache, queue: JSONObj) -> list[JSONObj]:
    """The queue's live ResourceFlavors (a flavor Kueue is still finalizing counts as gone)."""
    found = selected(cache, RESOURCE_FLAVORS, pool_flavor_selector(labels_of(queue)))
    return [flavor for flavor in found if not deleting(flavor)]


def pool_devices(cache: Cache, queue: JSONObj) -> list[JSONObj]:
    """The Devices ledgers of the queue's pool (managed nodes only)."""
    return selected(cache, DEVICES, devices_selector(labels_of(queue)))


def _queues_by(cache: Cache, pairs: list[str], fits: Callable[[JSONObj], bool]) -> list[str]:
    queues = (q for pair in pairs for q in cache.by_index(CLUSTER_QUEUES, POOL_LABEL, pair))
    return sorted({name_of(q) for q in queues if fits(q)})


def queues_of_flavor(cache: Cache) -> KeyFunc:
    """A key function: the queues whose pool a ResourceFlavor belongs to."""

    def keys(flavor: JSONObj) -> list[str]:
        def fits(queue: JSONObj) -> bool:
            selector = pool_flavor_selector(labels_of(queue))
            return selector is not None and matches(selector, flavor)

        return _queues_by(cache, resource_flavor_pool(flavor), fits)

    return keys


def queues_of_devices(cache: Cache) -> KeyFunc:
    """A key function: the queues whose pool a Devices ledger belongs to."""

    def keys(devices: JSONObj) -> list[str]:
        def fits(queue: JSONObj) -> bool:
            selector = devices_selector(labels_of(queue))
            return selector is not None and matches(selector, devices)

        return _queues_by(cache, devices_pool(devices), fits)

    return keys


def every(cache: Cache, resource: Resource, keep: Callable[[JSONObj], bool] = bool) -> KeyFunc:
    """A key function: whatever changed, every cached object of the kind that `keep` accepts."""
    return lambda _: sorted(name_of(obj) for obj in cache.list(resource) if keep(obj))
