"""What every recorded NVML-shaped library (IXML, HGML) answers: NVML's calls under the vendor's names.

A card's handle is its index + 1 (the library's handles are opaque pointers, never NULL); a card is any
object with ``bus``, ``uuid``, ``name``, ``memory_bytes``, ``used_bytes``, ``cores`` and ``errors`` (a
function -> the code it returns instead of its answer). A vendor recorder adds its own calls through
``on``. The answers pass through ctypes' real marshalling (``clib.recorded_function``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpustack_operator.device_manager.detector import clib, nvmlshape
from tests.unit.device_manager.recorded_clib import OK, fill, library, put, put_text

INVALID_ARGUMENT = 2
ARGUMENT_VERSION_MISMATCH = 25


def on(cards: Sequence[Any], name: str, answer: Callable[..., int]) -> Callable[..., int]:
    """``answer(card, *rest)`` for the card whose handle comes first, unless the card fails ``name``."""

    def call(handle: int | None, *rest: Any) -> int:
        if handle is None or not 1 <= handle <= len(cards):
            return INVALID_ARGUMENT
        card = cards[handle - 1]
        code = card.errors.get(name, OK)
        return code if code != OK else answer(card, *rest)

    return call


def record(
    api: nvmlshape.Api,
    prototypes: Mapping[str, clib.Prototype],
    cards: Sequence[Any],
    vendor: Mapping[str, Callable[..., int]],
    *,
    driver: bytes,
    runtime: int,
    init: int,
    count: int | None,
    pci_device_id: int,
    missing: Sequence[str],
) -> Any:
    """A recorded library answering NVML's calls for ``cards`` in index order, plus ``vendor``'s."""

    def handle_by_index(index: int, out: Any) -> int:
        if not 0 <= index < len(cards):
            return INVALID_ARGUMENT
        code = cards[index].errors.get(api("DeviceGetHandleByIndex_v2"), OK)
        return code if code != OK else put(out, index + 1)

    def memory_v2(card: Any, out: Any) -> int:
        if out.contents.version != nvmlshape.MEMORY_V2:
            return ARGUMENT_VERSION_MISMATCH
        free = card.memory_bytes - card.used_bytes
        return fill(out, total=card.memory_bytes, used=card.used_bytes, free=free, reserved=0)

    def pci(card: Any, out: Any) -> int:
        bus_id = f"00000000:{card.bus:02X}:00.0".encode()
        return fill(
            out, busId=bus_id, busIdLegacy=bus_id[4:], domain=0, bus=card.bus, pciDeviceId=pci_device_id
        )

    by_card: dict[str, Callable[..., int]] = {
        "DeviceGetName": lambda card, out, length: put_text(out, length, card.name),
        "DeviceGetUUID": lambda card, out, length: put_text(out, length, card.uuid),
        "DeviceGetNumGpuCores": lambda card, out: put(out, card.cores),
        "DeviceGetMemoryInfo_v2": memory_v2,
        "DeviceGetMemoryInfo": lambda card, out: fill(
            out, total=card.memory_bytes, used=card.used_bytes, free=0
        ),
        "DeviceGetPciInfo_v3": pci,
    }
    answers: dict[str, Callable[..., int]] = {
        api("InitWithFlags"): lambda flags: init,
        api("SystemGetDriverVersion"): lambda out, length: put_text(out, length, driver),
        api.runtime_version: lambda out: put(out, runtime),
        api("DeviceGetCount_v2"): lambda out: put(out, len(cards) if count is None else count),
        api("DeviceGetHandleByIndex_v2"): handle_by_index,
        **{api(suffix): on(cards, api(suffix), answer) for suffix, answer in by_card.items()},
        **{name: on(cards, name, answer) for name, answer in vendor.items()},
    }
    return library(prototypes, answers, missing)
