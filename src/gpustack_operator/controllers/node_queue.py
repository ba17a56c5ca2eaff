"""NodeQueueReconciler: each pool's ClusterQueue admits exactly what the pool's live ResourceFlavors hold.

The InstanceType reconciler creates the queue; this one owns what Kueue admits against: the resource groups
(rules.capacity.quota, from the flavors the queue's labels select; a flavor Kueue is still finalizing counts
as gone, since dropping it is the very update Kueue waits for), the `gpustack-node-devices` AdmissionCheck on
an accelerated queue once that check is Active (a queue naming a missing or inactive check stops admitting),
and HoldAndDrain. Kueue never evicts because a queue is deleted, so a deleting queue is always drained. A
pool that lost every flavor while its queue still carries quota is drained when
`instance-type-drain-when-no-flavors` is on (and marked with DRAINED_ANNOTATION), idle or not, re-checked
until nothing is reserved, then its groups are emptied so Kueue's counters never go negative; when
flavors return, only a queue carrying that mark is resumed, so an admin's Hold is never lifted here.
Patches carry the resourceVersion they were computed from and are sent only when the cache differs, so at
rest nothing is written.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from gpustack_operator.api.conditions import is_true
from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import ACCELERATABLE_LABEL, DRAINED_ANNOTATION, NODE_DEVICES_ADMISSION_CHECK
from gpustack_operator.api.types.kueue import ACTIVE, AdmissionChecksStrategy, StopPolicy
from gpustack_operator.controllerkit.cache import Cache
from gpustack_operator.controllerkit.rbac import Rule
from gpustack_operator.controllerkit.reconciler import DONE, Result
from gpustack_operator.controllerkit.spec import ControllerSpec
from gpustack_operator.controllerkit.watches import KeyFunc, for_, mapped
from gpustack_operator.controllers import indexers
from gpustack_operator.controllers.dependencies import Dependencies
from gpustack_operator.controllers.instance_type_status import stop_policy
from gpustack_operator.controllers.pools import (
    deleting,
    every,
    name_of,
    owned_queue,
    pool_flavors,
    queues_of_flavor,
)
from gpustack_operator.controllers.settingsview import SettingsView
from gpustack_operator.kube import errors
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import ADMISSION_CHECKS, CLUSTER_QUEUES, RESOURCE_FLAVORS
from gpustack_operator.rules.capacity.quota import has_reservations, resource_groups, same_groups
from gpustack_operator.rules.naming.labels import TRUE
from gpustack_operator.settings.catalog import INSTANCE_TYPE_DRAIN_WHEN_NO_FLAVORS

log = logging.getLogger(__name__)

NAME = "node-queue"
FIELD_MANAGER = f"gpustack-{NAME}"
NO_FLAVORS = "no-flavors"
"""DRAINED_ANNOTATION's value: drained because the pool has no live flavor."""
WAIT_FOR_DRAIN = 30.0
"""Seconds between looks at a flavorless queue whose workloads still hold quota."""
CHECKS: Final[AdmissionChecksStrategy] = {"admissionChecks": [{"name": NODE_DEVICES_ADMISSION_CHECK}]}
"""The queue's admission checks while the node-devices check is Active: that one, on every flavor."""

Plan = tuple[dict[str, Any], dict[str, str | None], float | None]
"""(spec changes, annotation changes, requeue after): what a reconcile sends and when it looks again."""


def plan_deleting(queue: JSONObj) -> Plan:
    """A deleting queue is drained, whatever the settings say, so Kueue can let it go."""
    drained = stop_policy(queue) == StopPolicy.HOLD_AND_DRAIN
    return ({} if drained else {"stopPolicy": StopPolicy.HOLD_AND_DRAIN.value}), {}, None


def plan_fill(queue: JSONObj, groups: list[Any], *, check_active: bool) -> Plan:
    """Quota from the live flavors, the node-devices check when usable, and a resume if we drained it."""
    spec, marked = queue.get("spec") or {}, DRAINED_ANNOTATION in _annotations(queue)
    accelerated = indexers.labels_of(queue).get(ACCELERATABLE_LABEL) == TRUE
    checks = CHECKS if accelerated and check_active else None
    changes: dict[str, Any] = (
        {} if same_groups(spec.get("resourceGroups"), groups) else {"resourceGroups": groups}
    )
    if spec.get("admissionChecksStrategy") != checks:
        changes["admissionChecksStrategy"] = checks
    if marked and stop_policy(queue) == StopPolicy.HOLD_AND_DRAIN:
        changes["stopPolicy"] = StopPolicy.NONE.value
    return changes, ({DRAINED_ANNOTATION: None} if marked else {}), None


