"""DevicesLabelsReconciler: the node's management mark and CPU keys copied from each Node onto its Devices.

The per-card ledger (Devices `<node>`) is written by the node's device manager, which must not decide
whether its node is managed (an admin's or the worker's call, made on the Node's `gpustack.ai/managed`
label) and does not know the node's general (CPU) key (the worker computes it). Pools select their
Devices by labels: every pool by the mark, and CPU-aware accelerated pools also by
`general.feature.gpustack.ai/<gKey>=true`. So the worker copies both across, and removes them when the
node loses them, touching nothing else on the object. A group naming a manufacturer the operator does not
know can join no pool and gets no sliced capacity; the Devices gets a Warning Event `UnknownManufacturer`
(and the log a line) naming it, once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpustack_operator.api.keys import GENERAL_FEATURE_PREFIX, MANAGED_LABEL
from gpustack_operator.controllerkit.cache import Cache
from gpustack_operator.controllerkit.problems import ProblemReporter
from gpustack_operator.controllerkit.rbac import Rule
from gpustack_operator.controllerkit.reconciler import DONE, Result
from gpustack_operator.controllerkit.spec import ControllerSpec
from gpustack_operator.controllerkit.watches import for_, mapped
from gpustack_operator.controllers.dependencies import PER_NODE_WORKERS, Dependencies
from gpustack_operator.controllers.node_capacity import same_name
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import DEVICES, NODES
from gpustack_operator.rules.naming.labels import TRUE
from gpustack_operator.rules.naming.manufacturers import is_known_manufacturer, known_manufacturers

UNKNOWN_MANUFACTURER = "UnknownManufacturer"
"""Reason of the Warning Event on a Devices object with a group of an unknown manufacturer."""


class DevicesLabelsReconciler:
    def __init__(self, client: Client, cache: Cache, problems: ProblemReporter | None = None) -> None:
        self.client, self.cache = client, cache
        self.problems = problems or ProblemReporter(None)

    async def reconcile(self, key: str) -> Result:
        devices = self.cache.get(DEVICES, key)
        if devices is None:
            return DONE
        self.problems.report(DEVICES, devices, UNKNOWN_MANUFACTURER, unknown_manufacturers(devices))
        node = self.cache.get(NODES, key)
        want = copied_labels(((node or {}).get("metadata") or {}).get("labels") or {})
        have = copied_labels(devices["metadata"].get("labels") or {})
        changes: dict[str, str | None] = {k: v for k, v in want.items() if have.get(k) != v}
        changes.update({k: None for k in have if k not in want})
        if changes:
            await self.client.patch(DEVICES, key, {"metadata": {"labels": changes}})
        return DONE


def unknown_manufacturers(devices: Mapping[str, Any]) -> str | None:
    """What is wrong with the groups' manufacturers, or None when every one is known."""
    groups = (devices.get("spec") or {}).get("groups") or []
    named = (str(g.get("manufacturer")) for g in groups if isinstance(g, dict))
    unknown = sorted({m for m in named if not is_known_manufacturer(m)})
    if not unknown:
        return None
    return (
        f"spec.groups name unknown manufacturer(s) {', '.join(map(repr, unknown))} (known: "
        f"{', '.join(known_manufacturers())}); their cards join no pool and get no sliced capacity"
    )


def copied_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """The labels the worker keeps in step: the management mark, and each general key marked true."""
    copied = {k: v for k, v in labels.items() if k.startswith(GENERAL_FEATURE_PREFIX) and v == TRUE}
    if MANAGED_LABEL in labels:
        copied[MANAGED_LABEL] = labels[MANAGED_LABEL]
    return copied


def controller(deps: Dependencies) -> ControllerSpec:
    return ControllerSpec(
        name="node-devices",
        reconciler=DevicesLabelsReconciler(deps.client, deps.cache, deps.problems()),
        primary=for_(DEVICES),
        watches=(mapped(NODES, same_name),),
        rbac=(Rule.of(DEVICES, "patch"),),
        concurrency=PER_NODE_WORKERS,
    )
