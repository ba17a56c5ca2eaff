"""The worker and the device manager pick the same cards for the same request (issue 24's card model).

The worker's admission check places a Pod on a node's cards (rules.admission: demand from the Pod spec,
placement by the card model); the device manager then steers the kubelet with GetPreferredAllocation and
accepts or refuses in Allocate (device_manager.allocator, by the same model). If the two disagreed, the
check would promise cards the plugin does not give, or the plugin would give cards the check counted as
taken. Here 2,400 generated requests (three modes, one to three cards, slices of every size, NVIDIA and
Ascend) meet generated nodes (cards free, held in each mode with any units left, unhealthy, unsliceable,
UUIDs in another order than the indexes) and both sides must answer alike: when the worker places the Pod,
the device manager prefers exactly those cards and Allocate accepts them; when the worker finds no room,
Allocate refuses whatever the preference names.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from gpustack_operator.api.types.devices import DeviceAllocationMode as Mode
from gpustack_operator.api.types.devices import DevicesGroup
from gpustack_operator.device_manager.allocator.annotation import AllocatedCard, ContainerAllocation
from gpustack_operator.device_manager.allocator.holdings import Reservations, prefer
from gpustack_operator.device_manager.allocator.identify import resolve
from gpustack_operator.device_manager.allocator.plan import Planner
from gpustack_operator.device_manager.allocator.workdirs import HostPaths
from gpustack_operator.device_manager.plugin.handler import AllocationRefusedError, ResourceSpec
from gpustack_operator.device_manager.plugin.ids import card_ids
from gpustack_operator.device_manager.plugin.inventory import Inventory
from gpustack_operator.rules.admission.demand import pod_needs
from gpustack_operator.rules.admission.placement import Ask, place
from gpustack_operator.rules.cards import CARD_UNITS, SHARED_UNITS, CardState
from tests.unit.device_manager.allocator.builders import container, pod

CASES = 2400
VENDORS = {"nvidia": ("nvidia.com/gpu", 128, 81559), "ascend": ("huawei.com/npu", 63, 65536)}
SUFFIX = {Mode.EXCLUSIVE: "", Mode.SHARED: ".shared", Mode.SLICED: ".sliced"}


def node_cards(rng: random.Random) -> list[tuple[str, CardState]]:
    """(UUID, state) of one node's cards, indexed 0.., with UUIDs that sort in another order."""
    count = rng.randint(1, 8)
    sliceable = rng.random() < 0.85
    cards = []
    for index in range(count):
        uuid = f"GPU-{rng.getrandbits(32):08x}"
        roll = rng.random()
        if roll < 0.35:
            state = CardState(CARD_UNITS, Mode.NONE)
        elif roll < 0.5:
            state = CardState(0, Mode.EXCLUSIVE)
        elif roll < 0.7:
            state = CardState(CARD_UNITS - SHARED_UNITS * rng.randint(1, 10), Mode.SHARED)
        else:
            state = CardState(CARD_UNITS - rng.randint(1, 100) * 16_000, Mode.SLICED)
        healthy = rng.random() > 0.1
        cards.append((uuid, CardState(state.remaining, state.mode, sliceable, healthy, index)))
    return cards


def devices_group(vendor: str, cards: list[tuple[str, CardState]]) -> DevicesGroup:
    _, slices, mib = VENDORS[vendor]
    group: DevicesGroup = {
        "id": f"{vendor}-card",
        "manufacturer": vendor,
        "name": vendor.upper(),
        "memory": mib,
        "runtimeVersion": "12.4",
        "accelerators": [
            {
                "id": uuid,
                "index": state.index,
                "physicalIndexes": [state.index],
                "topology": {
                    "pciBusId": "",
                    "pciRootId": "",
                    "pciClass": "",
                    "numaAffinity": "0",
                    "cpuAffinity": "",
                },
                "status": {"unhealthy": not state.healthy},
            }
            for uuid, state in cards
        ],
    }
    if cards[0][1].sliceable:
        group["acceleratorsFeature"] = {"logicalSliced": {"maxSize": slices}}
    return group


