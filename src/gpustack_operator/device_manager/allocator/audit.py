"""Confirm the allocation records against the kubelet: what each pod's annotation says it was given
versus the device IDs the kubelet's PodResources List says it committed to that container.

Allocate identifies pods through PodResources, so the two agree unless the device manager had to guess
(the PodResources socket did not answer) or something else wrote the annotation. A disagreement is
logged, naming the pod, the container and both ID lists, so an operator sees it rather than a ledger
that silently names the wrong holder. Only containers the kubelet lists (app and restartable init
containers) and only workload resources (not the sidecar's visibility tokens, which are never recorded)
are compared.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpustack_operator.device_manager.allocator import pods as p
from gpustack_operator.device_manager.allocator.annotation import pod_allocations
from gpustack_operator.device_manager.podresources.model import KubeletPods, pod_name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Mismatch:
    pod: str
    container: str
    recorded: tuple[str, ...]
    kubelet: tuple[str, ...]

    def __str__(self) -> str:
        return (
            f"pod={self.pod} container={self.container} recorded={','.join(self.recorded) or '-'} "
            f"kubelet={','.join(self.kubelet) or '-'}"
        )


def mismatches(
    kubelet: KubeletPods, pods: Iterable[Mapping[str, Any]], workload: Callable[[str], bool]
) -> list[Mismatch]:
    """Recorded containers whose device IDs differ from the kubelet's, for pods the kubelet lists."""
    found = []
    for pod in pods:
        listed = kubelet.pods.get(pod_name(pod))
        if listed is None:
            continue
        for container, allocation in sorted(pod_allocations(pod).items()):
            if container not in listed:
                continue  # a regular init container: the kubelet does not list it
            given = tuple(sorted(i for res, ids in listed[container].items() if workload(res) for i in ids))
            recorded = tuple(sorted(allocation.device_ids))
            if given and given != recorded:  # no IDs yet: the kubelet has not committed them
                found.append(Mismatch(p.pod_key(pod), container, recorded, given))
    return found


def report(found: list[Mismatch], node: str) -> None:
    for mismatch in found:
        log.warning("node=%s allocation record disagrees with the kubelet: %s", node, mismatch)
