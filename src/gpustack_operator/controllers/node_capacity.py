"""NodeCapacityReconciler: the four `.sliced.*` extended resources on each node (contract §5.2).

The scheduler and the kubelet count slices' VRAM and compute budgets from Node.status.capacity, and only
the worker sees both inputs: the node's `<base>.sliced` capacity (the device plugin's, through the kubelet)
and its Devices groups (models, VRAM, slice counts). Whenever either changes, the capacities
`rules.capacity.nodes.sliced_capacities` computes are merge-patched onto capacity and allocatable (the
kubelet recomputes allocatable from capacity on a real node; kwok nodes have no kubelet to do it), and
those that no longer apply are removed. Nothing is written when the node already shows the right values.
"""

from __future__ import annotations

import logging
from typing import Any

from gpustack_operator.controllerkit.cache import Cache
from gpustack_operator.controllerkit.rbac import Rule
from gpustack_operator.controllerkit.reconciler import DONE, Result
from gpustack_operator.controllerkit.spec import ControllerSpec
from gpustack_operator.controllerkit.watches import for_, mapped
from gpustack_operator.controllers.dependencies import PER_NODE_WORKERS, Dependencies
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.informer import object_key
from gpustack_operator.kube.resources import DEVICES, NODES
from gpustack_operator.rules.capacity.nodes import sliced_capacities

log = logging.getLogger(__name__)


def same_name(obj: dict[str, Any]) -> list[str]:
    """A cluster-scoped object named after a node (Devices) -> that node's key."""
    return [object_key(obj)]


class NodeCapacityReconciler:
    def __init__(self, client: Client, cache: Cache) -> None:
        self.client, self.cache = client, cache

    async def reconcile(self, key: str) -> Result:
        node = self.cache.get(NODES, key)
        if node is None:
            return DONE
        devices = self.cache.get(DEVICES, key)
        groups = ((devices or {}).get("spec") or {}).get("groups") or []
        capacity = (node.get("status") or {}).get("capacity") or {}
        changes = sliced_capacities(capacity, groups)
        if not changes:
            return DONE
        patch = {"status": {"capacity": changes, "allocatable": changes}}
        await self.client.patch_status(NODES, key, patch)
        shown = (f"{name}={'removed' if value is None else value}" for name, value in sorted(changes.items()))
        log.info("node=%s sliced capacity %s", key, ", ".join(shown))
        return DONE


def controller(deps: Dependencies) -> ControllerSpec:
    return ControllerSpec(
        name="node-capacity",
        reconciler=NodeCapacityReconciler(deps.client, deps.cache),
        primary=for_(NODES),
        watches=(mapped(DEVICES, same_name),),
        rbac=(Rule.of(NODES, "patch", subresource="status"),),
        concurrency=PER_NODE_WORKERS,
    )
