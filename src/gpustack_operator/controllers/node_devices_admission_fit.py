"""What-if for the per-card admission check: would a podSet pass the pool now, on which nodes and cards.

Why this module exists: the `fit` subresource of v1 InstanceTypes (apiserver.registry.instancetypefit)
must answer exactly as Kueue and the check would, so it asks the running check reconciler itself rather
than a second copy of its reasoning: the same PoolCards over the manager's informer cache, the same
demand and placement rules, and a read-only view of the same promise book (Promises.view), so cards
promised to a workload passed a moment ago are not offered again (the view leaves out the promises the
ledger shows consumed, as the next real decision will release them; the book itself is never touched, and
nothing is written). Kueue's part (which flavor,
whether the quota is free) is read from the ClusterQueue in the same cache (rules.admission.whatif).

Decisions are synchronous: from the cache read to the answer there is no await, so a fit never sees a
decision half made. In a replica that does not lead, the check reconciler decides nothing and its book is
empty: its answers do not know the leader's promises of the last moments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from gpustack_operator.api.json import JSONObj
from gpustack_operator.controllerkit.controller import Controller
from gpustack_operator.controllers.node_devices_admission_check import NAME, NodeDevicesAdmissionReconciler
from gpustack_operator.kube.resources import CLUSTER_QUEUES
from gpustack_operator.rules.admission.demand import pod_needs
from gpustack_operator.rules.admission.placement import attempt
from gpustack_operator.rules.admission.whatif import (
    NothingAskedError,
    answer,
    assign_flavor,
    credits_of,
    largest_free_request,
)
from gpustack_operator.rules.capacity.views import NodeMost, node_most
from gpustack_operator.rules.cards import CardState
from gpustack_operator.rules.naming.manufacturers import manufacturers
from gpustack_operator.rules.naming.resources import credits_resource_name

__all__ = ["POD_SET", "AdmissionFit"]

POD_SET: Final = "main"
"""The one podSet of the hypothetical workload."""


class AdmissionFit:
    """Answers fit questions with the running check reconciler's views (see the module docstring)."""

    def __init__(self, check: NodeDevicesAdmissionReconciler) -> None:
        self.check = check
        self._most: dict[str, tuple[Mapping[str, CardState], NodeMost]] = {}
        """Node -> (the cards last summed, what one request could get of them): a node's rows are the
        check's shared, read-only mappings until its ledger or a promise on it changes, so an answer sums
        only the nodes that changed since the last, not the whole flavor."""

    @classmethod
    def of(cls, controllers: Mapping[str, Controller]) -> AdmissionFit | None:
        """The fit of the registered check controller (None when it is not registered)."""
        registered = controllers.get(NAME)
        reconciler = None if registered is None else registered.spec.reconciler
        return cls(reconciler) if isinstance(reconciler, NodeDevicesAdmissionReconciler) else None

    def fit(self, queue: str, manufacturer: str, template: JSONObj, pods: int) -> JSONObj:
        """The fit status of `pods` Pods of `template` in ClusterQueue `queue` (cards of `manufacturer`);
        NothingAskedError when the template asks for none of its cards."""
        known = manufacturers().get(manufacturer)
        needs = () if known is None else pod_needs(template, known.resource_name)
        if known is None or not needs:
            raise NothingAskedError(f"the request asks for no {manufacturer} card")
        resource = credits_resource_name(manufacturer)
        choice = assign_flavor(self.check.cache.get(CLUSTER_QUEUES, queue), resource, credits_of(needs, pods))
        if choice.flavor is None:
            return answer(choice, None, {}, pods)
        workload: JSONObj = {
            "spec": {"podSets": [{"name": POD_SET, "count": pods, "template": template}]},
            "status": {
                "admission": {
                    "podSetAssignments": [
                        {"name": POD_SET, "count": pods, "flavors": {resource: choice.flavor}}
                    ]
                }
            },
        }
        asks, ledger = self.check.asks(workload)
        seen = self.check.promises.view(ledger, self.check.clock())
        found = attempt(asks, seen)
        hostnames = {node: self.check.hostname(node) for node in getattr(found, "cards", {})}
        return answer(choice, found, seen, pods, hostnames, self._largest(seen))

    def _largest(self, seen: Mapping[str, Mapping[str, CardState]]) -> JSONObj:
        """largestFreeRequest of `seen`, each node summed again only when its cards are new mappings."""
        mosts = []
        for node, cards in seen.items():
            known = self._most.get(node)
            if known is None or known[0] is not cards:
                known = self._most[node] = (cards, node_most(cards.values()))
            mosts.append(known[1])
        if len(self._most) > 2 * len(seen) + 64:  # forget the nodes that left
            self._most = {node: self._most[node] for node in seen}
        return largest_free_request(mosts)
