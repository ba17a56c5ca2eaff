"""The decision inside the node lock: which pod, are its cards free, what it is given - no I/O.

Given the pods on the node, the reservations and the kubelet's device IDs, a Planner identifies the pod,
checks the cards against the cross-mode view and builds both the allocation to record and the container
response. Keeping this pure makes every mode's rules testable as tables, and keeps the locked section as
short as the pod listing in front of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator import identify, nvidia, vendors
from gpustack_operator.device_manager.allocator import pods as p
from gpustack_operator.device_manager.allocator.annotation import (
    AllocatedCard,
    ContainerAllocation,
    pod_allocations,
)
from gpustack_operator.device_manager.allocator.demand import card_demand, sliced_request
from gpustack_operator.device_manager.allocator.holdings import Holdings
from gpustack_operator.device_manager.allocator.reservations import Reservations
from gpustack_operator.device_manager.allocator.workdirs import HostPaths
from gpustack_operator.device_manager.plugin.handler import (
    AllocationRefusedError,
    ContainerResponse,
    ResourceSpec,
)
from gpustack_operator.device_manager.plugin.ids import DeviceID
from gpustack_operator.device_manager.plugin.inventory import CardInfo

CardKey = tuple[str, str]
Pod = Mapping[str, Any]


class CardConflictError(AllocationRefusedError):
    """A card the kubelet picked is held in another mode - by the pods as listed, which may lag."""


@dataclass(frozen=True)
class Plan:
    """What one Allocate gives one container of one pod."""

    pod: Pod
    container: str
    allocation: ContainerAllocation | None
    """None for the visibility sidecar, which holds nothing."""
    response: ContainerResponse
    work_dir: str | None = None
    """The per-container work directory to create (relative to the container's dir), if any."""
    tier: identify.Tier = identify.Tier.FEASIBLE
    """How the pod was found; anything but FEASIBLE is re-checked against a fresh pod list."""


class Planner:
    def __init__(self, reservations: Reservations, paths: HostPaths) -> None:
        self.reservations = reservations
        self.paths = paths

    def allocations(self, pod: Pod) -> dict[str, ContainerAllocation]:
        """The pod's workload allocations: its annotation overlaid with this process's reservations."""
        return {**pod_allocations(pod), **self.reservations.containers(p.pod_uid(pod))}

    def holdings(self, pods: Iterable[Pod]) -> Holdings:
        """The cross-mode view: active pods oldest first, then reservations of pods not listed yet."""
        holdings = Holdings()
        listed = set()
        for pod in sorted(pods, key=p.age_key):
            listed.add(p.pod_uid(pod))
            if p.is_active(pod) and (allocs := self.allocations(pod)):
                holdings.add_pod(p.pod_key(pod), allocs)
        for uid, reservation in self.reservations.items():
            if uid not in listed and reservation.containers:
                holdings.add_pod(reservation.key, reservation.containers)
        return holdings

    def plan(
        self,
        resource: ResourceSpec,
        devices: Sequence[DeviceID],
        cards: Mapping[CardKey, CardInfo],
        pods: Sequence[Pod],
        holders: Sequence[Pod] | None = None,
    ) -> Plan | None:
        """The plan for the best candidate among `pods`, None when none matches; raises AllocationRefused.

        `holders` are the pods whose cards count in the cross-mode view (default: `pods`).
        """
        holdings = self.holdings(pods if holders is None else holders)
        mode = resource.mode

        def fits(pod: Pod, container: str) -> bool:
            try:
                return holdings.fits(self._demand(resource, devices, cards, pod, container), mode)
            except AllocationRefusedError:
                return False

        found = identify.candidates(
            pods, resource.name, len(devices), claimed=lambda pod: set(self.allocations(pod)), fits=fits
        )
        if not found:
            return None
        best = found[0]
        conflicts = holdings.conflicts(cards, mode)
        if conflicts:
            held = "; ".join(
                f"card {key[1]} is held {h.mode.label} by {', '.join(h.holders)}"
                for key, h in conflicts.items()
            )
            raise CardConflictError(f"{resource.name} for pod {best.key}: {held}")
        demand = self._demand(resource, devices, cards, best.pod, best.container)
        allocation = ContainerAllocation(
            mode,
            tuple(
                AllocatedCard(c.group, c.manufacturer, c.uuid, c.index, demand[c.key]) for c in cards.values()
            ),
            tuple(str(d) for d in devices),
        )
        response, work_dir = self._response(resource, list(cards.values()), best)
        return Plan(best.pod, best.container, allocation, response, work_dir, best.tier)

    def mirror(self, resource: ResourceSpec, count: int, pods: Sequence[Pod]) -> Plan | None:
        """The sidecar's plan: the visible-devices env of the cards its pod already holds."""
        found = identify.visibility_candidates(
            pods,
            resource.name,
            count,
            claimed=lambda pod: set(self.allocations(pod)),
            served=lambda pod: self.reservations.served(p.pod_uid(pod)),
        )
        if not found:
            return None
        best = found[0]
        held: dict[CardKey, AllocatedCard] = {}
        for name in sorted(allocs := self.allocations(best.pod)):
            for card in allocs[name].cards:
                if card.manufacturer == resource.manufacturer:
                    held.setdefault(card.key, card)
        response = vendors.visibility_response(resource.manufacturer, list(held.values()))
        return Plan(best.pod, best.container, None, response, tier=best.tier)

    def _demand(
        self,
        resource: ResourceSpec,
        devices: Sequence[DeviceID],
        cards: Mapping[CardKey, CardInfo],
        pod: Pod,
        container: str,
    ) -> dict[CardKey, int]:
        sliced = None
        if resource.mode is DeviceAllocationMode.SLICED:
            sliced = sliced_request(p.container(pod, container), _base(resource))
        return card_demand(resource.mode, devices, cards, sliced)

    def _response(
        self, resource: ResourceSpec, cards: list[CardInfo], best: identify.Candidate
    ) -> tuple[ContainerResponse, str | None]:
        if resource.mode is DeviceAllocationMode.SLICED and resource.manufacturer == "nvidia":
            entry = p.container(best.pod, best.container)
            response = nvidia.sliced_response(
                cards,
                sliced_request(entry, _base(resource)),
                p.env_names(entry),
                self.paths,
                p.pod_uid(best.pod),
                best.container,
            )
            return response, nvidia.WORK_DIR_ON_HOST
        return vendors.visibility_response(resource.manufacturer, cards), None


def _base(resource: ResourceSpec) -> str:
    return resource.name.removesuffix(".sliced")
