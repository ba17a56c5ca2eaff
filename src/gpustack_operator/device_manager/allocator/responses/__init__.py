"""What the container is given for its cards: one module per vendor, chosen here by manufacturer.

The planner hands each workload Allocate to `respond` as a Grant and gets back the ContainerResponse
plus any host-side preparation; vendors without a module of their own (Iluvatar, MThreads, T-Head) get
the visible-devices env alone. The SSH sidecar's mirror of its pod's cards is `visibility_response`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from gpustack_operator.device_manager.allocator.responses import amd, ascend, cambricon, hygon, metax, nvidia
from gpustack_operator.device_manager.allocator.responses.common import (
    Grant,
    Injection,
    Prepare,
    Responder,
    env_only,
    visibility_response,
)

__all__ = ["RESPONDERS", "Grant", "Injection", "Prepare", "respond", "visibility_response"]

RESPONDERS: Final[Mapping[str, Responder]] = {
    "amd": amd.respond,
    "ascend": ascend.respond,
    "cambricon": cambricon.respond,
    "hygon": hygon.respond,
    "metax": metax.respond,
    "nvidia": nvidia.respond,
}


def respond(grant: Grant) -> Injection:
    """The vendor's response to a workload container's grant; AllocationRefusedError when it cannot."""
    return RESPONDERS.get(grant.manufacturer, env_only)(grant)
