"""How each vendor's container runtime learns which cards a container may see.

Exclusive and shared containers, the sliced containers of vendors without a slicing runtime here, and the
SSH sidecar all get the same thing: the vendor's visible-devices variable, which its container toolkit
(nvidia-container-toolkit, Ascend docker runtime, ...) turns into device nodes and driver mounts. NVIDIA
names cards by UUID; the other toolkits take the vendor library's index.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from gpustack_operator.device_manager.plugin.handler import ContainerResponse

VISIBLE_DEVICES_ENV: Final = {
    "amd": "AMD_VISIBLE_DEVICES",
    "ascend": "ASCEND_VISIBLE_DEVICES",
    "cambricon": "CAMBRICON_VISIBLE_DEVICES",
    "hygon": "HYGON_VISIBLE_DEVICES",
    "iluvatar": "IX_VISIBLE_DEVICES",
    "metax": "METAX_VISIBLE_DEVICES",
    "mthreads": "MTHREADS_VISIBLE_DEVICES",
    "nvidia": "NVIDIA_VISIBLE_DEVICES",
    "thead": "THEAD_VISIBLE_DEVICES",
}
BY_UUID: Final = frozenset({"nvidia"})


class Named(Protocol):
    """A card as far as visibility is concerned (CardInfo and AllocatedCard both are)."""

    @property
    def uuid(self) -> str: ...

    @property
    def index(self) -> int: ...


def visible_devices_env(manufacturer: str) -> str:
    return VISIBLE_DEVICES_ENV.get(manufacturer, f"{manufacturer.upper()}_VISIBLE_DEVICES")


def visible_devices(manufacturer: str, cards: Sequence[Named]) -> dict[str, str]:
    """`{<VENDOR>_VISIBLE_DEVICES: "<id>,<id>"}` for the distinct cards, in the order given."""
    names: list[str] = []
    for card in cards:
        name = card.uuid if manufacturer in BY_UUID else str(card.index)
        if name not in names:
            names.append(name)
    return {visible_devices_env(manufacturer): ",".join(names)}


def visibility_response(manufacturer: str, cards: Sequence[Named]) -> ContainerResponse:
    """Exclusive, shared, sidecar (and passthrough sliced) containers: the visible-devices env only."""
    return ContainerResponse(envs=visible_devices(manufacturer, cards))
