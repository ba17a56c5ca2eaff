"""Hygon DCU: ROCm-derived (DTK), so it is reached as AMD's cards are - `/dev/kfd` and each card's DRM
nodes - with HYGON_VISIBLE_DEVICES. Sliced is a whole-card passthrough: no per-pod vdev.conf is written.
"""

from __future__ import annotations

from gpustack_operator.device_manager.allocator.responses import amd
from gpustack_operator.device_manager.allocator.responses.common import Responder

respond: Responder = amd.respond
