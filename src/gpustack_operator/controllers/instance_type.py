"""InstanceTypeReconciler: every InstanceType has its ClusterQueue, labelled for its pool, and a live status.

The InstanceType is what users pick and what workloads queue for; Kueue only knows the ClusterQueue of the
same name. This reconciler owns that queue's existence and labels (controllers.instance_type_queue), the
admin's Inactive switch as Hold↔None on it, and the type's status (controllers.instance_type_status), which
moves with the queue and with every Devices ledger of the pool. It never fills the quota (NodeQueue does)
and never authors or deletes an InstanceType. A finalizer makes deletion a delete-then-wait teardown: the
type turns Inactive, its queue is deleted once (the NodeQueue reconciler drains it), and the finalizer goes
only when the queue is gone. A queue someone deletes under a live type is recreated once it is gone. Every
write is a patch computed against the cache, so at rest nothing is written; a spec that names no pool is a
TerminalError (a Warning Event on the type), a Devices ledger that cannot be read is logged and left out.
"""

from __future__ import annotations

import logging
from typing import Any

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import CONTROLLED_FINALIZER
from gpustack_operator.api.types.kueue import StopPolicy
from gpustack_operator.controllerkit.cache import Cache
from gpustack_operator.controllerkit.rbac import Rule
from gpustack_operator.controllerkit.reconciler import DONE, Result, TerminalError
from gpustack_operator.controllerkit.spec import ControllerSpec
from gpustack_operator.controllerkit.watches import for_, mapped
from gpustack_operator.controllers import indexers
from gpustack_operator.controllers.dependencies import Dependencies
from gpustack_operator.controllers.instance_type_queue import (
    InactiveAction,
    InvalidInstanceTypeError,
    inactive_action,
    label_patch,
    new_cluster_queue,
    queue_labels,
)
from gpustack_operator.controllers.instance_type_status import desired_status, status_patch, stop_policy
from gpustack_operator.controllers.instance_type_status import terminating_status as terminating
from gpustack_operator.controllers.pools import (
    deleting,
    every,
    owned_queue,
    pool_devices,
    queues_of_devices,
)
from gpustack_operator.controllers.settingsview import SettingsView
from gpustack_operator.kube import errors
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import CLUSTER_QUEUES, DEVICES, INSTANCE_TYPES
from gpustack_operator.rules.capacity.views import MalformedLedgerError, pool_cards
from gpustack_operator.rules.cards import CardState
from gpustack_operator.settings.catalog import (
    INSTANCE_GENERAL_RESOURCES_OVERCOMMIT,
    INSTANCE_TYPE_AWARE_CPU_MANUFACTURER,
)

log = logging.getLogger(__name__)

NAME = "instance-type"
FIELD_MANAGER = f"gpustack-{NAME}"
WAIT_FOR_QUEUE = 15.0
"""Seconds between looks at a queue that is being deleted (teardown, or before recreating it)."""


