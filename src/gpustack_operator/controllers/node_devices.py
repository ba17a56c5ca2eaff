"""NodeDevicesReconciler: the node-management mark copied from each Node onto its Devices object.

The per-card ledger (Devices `<node>`) is written by the node's device manager, which must not decide
whether its node is managed: that is an admin's or the worker's call, made on the Node's
`gpustack.ai/managed` label. Pools select their Devices by that label, so the worker copies it across
(and removes it when the node loses it), touching nothing else on the object.
"""

from __future__ import annotations

from gpustack_operator.api.keys import MANAGED_LABEL
from gpustack_operator.controllers.cache import Cache
from gpustack_operator.controllers.node_capacity import same_name
from gpustack_operator.controllers.rbac import Rule
from gpustack_operator.controllers.reconciler import DONE, Result
from gpustack_operator.controllers.spec import ControllerSpec, Dependencies
from gpustack_operator.controllers.watches import for_, mapped
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import DEVICES, NODES


class NodeDevicesReconciler:
    def __init__(self, client: Client, cache: Cache) -> None:
        self.client, self.cache = client, cache

    async def reconcile(self, key: str) -> Result:
        devices = self.cache.get(DEVICES, key)
        if devices is None:
            return DONE
        node = self.cache.get(NODES, key)
        want = ((node or {}).get("metadata", {}).get("labels") or {}).get(MANAGED_LABEL)
        have = (devices["metadata"].get("labels") or {}).get(MANAGED_LABEL)
        if want == have:
            return DONE
        await self.client.patch(DEVICES, key, {"metadata": {"labels": {MANAGED_LABEL: want}}})
        return DONE


def controller(deps: Dependencies) -> ControllerSpec:
    return ControllerSpec(
        name="node-devices",
        reconciler=NodeDevicesReconciler(deps.client, deps.cache),
        primary=for_(DEVICES),
        watches=(mapped(NODES, same_name),),
        rbac=(Rule.of(DEVICES, "patch"),),
    )