def plan_empty(queue: JSONObj, *, drain: bool) -> Plan:
    """No live flavor: drain (when enabled) first, then drop the quota once nothing is reserved.

    The drain comes before the quota goes whether or not work is admitted (contract §6: "HoldAndDrain
    before emptying groups"), so every pool that lost its nodes is seen stopped, its InstanceType turns
    Inactive, and the pool stays out of service after it recovers until an admin clears that.
    """
    if not (queue.get("spec") or {}).get("resourceGroups"):
        return {}, {}, None
    if drain and stop_policy(queue) != StopPolicy.HOLD_AND_DRAIN:
        return (
            {"stopPolicy": StopPolicy.HOLD_AND_DRAIN.value},
            {DRAINED_ANNOTATION: NO_FLAVORS},
            WAIT_FOR_DRAIN,
        )
    if not has_reservations(queue):
        return {"resourceGroups": None}, {}, None
    return {}, {}, WAIT_FOR_DRAIN


def _annotations(obj: JSONObj) -> dict[str, Any]:
    return (obj.get("metadata") or {}).get("annotations") or {}


class NodeQueueReconciler:
    def __init__(self, client: Client, cache: Cache, settings: SettingsView) -> None:
        self.client, self.cache, self.settings = client, cache, settings

    async def reconcile(self, key: str) -> Result:
        queue = self.cache.get(CLUSTER_QUEUES, key)
        if queue is None or not owned_queue(queue):
            return DONE
        if deleting(queue):
            plan = plan_deleting(queue)
        elif groups := resource_groups(pool_flavors(self.cache, queue)):
            plan = plan_fill(queue, groups, check_active=self._check_active())
        else:
            plan = plan_empty(queue, drain=self.settings.flag(INSTANCE_TYPE_DRAIN_WHEN_NO_FLAVORS))
        spec, annotations, requeue = plan
        if spec or annotations:
            meta: dict[str, Any] = {"resourceVersion": queue["metadata"]["resourceVersion"]}
            if annotations:
                meta["annotations"] = annotations
            patch = {"metadata": meta, "spec": spec}
            try:
                await self.client.patch(CLUSTER_QUEUES, key, patch, field_manager=FIELD_MANAGER)
            except errors.NotFound:
                return DONE  # Kueue let it go meanwhile; nothing left to do
            log.info("clusterqueue=%s set %s", key, ", ".join(sorted([*spec, *annotations])))
        return DONE if requeue is None else Result(requeue_after=requeue)

    def _check_active(self) -> bool:
        check = self.cache.get(ADMISSION_CHECKS, NODE_DEVICES_ADMISSION_CHECK)
        return check is not None and not deleting(check) and is_true(check, ACTIVE)


def _owned_either(old: JSONObj | None, new: JSONObj | None) -> bool:
    return any(obj is not None and owned_queue(obj) for obj in (old, new))


def queues_if_node_devices_check(cache: Cache) -> KeyFunc:
    """A key function: the node-devices AdmissionCheck -> every queue the chain owns."""
    owned = every(cache, CLUSTER_QUEUES, owned_queue)
    return lambda check: owned(check) if name_of(check) == NODE_DEVICES_ADMISSION_CHECK else []


def controller(deps: Dependencies) -> ControllerSpec:
    settings = deps.settings
    return ControllerSpec(
        name=NAME,
        reconciler=NodeQueueReconciler(deps.client, deps.cache, settings),
        primary=for_(CLUSTER_QUEUES, _owned_either, throttle=deps.throttle),
        watches=(
            mapped(RESOURCE_FLAVORS, queues_of_flavor(deps.cache), throttle=deps.throttle),
            mapped(ADMISSION_CHECKS, queues_if_node_devices_check(deps.cache)),
            settings.changes(every(deps.cache, CLUSTER_QUEUES, owned_queue)),
        ),
        indexes=(indexers.CLUSTER_QUEUES_BY_POOL, indexers.RESOURCE_FLAVORS_BY_POOL),
        rbac=(Rule.of(CLUSTER_QUEUES, "patch"),),
    )
