"""Would a request be admitted now, and where: the what-if answer of the `fit` subresource; pure.

Why this module exists: before submitting, a user (or a scheduler above us) wants to know whether a podSet
would pass the pool right now, on which nodes and cards, and if not, why. The answer must be the one the
admission chain would give, or it misleads; so it is made of the chain's own steps, in its order:

1. Kueue's quota. An accelerated queue rations one currency per manufacturer (`credits.gpustack.ai/<mfr>`:
   a card 1,600,000, a share 160,000, a slice its units, rules.capacity.kueueconfig). Kueue (no cohort, no
   preemption) gives a podSet the first flavor of the queue's resource group whose nominal quota, less what
   is reserved in it (`status.flavorsReservation`), covers the podSet's credits; none: it stays pending.
   A queue on hold admits nothing. `assign_flavor` is that reading of the ClusterQueue.
2. The per-card check on that flavor: the demand (rules.admission.demand), the flavor's ledgers less the
   cards promised to workloads passed a moment ago (rules.admission.promises), every Pod whole on one node
   (rules.admission.placement). The controller runs these exactly as for a real Workload
   (controllers.node_devices_admission_fit) and `answer` words the result.

A refusal says which Pod fits nowhere and the largest request the flavor's cards could take now, in the
three views an InstanceType shows (rules.capacity.views, promises applied).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gpustack_operator.api.json import JSONObj, as_list, as_mapping
from gpustack_operator.api.quantity import Quantity
from gpustack_operator.api.types.kueue import StopPolicy
from gpustack_operator.rules.admission.placement import Ledger, Plan, Stuck
from gpustack_operator.rules.capacity.quota import quantity_of
from gpustack_operator.rules.capacity.views import NodeMost, node_most
from gpustack_operator.rules.cards import Need, card_mode_label

__all__ = [
    "FlavorChoice",
    "NothingAskedError",
    "Reason",
    "answer",
    "assign_flavor",
    "credits_of",
    "largest_free_request",
]


class Reason(StrEnum):
    FITS = "Fits"
    NO_QUEUE = "NoQueue"
    INACTIVE = "Inactive"
    NO_QUOTA = "NoQuota"
    NO_ROOM = "NoRoom"
    NO_CARDS = "NoCards"


@dataclass(frozen=True)
class FlavorChoice:
    """The flavor Kueue would assign (None: it would not), and why not."""

    flavor: str | None
    reason: Reason = Reason.FITS
    message: str = ""


def credits_of(needs: Sequence[Need], pods: int) -> int:
    """The credits `pods` Pods of `needs` reserve (Kueue's transformations charge a need's units)."""
    return sum(need.units for need in needs) * pods


def _reserved(cluster_queue: Mapping[str, Any], flavor: str, resource: str) -> Quantity:
    for entry in as_list(as_mapping(cluster_queue.get("status")).get("flavorsReservation")):
        if as_mapping(entry).get("name") != flavor:
            continue
        for res in as_list(as_mapping(entry).get("resources")):
            if as_mapping(res).get("name") == resource:
                return quantity_of(as_mapping(res).get("total")) or Quantity(0)
    return Quantity(0)


def assign_flavor(cluster_queue: Mapping[str, Any] | None, resource: str, amount: int) -> FlavorChoice:
    """The first flavor of the queue whose free quota of `resource` covers `amount` (see the docstring)."""
    if cluster_queue is None:
        return FlavorChoice(None, Reason.NO_QUEUE, "the InstanceType has no ClusterQueue (yet)")
    spec = as_mapping(cluster_queue.get("spec"))
    if spec.get("stopPolicy") not in (None, "", StopPolicy.NONE):
        return FlavorChoice(
            None, Reason.INACTIVE, f"the queue is on {spec.get('stopPolicy')}: Kueue admits nothing"
        )
    largest = Quantity(0)
    for group in as_list(spec.get("resourceGroups")):
        if resource not in as_list(as_mapping(group).get("coveredResources")):
            continue
        for flavor in map(as_mapping, as_list(as_mapping(group).get("flavors"))):
            name = str(flavor.get("name") or "")
            nominal = next(
                (
                    quantity_of(as_mapping(r).get("nominalQuota"))
                    for r in as_list(flavor.get("resources"))
                    if as_mapping(r).get("name") == resource
                ),
                None,
            )
            free = (nominal or Quantity(0)) - _reserved(cluster_queue, name, resource)
            if free >= Quantity(amount):
                return FlavorChoice(name)
            largest = max(largest, free)
    return FlavorChoice(
        None,
        Reason.NO_QUOTA,
        f"no flavor of the queue has {amount} {resource} of quota free (the most one has: {largest}); "
        "Kueue would keep the workload pending",
    )


def _cards(cards: Mapping[str, Need]) -> list[JSONObj]:
    return [
        {"id": cid, "mode": card_mode_label(need.mode), "units": need.units}
        for cid, need in sorted(cards.items())
    ]


def largest_free_request(mosts: Iterable[NodeMost]) -> JSONObj:
    """The most one Pod could ask in each view, given each node's part (rules.capacity.views.node_most:
    the views' onceMaxRequest, promises applied when the nodes' cards are seen less them)."""
    exclusive = shared = sliced = 0
    for free, shares, percent in mosts:
        exclusive, shared, sliced = max(exclusive, free), max(shared, shares), max(sliced, percent)
    return {
        "accelerator": str(exclusive),
        "acceleratorShared": str(shared),
        "acceleratorSlicedPercentage": str(sliced),
    }


def answer(
    choice: FlavorChoice,
    found: Plan | Stuck | None,
    seen: Ledger,
    pods: int,
    hostname: Mapping[str, str] | None = None,
    largest: JSONObj | None = None,
) -> JSONObj:
    """The fit status: `found` is the placement of the one podSet on `choice`'s flavor, `seen` that
    flavor's cards less the promises; `hostname` maps a node (Devices name) to its hostname label;
    `largest` is `seen`'s largest_free_request when the caller has it (kept per node across answers)."""
    if choice.flavor is None:
        return {"fits": False, "reason": choice.reason.value, "message": choice.message}
    if largest is None:
        largest = largest_free_request(node_most(cards.values()) for cards in seen.values())
    status: JSONObj = {"flavor": choice.flavor, "largestFreeRequest": largest}
    if isinstance(found, Plan):
        per_node: dict[str, int] = {}
        for node in found.pods[0] if found.pods else ():
            per_node[node] = per_node.get(node, 0) + 1
        status["nodes"] = [
            {
                "name": node,
                "hostname": (hostname or {}).get(node, node),
                "pods": count,
                "cards": _cards(found.cards.get(node, {})),
            }
            for node, count in sorted(per_node.items())
        ]
        message = f"all {pods} Pods fit on {len(per_node)} nodes of flavor {choice.flavor}"
        return {"fits": True, "reason": Reason.FITS.value, "message": message, **status}
    if not any(seen.values()):
        reason, message = Reason.NO_CARDS, f"flavor {choice.flavor} has no usable cards"
    else:
        pod = 1 if found is None else found.pod + 1
        reason = Reason.NO_ROOM
        message = (
            f"Pod {pod} of {pods} fits on no node of flavor {choice.flavor} "
            "(cards promised to workloads admitted a moment ago count as taken)"
        )
        status["unplacedPod"] = pod
    return {"fits": False, "reason": reason.value, "message": message, **status}


class NothingAskedError(ValueError):
    """The request asks for no card of the pool's manufacturer: there is nothing for the check to place."""
