"""The quota a pool's ClusterQueue advertises, computed from the pool's live ResourceFlavors (contract §7.9).

Kueue admits by the ClusterQueue's resource groups, and the only truthful source of a pool's size is its
ResourceFlavors: each carries `<featureKey>.capacity` (contributing nodes × per-node count) and encodes the
per-node count in its name (`…-<n>c` CPUs, `…-<n>d` cards). An accelerated pool rations its maker's
credits (`credits.gpustack.ai/<mfr>`, one card = 1_600_000), a CPU pool `cpu`. Kueue v0.17 refuses a pod
whose request names a resource its queue does not cover (it has no `quotaCheckStrategy: IgnoreUndeclared`),
and accelerated pods ask for CPU too, so an accelerated queue also covers `cpu`, with a quota no pool
reaches (`UNRATIONED_CPU` per flavor): CPU is not what it rations, and the scheduler still places pods by
the nodes' real CPU. Memory and storage are kept out by Kueue's configuration (rules.capacity.kueueconfig).
Flavors go smallest
per-node count first so Kueue fills small nodes before big ones. Kueue lets a resource appear in one group
only, and a group hold at most 64 flavors, so the quota is one group; flavors beyond 64 are left out. The
reservation test here is what decides whether a queue can be emptied without Kueue's counters going negative
and whether a draining queue still reads as Draining. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from gpustack_operator.api.keys import (
    ACCELERATABLE_FEATURE_PREFIX,
    ACCELERATABLE_LABEL,
    CAPACITY_SUFFIX,
    GENERAL_FEATURE_PREFIX,
)
from gpustack_operator.api.quantity import InvalidQuantityError, Quantity
from gpustack_operator.api.types.kueue import FlavorQuotas, ResourceGroup, ResourceQuota
from gpustack_operator.rules.capacity.credits import CREDITS_PER_CARD
from gpustack_operator.rules.naming.groups import key_manufacturer
from gpustack_operator.rules.naming.labels import TRUE
from gpustack_operator.rules.naming.resources import credits_resource_name

CPU: Final = "cpu"
UNRATIONED_CPU: Final = "1M"
"""The cpu quota of each flavor of an accelerated queue: a million cores, i.e. not rationed."""
MAX_FLAVORS_PER_GROUP: Final = 64
"""Kueue v0.17's limit on flavors in one resource group."""
_COUNT_SUFFIX: Final = re.compile(r"-([0-9]+)[cd]$")


def flavor_count(name: str) -> int:
    """The per-node count a node flavor's name ends with (`…-16c` -> 16, `…-8d` -> 8); 0 when it has none."""
    found = _COUNT_SUFFIX.search(name)
    return int(found[1]) if found else 0


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, dict) else {}


def own_feature_key(labels: Mapping[str, str]) -> str | None:
    """The feature key whose `.capacity` sizes the flavor: its card's key, or its CPU key on a CPU flavor.

    An accelerated flavor also carries its node's CPU key (without a capacity), so the prefix is chosen by
    the flavor's acceleratable boolean; None when no such key carries a positive capacity.
    """
    accelerated = labels.get(ACCELERATABLE_LABEL) == TRUE
    prefix = ACCELERATABLE_FEATURE_PREFIX if accelerated else GENERAL_FEATURE_PREFIX
    owned = (key for key in sorted(labels) if key.startswith(prefix) and labels[key] == TRUE)
    return next((key for key in owned if _positive_int(labels.get(key + CAPACITY_SUFFIX))), None)


def _positive_int(text: object) -> int:
    return int(text) if isinstance(text, str) and text.isascii() and text.isdigit() else 0


def flavor_capacity(labels: Mapping[str, str]) -> int:
    """The flavor's pooled capacity (nodes × per-node count) from its own `.capacity`; 0 when unknown."""
    key = own_feature_key(labels)
    return 0 if key is None else _positive_int(labels.get(key + CAPACITY_SUFFIX))


def flavor_resource(labels: Mapping[str, str]) -> str | None:
    """What the flavor's capacity is counted in: `credits.gpustack.ai/<mfr>` for cards, `cpu` for CPUs."""
    key = own_feature_key(labels)
    if key is None:
        return None
    if key.startswith(ACCELERATABLE_FEATURE_PREFIX):
        return credits_resource_name(key_manufacturer(key.removeprefix(ACCELERATABLE_FEATURE_PREFIX)))
    return CPU


def resource_groups(flavors: Iterable[Mapping[str, Any]]) -> list[ResourceGroup]:
    """The queue's resource groups for these (live) flavors: one group, smallest per-node count first.

    The covered resource is the first usable flavor's; a flavor counted in another resource, or without a
    capacity, is left out (it cannot share the group). Empty when no flavor is usable.
    """
    usable = []
    for flavor in flavors:
        name, labels = (flavor.get("metadata") or {}).get("name"), _labels(flavor)
        resource, capacity = flavor_resource(labels), flavor_capacity(labels)
        if isinstance(name, str) and name and resource is not None and capacity > 0:
            usable.append((flavor_count(name), name, resource, capacity))
    if not usable:
        return []
    usable.sort()
    covered = usable[0][2]
    unrationed: list[ResourceQuota] = []
    if covered != CPU:
        unrationed.append({"name": CPU, "nominalQuota": UNRATIONED_CPU})
    quotas: list[FlavorQuotas] = [
        {
            "name": name,
            "resources": [{"name": covered, "nominalQuota": _nominal(covered, capacity)}, *unrationed],
        }
        for _, name, resource, capacity in usable
        if resource == covered
    ]
    resources = [covered, *(quota["name"] for quota in unrationed)]
    return [{"coveredResources": resources, "flavors": quotas[:MAX_FLAVORS_PER_GROUP]}]


def _nominal(resource: str, capacity: int) -> str:
    return str(Quantity(capacity if resource == CPU else capacity * CREDITS_PER_CARD))


def quantity_of(value: object) -> Quantity | None:
    """A quantity field as Kueue may store it (a string, or a bare number); None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    try:
        return Quantity.parse(str(value))
    except InvalidQuantityError:
        return None


def canonical_groups(groups: object) -> object:
    """Resource groups with every quantity in canonical text, so `6400000` and `6400k` compare equal."""
    if isinstance(groups, list):
        return [canonical_groups(item) for item in groups]
    if isinstance(groups, dict):
        return {
            key: _canonical(value) if key == "nominalQuota" else canonical_groups(value)
            for key, value in groups.items()
        }
    return groups


def _canonical(value: object) -> object:
    quantity = quantity_of(value)
    return value if quantity is None else str(quantity)


def same_groups(current: object, desired: Sequence[ResourceGroup]) -> bool:
    """True when the queue's groups already are `desired` (absent counts as empty)."""
    return canonical_groups(current or []) == canonical_groups(list(desired))


def has_reservations(cluster_queue: Mapping[str, Any]) -> bool:
    """The queue still holds reserved quota or reserving/admitted workloads (pending ones hold none)."""
    status = cluster_queue.get("status") or {}
    if status.get("reservingWorkloads") or status.get("admittedWorkloads"):
        return True
    for flavor in status.get("flavorsReservation") or ():
        for usage in (flavor.get("resources") or ()) if isinstance(flavor, dict) else ():
            for field in ("total", "borrowed"):
                amount = quantity_of(usage.get(field, "0")) if isinstance(usage, dict) else None
                if amount is None or not amount.is_zero():
                    return True
    return False
