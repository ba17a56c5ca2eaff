"""MetaX: the control node `/dev/mxcd` and each card's DRM nodes, with METAX_VISIBLE_DEVICES.

Sliced is a whole-card passthrough: no slicing runtime is injected.
"""

from __future__ import annotations

from gpustack_operator.device_manager.allocator.responses.common import (
    Grant,
    Injection,
    dri_nodes,
    with_device_nodes,
)

CONTROL = "/dev/mxcd"


def respond(grant: Grant) -> Injection:
    return with_device_nodes(grant, [CONTROL], dri_nodes)
