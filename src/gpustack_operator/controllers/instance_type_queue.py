"""The ClusterQueue an InstanceType owns: its labels, its spec at creation, and the Inactive↔StopPolicy rule.

An InstanceType is served by the ClusterQueue of its name (contract §7.9). That queue must carry the pool's
schedule labels, derived from the type's spec identity (never from its metadata), so the NodeQueue
reconciler can find the pool's flavors and this one its Devices; a feature key left over from an earlier
identity would match no pool, so such labels are pruned. The isolation (no cohort, no borrowing) and the
all-namespaces selector are written once, at creation: afterwards the quota belongs to the NodeQueue
reconciler and the rest to the admin. Inactive and StopPolicy are kept in step by `inactive_action`:
Inactive holds a running queue (Hold, never HoldAndDrain, so running work keeps running), clearing it
resumes a held one, and a queue stopped by anyone else (a drain) marks the type Inactive, one way only, so
a pool that recovers stays out of service until an admin says otherwise. Pure: no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from gpustack_operator.api.keys import RESOURCE_TYPE_INSTANCE_TYPES, RESOURCE_TYPE_LABEL
from gpustack_operator.api.types.kueue import API_VERSION, ClusterQueue, StopPolicy
from gpustack_operator.rules.naming.pools import is_feature_key, pool_schedule_labels

__all__ = [
    "InactiveAction",
    "InvalidInstanceTypeError",
    "inactive_action",
    "label_patch",
    "new_cluster_queue",
    "queue_labels",
]


class InvalidInstanceTypeError(ValueError):
    """The InstanceType's spec cannot name a pool; the message says which field is wrong."""


def _text(spec: Mapping[str, Any], field: str, *, required: bool) -> str:
    value = spec.get(field, "")
    if not isinstance(value, str) or (required and not value):
        raise InvalidInstanceTypeError(f"spec.{field} must be a non-empty string, got {value!r}")
    return value


def queue_labels(spec: object, aware: bool) -> dict[str, str]:
    """The queue's labels: the pool's schedule labels (contract §7.7) and the ownership label."""
    if not isinstance(spec, dict):
        raise InvalidInstanceTypeError("spec is missing")
    acceleratable = spec.get("acceleratable", False)
    if not isinstance(acceleratable, bool):
        raise InvalidInstanceTypeError(f"spec.acceleratable must be a boolean, got {acceleratable!r}")
    labels = pool_schedule_labels(
        acceleratable,
        aware,
        _text(spec, "generalGroup", required=False),
        _text(spec, "acceleratorGroup", required=acceleratable),
        _text(spec, "os", required=True),
        _text(spec, "arch", required=True),
    )
    return {**labels, RESOURCE_TYPE_LABEL: RESOURCE_TYPE_INSTANCE_TYPES}


def new_cluster_queue(name: str, labels: Mapping[str, str]) -> ClusterQueue:
    """The queue as first created: isolated (no cohort), open to every namespace, running, no quota yet."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "namespaceSelector": {},
            "stopPolicy": StopPolicy.NONE.value,
            "flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "MayStopSearch"},
            "preemption": {
                "reclaimWithinCohort": "Never",
                "borrowWithinCohort": {"policy": "Never"},
                "withinClusterQueue": "LowerPriority",
            },
        },
    }


def label_patch(current: Mapping[str, str], desired: Mapping[str, str]) -> dict[str, Any] | None:
    """A merge patch of metadata.labels: set what differs, drop stale feature keys; None when aligned."""
    changes: dict[str, str | None] = {k: v for k, v in desired.items() if current.get(k) != v}
    changes.update({k: None for k in current if is_feature_key(k) and k not in desired})
    return {"metadata": {"labels": changes}} if changes else None


class InactiveAction(enum.Enum):
    HOLD = "hold the queue (StopPolicy Hold)"
    RESUME = "resume the queue (StopPolicy None)"
    MARK_INACTIVE = "mark the InstanceType inactive"


def inactive_action(stop_policy: str, inactive: bool) -> InactiveAction | None:
    """What keeps spec.inactive and the queue's StopPolicy in step; None when they agree."""
    if stop_policy == StopPolicy.NONE:
        return InactiveAction.HOLD if inactive else None
    if stop_policy == StopPolicy.HOLD and not inactive:
        return InactiveAction.RESUME
    return None if inactive else InactiveAction.MARK_INACTIVE
