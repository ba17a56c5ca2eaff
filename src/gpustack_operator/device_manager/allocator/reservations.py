"""Allocations made in this process whose pod annotations may not be visible yet.

Between reserving cards under the node lock and the annotation patch reaching the pod cache, the cards
would look free to the next Allocate; reservations close that gap. They also remember which sidecar
containers were served the visibility resource, so a batch of SSH pods maps one-to-one. A reservation
lives until its pod is gone or finished; after a restart the annotations alone carry the state. A pod
can vanish without the informer ever showing it (found through the API server, deleted before the cache
caught up), so a reservation whose pod the synced cache has not shown for longer than the allocator's
retry window expires: a ghost must not keep a card held until the next restart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpustack_operator.device_manager.allocator.annotation import ContainerAllocation


@dataclass
class PodReservation:
    key: str
    """`namespace/name`."""
    containers: dict[str, ContainerAllocation] = field(default_factory=dict)
    visibility_served: set[str] = field(default_factory=set)
    absent_since: float | None = None
    """When a sweep first found the pod missing from the cache (None while it is there)."""


class Reservations:
    """Reservations by pod UID."""

    def __init__(self) -> None:
        self._pods: dict[str, PodReservation] = {}

    def __len__(self) -> int:
        return len(self._pods)

    def get(self, uid: str) -> PodReservation | None:
        return self._pods.get(uid)

    def items(self) -> list[tuple[str, PodReservation]]:
        return list(self._pods.items())

    def containers(self, uid: str) -> Mapping[str, ContainerAllocation]:
        reservation = self._pods.get(uid)
        return reservation.containers if reservation else {}

    def reserve(self, uid: str, key: str, container: str, allocation: ContainerAllocation) -> None:
        self._pods.setdefault(uid, PodReservation(key)).containers[container] = allocation

    def unreserve(self, uid: str, container: str) -> None:
        reservation = self._pods.get(uid)
        if reservation is not None:
            reservation.containers.pop(container, None)
            if not reservation.containers and not reservation.visibility_served:
                del self._pods[uid]

    def served(self, uid: str) -> set[str]:
        reservation = self._pods.get(uid)
        return set(reservation.visibility_served) if reservation else set()

    def mark_served(self, uid: str, key: str, container: str) -> None:
        self._pods.setdefault(uid, PodReservation(key)).visibility_served.add(container)

    def release(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def expire(self, live: set[str], now: float, window: float) -> list[tuple[str, PodReservation]]:
        """Drop the reservations of pods missing from `live` for more than `window`; returns them."""
        dropped = []
        for uid, reservation in list(self._pods.items()):
            if uid in live:
                reservation.absent_since = None
            elif reservation.absent_since is None:
                reservation.absent_since = now
            elif now - reservation.absent_since > window:
                dropped.append((uid, self._pods.pop(uid)))
        return dropped
