"""AMD (ROCm): the kernel fusion driver `/dev/kfd` and each card's DRM nodes, with AMD_VISIBLE_DEVICES.

ROCm reaches a GPU through `/dev/kfd` (compute dispatch, one node for all cards) and the card's DRM
render node; a container holding only the visible-devices variable would see no card unless the AMD
container toolkit is installed, so the device nodes are granted here (contract §8). Sliced is a
whole-card passthrough: no slicing runtime is injected.
"""

from __future__ import annotations

from gpustack_operator.device_manager.allocator.responses.common import (
    Grant,
    Injection,
    dri_nodes,
    with_device_nodes,
)

KFD = "/dev/kfd"


def respond(grant: Grant) -> Injection:
    return with_device_nodes(grant, [KFD], dri_nodes)
