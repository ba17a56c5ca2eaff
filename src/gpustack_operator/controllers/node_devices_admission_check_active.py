"""Keeps the `gpustack-node-devices` AdmissionCheck Active: Kueue never sets that for an external check.

Kueue's own AdmissionCheck controller only manages its finalizer; a check nobody marks `Active=True` makes
every ClusterQueue naming it inactive (shared/guides/kueue-api.md §5), and the NodeQueue reconciler names
it only once it is Active. Worker Prepare creates the check; this controller sets, on every check whose
controllerName is ours, the condition `Active=True` reason `Ready` (contract §7.9; Kueue's provisioning
controller says `Active` for its own, and Kueue reads only the status) with the generation it saw. It
writes only the status subresource (server-side apply of that one condition, so Kueue's concurrent
finalizer updates never conflict with it), keeps lastTransitionTime while the status holds, and writes
nothing when the condition is already so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Final

from gpustack_operator.api.conditions import find_condition, generation_of, set_condition, status_conditions
from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import NODE_DEVICES_CONTROLLER_NAME
from gpustack_operator.api.types.kueue import ACTIVE
from gpustack_operator.controllerkit.cache import Cache
from gpustack_operator.controllerkit.rbac import Rule
from gpustack_operator.controllerkit.reconciler import DONE, Result
from gpustack_operator.controllerkit.spec import ControllerSpec
from gpustack_operator.controllerkit.watches import for_
from gpustack_operator.controllers.dependencies import Dependencies
from gpustack_operator.controllers.node_devices_admission_check import FIELD_MANAGER
from gpustack_operator.controllers.pools import deleting
from gpustack_operator.kube import errors
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import ADMISSION_CHECKS

log = logging.getLogger(__name__)

NAME = "node-devices-admission-active"
REASON: Final = "Ready"
MESSAGE: Final = "The admission check is active"


def ours(check: JSONObj) -> bool:
    return (check.get("spec") or {}).get("controllerName") == NODE_DEVICES_CONTROLLER_NAME


class AdmissionCheckActiveReconciler:
    def __init__(self, client: Client, cache: Cache, now: Callable[[], datetime]) -> None:
        self.client, self.cache, self.now = client, cache, now

    async def reconcile(self, key: str) -> Result:
        check = self.cache.get(ADMISSION_CHECKS, key)
        if check is None or deleting(check) or not ours(check):
            return DONE
        current = status_conditions(check)
        wanted = set_condition(
            current, ACTIVE, "True", REASON, MESSAGE, generation=generation_of(check), now=self.now()
        )
        if wanted == current:
            return DONE
        meta = {"name": key, "resourceVersion": check["metadata"]["resourceVersion"]}
        body = {"metadata": meta, "status": {"conditions": [find_condition(wanted, ACTIVE)]}}
        try:
            await self.client.apply(ADMISSION_CHECKS, body, field_manager=FIELD_MANAGER, subresource="status")
        except errors.NotFound:
            return DONE
        log.info("admissioncheck=%s Active=True", key)
        return DONE


def _ours_either(old: JSONObj | None, new: JSONObj | None) -> bool:
    return any(obj is not None and ours(obj) for obj in (old, new))


def controller(deps: Dependencies) -> ControllerSpec:
    return ControllerSpec(
        name=NAME,
        reconciler=AdmissionCheckActiveReconciler(deps.client, deps.cache, deps.now),
        primary=for_(ADMISSION_CHECKS, _ours_either),
        rbac=(Rule.of(ADMISSION_CHECKS, "patch", subresource="status"),),
    )