class InstanceTypeReconciler:
    def __init__(self, client: Client, cache: Cache, settings: SettingsView) -> None:
        self.client, self.cache, self.settings = client, cache, settings

    async def reconcile(self, key: str) -> Result:
        it = self.cache.get(INSTANCE_TYPES, key)
        if it is None:
            return DONE
        if deleting(it):
            return await self._teardown(it)
        try:
            labels = queue_labels(it.get("spec"), self.settings.flag(INSTANCE_TYPE_AWARE_CPU_MANUFACTURER))
        except InvalidInstanceTypeError as e:
            raise TerminalError(f"InstanceType {key} names no pool: {e}", reason="InvalidSpec") from e
        locked = await self._lock(it)
        if locked is None:
            return DONE  # deleted meanwhile: its delete event is next
        it = locked
        queue = self.cache.get(CLUSTER_QUEUES, key)
        if queue is None:
            await self._create_queue(key, labels)
            return DONE  # its add event brings us back to fill in the status
        if deleting(queue):
            return Result(requeue_after=WAIT_FOR_QUEUE)  # recreated once it is gone
        patch = label_patch(indexers.labels_of(queue), labels)
        if patch is not None:
            queue = await self._patch_queue(key, patch)
            log.info("instancetype=%s aligned the labels of its cluster queue", key)
        if queue is None or await self._sync_inactive(it, queue):
            return DONE  # the write (or the queue's deletion) comes back as an event
        overcommit = self.settings.flag(INSTANCE_GENERAL_RESOURCES_OVERCOMMIT)
        await self._write_status(it, desired_status(it, queue, self._cards(it, queue), overcommit=overcommit))
        return DONE

    async def _lock(self, it: JSONObj) -> JSONObj | None:
        finalizers = list(it["metadata"].get("finalizers") or [])
        if CONTROLLED_FINALIZER in finalizers:
            return it
        return await self._patch_type(
            it, {"metadata": _versioned(it, finalizers=[*finalizers, CONTROLLED_FINALIZER])}
        )

    async def _create_queue(self, name: str, labels: dict[str, str]) -> None:
        try:
            await self.client.create(
                CLUSTER_QUEUES, dict(new_cluster_queue(name, labels)), field_manager=FIELD_MANAGER
            )
        except errors.AlreadyExists:
            log.debug("instancetype=%s cluster queue exists but is not cached yet; waiting for it", name)
            return
        log.info("instancetype=%s created its cluster queue", name)

    async def _sync_inactive(self, it: JSONObj, queue: JSONObj) -> bool:
        name, policy = it["metadata"]["name"], stop_policy(queue)
        action = inactive_action(policy, (it.get("spec") or {}).get("inactive") is True)
        if action is None:
            return False
        if action is InactiveAction.MARK_INACTIVE:
            await self._patch_type(it, {"metadata": _versioned(it), "spec": {"inactive": True}})
        else:
            wanted = StopPolicy.HOLD if action is InactiveAction.HOLD else StopPolicy.NONE
            await self._patch_queue(
                name, {"metadata": _versioned(queue), "spec": {"stopPolicy": wanted.value}}
            )
        log.info("instancetype=%s queue stopPolicy=%s: %s", name, policy, action.value)
        return True

    def _cards(self, it: JSONObj, queue: JSONObj) -> list[list[CardState]]:
        if (it.get("spec") or {}).get("acceleratable") is not True:
            return []
        group, nodes = str(it["spec"].get("acceleratorGroup")), []
        for devices in pool_devices(self.cache, queue):
            try:
                nodes.append(pool_cards(devices, group))
            except MalformedLedgerError as e:
                log.warning(
                    "instancetype=%s devices=%s ledger unreadable, left out: %s",
                    it["metadata"]["name"],
                    devices["metadata"].get("name"),
                    e,
                )
        return nodes

    async def _write_status(self, it: JSONObj, desired: dict[str, Any]) -> None:
        patch = status_patch(it.get("status"), desired)
        if patch is not None:
            name = it["metadata"]["name"]
            try:
                await self.client.patch_status(INSTANCE_TYPES, name, patch, field_manager=FIELD_MANAGER)
            except errors.NotFound:
                return  # deleted meanwhile: its delete event is next
            log.info("instancetype=%s status phase=%s", name, desired.get("phase"))

    async def _patch_queue(self, name: str, patch: dict[str, Any]) -> JSONObj | None:
        """Patch the queue; None when it is gone (its delete event brings us back to recreate it)."""
        try:
            return await self.client.patch(CLUSTER_QUEUES, name, patch, field_manager=FIELD_MANAGER)
        except errors.NotFound:
            return None

    async def _patch_type(self, it: JSONObj, patch: dict[str, Any]) -> JSONObj | None:
        """Patch the InstanceType; None when it is gone (deleted meanwhile: NotFound means done)."""
        try:
            return await self.client.patch(
                INSTANCE_TYPES, it["metadata"]["name"], patch, field_manager=FIELD_MANAGER
            )
        except errors.NotFound:
            return None

    async def _teardown(self, it: JSONObj) -> Result:
        name, finalizers = it["metadata"]["name"], list(it["metadata"].get("finalizers") or [])
        if CONTROLLED_FINALIZER not in finalizers:
            return DONE
        # The cache may not have seen a queue created moments ago: only the server can say it is gone.
        queue = self.cache.get(CLUSTER_QUEUES, name) or await self.client.get_or_none(CLUSTER_QUEUES, name)
        if queue is not None:
            await self._write_status(it, terminating(name))
            if not deleting(queue):
                await self.client.delete(CLUSTER_QUEUES, name)
                log.info("instancetype=%s deleting; deleted its cluster queue, waiting for it to go", name)
            return Result(requeue_after=WAIT_FOR_QUEUE)
        kept = [f for f in finalizers if f != CONTROLLED_FINALIZER]
        await self._patch_type(it, {"metadata": _versioned(it, finalizers=kept)})
        log.info("instancetype=%s cluster queue gone; released the finalizer", name)
        return DONE


def _versioned(obj: JSONObj, **meta: Any) -> dict[str, Any]:
    """Patch metadata that applies only to the version read (a stale cache answers 409 and is retried)."""
    return {"resourceVersion": obj["metadata"]["resourceVersion"], **meta}


def same_name_if_owned(queue: JSONObj) -> list[str]:
    """A ClusterQueue the chain owns -> the InstanceType of its name."""
    return [str(queue["metadata"]["name"])] if owned_queue(queue) else []


def controller(deps: Dependencies) -> ControllerSpec:
    settings = deps.settings
    return ControllerSpec(
        name=NAME,
        reconciler=InstanceTypeReconciler(deps.client, deps.cache, settings),
        primary=for_(INSTANCE_TYPES, throttle=deps.throttle),
        watches=(
            mapped(CLUSTER_QUEUES, same_name_if_owned, throttle=deps.throttle),
            mapped(DEVICES, queues_of_devices(deps.cache), throttle=deps.throttle),
            settings.changes(every(deps.cache, INSTANCE_TYPES)),
        ),
        indexes=(indexers.CLUSTER_QUEUES_BY_POOL, indexers.DEVICES_BY_POOL),
        rbac=(
            Rule.of(INSTANCE_TYPES, "patch"),
            Rule.of(INSTANCE_TYPES, "patch", subresource="status"),
            Rule.of(CLUSTER_QUEUES, "get", "create", "patch", "delete"),
        ),
    )
