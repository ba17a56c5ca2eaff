"""Which pod an Allocate call is for: the kubelet sends only device IDs, never the pod.

The kubelet admits the pods bound to its node one at a time, oldest first, and allocates each container's
resources right then; so the pod being admitted is a Pending pod on this node with a container whose limit
for the resource equals the number of IDs. Among several, the oldest wins, in tiers: first a pod part-way
through admission (it holds cards for one container and still has a matching container without any: the
kubelet allocates every container of a pod before it admits the next pod, and an app container reusing
its init container's IDs lands here too), then pods whose demand fits the cards the kubelet picked, then
pods it would not fit (the ledger clamps, the kubelet decided), and last pods whose every matching
container already holds an allocation (a replay after a restart). The sidecar's visibility resource
instead re-finds a pod that already holds cards and mirrors them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpustack_operator.device_manager.allocator import pods as p


class Tier(enum.IntEnum):
    """How a candidate was found, best first; every tier but FEASIBLE is re-checked against the API server."""

    CONTINUING = 0
    """Holds cards for some containers and has a matching container without: its admission is under way."""
    FEASIBLE = 1
    INFEASIBLE = 2
    CLAIMED = 3
    """Every matching container holds cards already: a replay."""


@dataclass(frozen=True)
class Candidate:
    """A pod that may be the one being admitted, the container the IDs are for, and how likely."""

    pod: Mapping[str, Any]
    container: str
    tier: Tier

    @property
    def key(self) -> str:
        return p.pod_key(self.pod)


def _matching(pod: Mapping[str, Any], resource: str, count: int) -> list[str]:
    """Containers (kubelet order) whose limit for `resource` equals `count`."""
    return [str(c.get("name")) for c in p.containers(pod) if p.limit(c, resource) == count]


def candidates(
    pods: Iterable[Mapping[str, Any]],
    resource: str,
    count: int,
    *,
    claimed: Callable[[Mapping[str, Any]], set[str]],
    fits: Callable[[Mapping[str, Any], str], bool],
) -> list[Candidate]:
    """Every pending pod that may be this Allocate's, best first.

    `claimed(pod)` names the containers the pod already holds cards for; `fits(pod, container)` says
    whether that container's demand fits the cards of this call.
    """
    found = []
    for pod in pods:
        if not p.is_pending(pod):
            continue
        matching = _matching(pod, resource, count)
        if not matching:
            continue
        held = claimed(pod)
        free = [name for name in matching if name not in held]
        if not free:
            tier = Tier.CLAIMED
        elif held:
            tier = Tier.CONTINUING
        else:
            tier = Tier.FEASIBLE if fits(pod, free[0]) else Tier.INFEASIBLE
        found.append(Candidate(pod, (free or matching)[0], tier))
    return sorted(found, key=lambda c: (c.tier, p.arrival_key(c.pod)))


def visibility_candidates(
    pods: Iterable[Mapping[str, Any]],
    resource: str,
    count: int,
    *,
    claimed: Callable[[Mapping[str, Any]], set[str]],
    served: Callable[[Mapping[str, Any]], set[str]],
) -> list[Candidate]:
    """Pending pods that hold cards and whose sidecar asks for `count` visibility tokens, best first.

    A sidecar not served yet ranks before one that was (a replay); `served(pod)` names those served.
    """
    found = []
    for pod in pods:
        if not p.is_pending(pod) or not claimed(pod):
            continue
        matching = _matching(pod, resource, count)
        if not matching:
            continue
        done = served(pod)
        free = [name for name in matching if name not in done]
        tier = Tier.FEASIBLE if free else Tier.CLAIMED
        found.append(Candidate(pod, (free or matching)[0], tier))
    return sorted(found, key=lambda c: (c.tier, p.arrival_key(c.pod)))
