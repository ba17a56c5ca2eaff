"""GetPreferredAllocation: steer the kubelet's pick towards cards the allocator will accept.

The kubelet chooses device IDs per resource without knowing that a sliced token and an exclusive ID may be
the same card; left alone its choice is arbitrary, and Allocate would refuse a card held in another mode.
So the plugin answers with a preference: cards already held in the requested mode first (packing slices
and shares, the emptiest of them first), then free cards, and cards held in another mode last; tokens are
spread over distinct cards before a second token of one card is taken.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator.holdings import Holdings
from gpustack_operator.device_manager.plugin import ids


def _rank(holdings: Holdings, key: tuple[str, str], mode: DeviceAllocationMode) -> tuple[int, int]:
    holding = holdings.get(key)
    if holding.mode is DeviceAllocationMode.NONE:
        return 1, 0
    if holding.mode is mode:
        return 0, -holding.remaining
    return 2, 0


def prefer(
    mode: DeviceAllocationMode,
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
    holdings: Holdings,
    order: Mapping[tuple[str, str], int] | None = None,
) -> list[str]:
    """Up to `size` IDs: every `must_include` ID, then the best of `available` by the rules above.

    Among equally good cards the lower `order` (the card index) wins.
    """
    order = order or {}
    chosen = list(dict.fromkeys(must_include))
    by_card: dict[tuple[str, str], list[ids.DeviceID]] = {}
    for device_id in available:
        if device_id in chosen:
            continue
        try:
            device = ids.parse_id(device_id)
        except ids.InvalidDeviceIDError:
            continue
        by_card.setdefault(device.card, []).append(device)
    ranked = sorted(by_card, key=lambda key: (_rank(holdings, key, mode), order.get(key, 0), key))
    queues = [sorted(by_card[key], key=lambda d: d.idx) for key in ranked]
    depth = 0
    while len(chosen) < size and any(depth < len(q) for q in queues):
        for queue in queues:
            if depth < len(queue) and len(chosen) < size:
                chosen.append(str(queue[depth]))
        depth += 1
    return chosen[: max(size, len(must_include))]