def holders(vendor: str, cards: list[tuple[str, CardState]]) -> list[dict[str, Any]]:
    """One running Pod per held card, whose recorded allocation leaves the card as the ledger says."""
    pods = []
    for uuid, state in cards:
        if state.mode == Mode.NONE:
            continue
        card = AllocatedCard(f"{vendor}-card", vendor, uuid, state.index, CARD_UNITS - state.remaining)
        alloc = ContainerAllocation(Mode(state.mode), (card,), (f"legacy-{uuid}",))
        pods.append(pod(f"holder-{uuid.lower()}", phase="Running", allocations={"main": alloc}))
    return pods


def request(rng: random.Random, vendor: str) -> tuple[Mode, int, dict[str, str]]:
    """A container's card request: mode, how many cards, and its limits as the pod webhook leaves them."""
    base = VENDORS[vendor][0]
    mode = rng.choice([Mode.EXCLUSIVE, Mode.SHARED, Mode.SLICED])
    count = rng.choice([1, 1, 1, 2, 3]) if mode != Mode.SLICED or vendor == "nvidia" else 1
    limits = {base + SUFFIX[mode]: str(count)}
    if mode == Mode.SLICED:
        pct = rng.choice([1, 5, 10, 20, 25, 30, 40, 50, 60, 70, 75, 99, 100])
        limits |= {
            f"{base}.sliced.memory-percentage": str(pct),
            f"{base}.sliced.units": str(pct * 16_000),
            f"{base}.sliced.cores-percentage": "100",
        }
    return mode, count, limits


def test_the_worker_and_the_device_manager_choose_the_same_cards() -> None:
    rng = random.Random(24)
    placed = refused = 0
    for case in range(CASES):
        vendor = rng.choice(list(VENDORS))
        cards = node_cards(rng)
        mode, count, limits = request(rng, vendor)
        asking = pod(f"asking-{case}", container("main", limits), minute=30)
        base = VENDORS[vendor][0]

        # The worker: the Pod's needs from its spec, placed on the node's ledger rows.
        needs = pod_needs(asking, base)
        assert len(needs) == count, (limits, needs)
        placement = place([Ask(1, needs, ("node-a",))], {"node-a": dict(cards)})
        worker = sorted(placement["node-a"]) if placement else None

        # The device manager: the same node as its inventory and the pods' records.
        inventory = Inventory(vendor, [devices_group(vendor, cards)])
        planner = Planner(
            Reservations(), HostPaths(Path("/nonexistent"), Path("/nonexistent")), {vendor: inventory}
        )
        everyone = [*holders(vendor, cards), asking]
        resource = ResourceSpec(base + SUFFIX[mode], vendor, mode)
        holdings = planner.holdings(everyone)
        available = [
            device_id
            for card in inventory.cards()
            if card.healthy
            for device_id in card_ids(mode, card.group, card.uuid, card.max_slices)
        ]
        order = {card.key: card.index for card in inventory.cards()}
        need = planner.need(resource, count, everyone)
        chosen = prefer(mode, available, [], count, holdings, order, need) if available else []
        preferred = sorted({device_id.split(":")[1] for device_id in chosen})

        where = f"case {case}: {vendor} {limits} on {cards}"
        if worker is not None:
            placed += 1
            assert preferred == worker, f"{where}: the worker placed {worker}, the plugin prefers {preferred}"
            devices, by_card = resolve(resource, inventory, chosen)
            plan = planner.plan(resource, devices, by_card, everyone)
            assert plan is not None, where
            assert plan.allocation is not None, where
            assert sorted(c.uuid for c in plan.allocation.cards) == worker, where
        else:
            refused += 1
            if len(chosen) < count:
                continue  # the kubelet itself has too few devices to ask with
            try:
                devices, by_card = resolve(resource, inventory, chosen)
                plan = planner.plan(resource, devices, by_card, everyone)
            except AllocationRefusedError:
                continue  # no room, a card held in another mode, or two tokens of one card

            raise AssertionError(f"{where}: the worker found no room, Allocate accepted {plan}")
    assert placed > CASES // 4, placed
    assert refused > CASES // 10, refused
