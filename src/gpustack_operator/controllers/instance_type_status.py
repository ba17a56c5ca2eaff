"""What an InstanceType's status says about its pool (contract §2.2, §2.3, §7.9); pure, no I/O.

`kubectl get instancetype -w` is how a user watches capacity move, so the status is recomputed on every
change of the backing ClusterQueue or of a Devices ledger in the pool: the phase from the queue's
StopPolicy and Active condition, the LocalQueue to submit to (`entrance`), and the capacity views
(rules.capacity.views): three accelerator views for an accelerated type, the CPU view for a CPU-only one, all
zero while the queue drains. The reconciler owns exactly the keys in `OWNED`, writes them with a merge
patch (`status_patch`, None when nothing changed) and leaves any other status field alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from gpustack_operator.api.conditions import find_condition, status_conditions
from gpustack_operator.api.types.instancetype import InstanceTypePhase as Phase
from gpustack_operator.api.types.kueue import ACTIVE, StopPolicy
from gpustack_operator.rules.capacity.quota import has_reservations
from gpustack_operator.rules.capacity.views import ZERO, AcceleratorViews, accelerator_views, cpu_view
from gpustack_operator.rules.cards import CardState
from gpustack_operator.rules.naming.queues import format_local_queue_name

OWNED: Final = (
    "phase",
    "phaseMessage",
    "accelerator",
    "acceleratorShared",
    "acceleratorSliced",
    "cpu",
    "entrance",
)
TERMINATING: Final = "instance type is terminating"
_DRAINED: Final = AcceleratorViews(ZERO, ZERO, ZERO)
_BY_ACTIVE: Final = {"True": Phase.ACTIVE, "False": Phase.INACTIVE, "Unknown": Phase.ACTIVATING}


def stop_policy(cluster_queue: Mapping[str, Any]) -> str:
    """The queue's spec.stopPolicy (absent reads as None, Kueue's default)."""
    return str((cluster_queue.get("spec") or {}).get("stopPolicy") or StopPolicy.NONE)


def phase_of(cluster_queue: Mapping[str, Any]) -> tuple[str, str]:
    """(phase, message) of the queue: held or draining by its StopPolicy, else by its Active condition."""
    policy = stop_policy(cluster_queue)
    if policy == StopPolicy.HOLD_AND_DRAIN:
        if has_reservations(cluster_queue):
            return Phase.DRAINING, "cluster queue is draining admitted workloads"
        return Phase.INACTIVE, "cluster queue is held and drained"
    if policy == StopPolicy.HOLD:
        return Phase.INACTIVE, "cluster queue is held"
    active = find_condition(status_conditions(cluster_queue), ACTIVE)
    if active is None:
        return Phase.ACTIVATING, "waiting for Kueue to report on the cluster queue"
    phase = _BY_ACTIVE.get(str(active.get("status")), Phase.ACTIVATING)
    return phase, "" if phase == Phase.ACTIVE else str(active.get("message") or "")


def _with_phase(status: dict[str, Any], phase: str, message: str) -> dict[str, Any]:
    status["phase"] = str(phase)
    if message:
        status["phaseMessage"] = message
    return status


def desired_status(
    instance_type: Mapping[str, Any],
    cluster_queue: Mapping[str, Any],
    nodes: Iterable[Sequence[CardState]],
    *,
    overcommit: bool,
) -> dict[str, Any]:
    """The owned status keys of a live InstanceType, given its queue and each pool node's cards."""
    name = str(instance_type["metadata"]["name"])
    draining = stop_policy(cluster_queue) == StopPolicy.HOLD_AND_DRAIN
    status: dict[str, Any] = {"entrance": format_local_queue_name(name)}
    if (instance_type.get("spec") or {}).get("acceleratable") is True:
        views = _DRAINED if draining else accelerator_views(nodes)
        status["accelerator"] = views.exclusive.resource()
        status["acceleratorShared"] = views.shared.resource()
        status["acceleratorSliced"] = views.sliced.resource()
    else:
        status["cpu"] = (ZERO if draining else cpu_view(cluster_queue, overcommit)).resource()
    return _with_phase(status, *phase_of(cluster_queue))


def terminating_status(name: str) -> dict[str, Any]:
    """The owned status keys while the type is being deleted: Inactive, no capacity."""
    return _with_phase({"entrance": format_local_queue_name(name)}, Phase.INACTIVE, TERMINATING)


def status_patch(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> dict[str, Any] | None:
    """A merge patch making the owned keys of `current` equal `desired` (null removes); None when equal."""
    current = current or {}
    changes = {key: desired.get(key) for key in OWNED if current.get(key) != desired.get(key)}
    return {"status": changes} if changes else None
