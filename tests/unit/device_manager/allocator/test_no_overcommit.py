"""Issue 22: slices and shares never add up to more than a card.

GetPreferredAllocation steers each container to a card with room for its need, Allocate refuses a demand
that no longer fits (FAILED_PRECONDITION naming the card, its remaining units and the demand) and records
nothing, and a property test over generated nodes and requests holds the planner to both rules.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator.allocator import Allocator
from gpustack_operator.device_manager.allocator.annotation import (
    AllocatedCard,
    ContainerAllocation,
    pod_allocations,
)
from gpustack_operator.device_manager.allocator.holdings import Holdings, NeedOf, Reservations, prefer
from gpustack_operator.device_manager.allocator.identify import resolve
from gpustack_operator.device_manager.allocator.plan import CardCapacityError, CardConflictError, Planner
from gpustack_operator.device_manager.allocator.workdirs import HostPaths
from gpustack_operator.device_manager.plugin.handler import AllocationRefusedError
from gpustack_operator.device_manager.plugin.ids import token_indexes
from gpustack_operator.device_manager.plugin.inventory import Inventory
from tests.unit.device_manager.allocator.builders import (
    EXCLUSIVE,
    H100,
    SHARED,
    SLICED,
    container,
    device_id,
    group,
    pod,
    sliced_limits,
    uuid,
)
from tests.unit.device_manager.allocator.conftest import FakeCluster, make_allocator

CARD = 1_600_000
MODE_OF = {
    "exclusive": DeviceAllocationMode.EXCLUSIVE,
    "shared": DeviceAllocationMode.SHARED,
    "sliced": DeviceAllocationMode.SLICED,
}


def sliced_tokens(cards: int, per_card: int = 128) -> list[str]:
    return [device_id(card, idx) for card in range(cards) for idx in range(per_card)]


def held_units(cluster: FakeCluster) -> Counter[str]:
    """Card UUID -> units recorded on it by every pod's annotation."""
    total: Counter[str] = Counter()
    for stored in cluster.pods:
        for alloc in pod_allocations(stored).values():
            for card in alloc.cards:
                total[card.uuid] += card.units
    return total


async def admit(allocator: Allocator, cluster: FakeCluster, name: str, limits: dict[str, str]) -> str:
    """What the kubelet does for one pod: ask for a preference among the free tokens, allocate the answer."""
    cluster.add(pod(name, container("main", limits)))
    taken = {d for stored in cluster.pods for a in pod_allocations(stored).values() for d in a.device_ids}
    free = [d for d in sliced_tokens(8) if d not in taken]
    chosen = allocator.preferred(SLICED, free, [], 1)
    response = await allocator.allocate(SLICED, chosen)
    return response.envs["NVIDIA_VISIBLE_DEVICES"]


async def test_six_half_card_pods_spread_over_three_cards(cluster: FakeCluster, tmp_path: Path) -> None:
    allocator = make_allocator(cluster, tmp_path, Inventory("nvidia", [group(count=8)]))
    cards = [await admit(allocator, cluster, f"half-{i}", sliced_limits(pct="50")) for i in range(6)]
    assert Counter(cards) == {uuid(0): 2, uuid(1): 2, uuid(2): 2}, "two halves per card, packed"
    assert max(held_units(cluster).values()) == CARD


async def test_mixed_sizes_pack_without_overselling(cluster: FakeCluster, tmp_path: Path) -> None:
    allocator = make_allocator(cluster, tmp_path, Inventory("nvidia", [group(count=8)]))
    for i, pct in enumerate(["30", "50", "30", "70", "30", "50", "30", "20", "60", "40"]):
        await admit(allocator, cluster, f"p-{i}", sliced_limits(pct=pct))
    assert all(units <= CARD for units in held_units(cluster).values()), held_units(cluster)


async def test_the_seventeenth_half_on_a_full_node_is_refused_and_never_recorded(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    refused: list[tuple[str, str]] = []
    allocator = make_allocator(cluster, tmp_path, Inventory("nvidia", [group(count=8)]))
    allocator.on_refused = lambda resource, reason: refused.append((resource, reason))
    for i in range(16):
        await admit(allocator, cluster, f"half-{i}", sliced_limits(pct="50"))
    assert held_units(cluster) == {uuid(i): CARD for i in range(8)}, "the node is exactly full"
    writes = len(cluster.writes)
    with pytest.raises(AllocationRefusedError) as caught:
        await admit(allocator, cluster, "seventeenth", sliced_limits(pct="50"))
    assert caught.value.status == "FAILED_PRECONDITION"
    message = str(caught.value)
    assert "pod ns/seventeenth container main" in message
    assert f"has 0 of {CARD} units left" in message
    assert "the container needs 800000" in message
    assert "refused rather than oversell the card" in message
    assert len(cluster.writes) == writes, "nothing recorded"
    assert allocator.reservations.get(cluster.pods[-1]["metadata"]["uid"]) is None
    assert refused == [("nvidia.com/gpu.sliced", "capacity")]


@pytest.mark.parametrize(
    ("resource", "limits", "device", "held"),
    [
        (SHARED, {"nvidia.com/gpu.shared": "1"}, device_id(0, 160_000), DeviceAllocationMode.SHARED),
        (EXCLUSIVE, {"nvidia.com/gpu": "1"}, device_id(0), DeviceAllocationMode.EXCLUSIVE),
        (SLICED, sliced_limits(pct="25"), device_id(0, 7), DeviceAllocationMode.SLICED),
    ],
    ids=["shared-on-ten-shares", "exclusive-on-exclusive", "sliced-on-full-slices"],
)
async def test_a_card_already_full_in_the_same_mode_is_refused(
    allocator: Allocator,
    cluster: FakeCluster,
    resource: Any,
    limits: dict[str, str],
    device: str,
    held: DeviceAllocationMode,
) -> None:
    """A full card (an older version's records, or a kubelet that lost its checkpoint) takes no more."""
    full = ContainerAllocation(held, (AllocatedCard(H100, "nvidia", uuid(0), 0, CARD),), ("legacy",))
    cluster.add(pod("holder", container(), phase="Running", allocations={"main": full}))
    cluster.add(pod("new", container("main", limits), minute=5))
    with pytest.raises(CardCapacityError) as caught:
        await allocator.allocate(resource, [device])
    assert caught.value.status == "FAILED_PRECONDITION"
    assert f"card {uuid(0)} has 0 of {CARD} units left (held {held.label} by ns/holder)" in str(caught.value)
    assert cluster.writes == []


async def test_an_app_container_reusing_its_init_containers_card_is_not_refused(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    """The kubelet hands an init container's devices on to the app container: one card, counted once."""
    gpu = {"nvidia.com/gpu": "1"}
    cluster.add(pod("p", container("app", gpu), init=[container("setup", gpu)]))
    await allocator.allocate(EXCLUSIVE, [device_id(0)])
    await allocator.allocate(EXCLUSIVE, [device_id(0)])
    assert [name for name, _ in cluster.writes] == ["p", "p"]
    assert set(pod_allocations(cluster.pods[0])) == {"setup", "app"}


# ---- the property ------------------------------------------------------------------------------------------

CARDS = 4
Held = tuple[str, int]
"""(mode, units taken) of one holder pod on one card."""


@st.composite
def nodes(draw: st.DrawFn) -> list[list[Held]]:
    """Per card, the holders on it: one mode per card, units that may fill it but never oversell it."""
    cards = []
    for _ in range(CARDS):
        mode = draw(st.sampled_from(["free", "exclusive", "shared", "sliced"]))
        if mode == "free":
            cards.append([])
        elif mode == "exclusive":
            cards.append([("exclusive", CARD)])
        elif mode == "shared":
            cards.append([("shared", 160_000)] * draw(st.integers(1, 10)))
        else:
            parts = draw(st.lists(st.integers(1, 100), min_size=1, max_size=6))
            holders, total = [], 0
            for pct in parts:
                if total + pct * 16_000 <= CARD:
                    holders.append(("sliced", pct * 16_000))
                    total += pct * 16_000
            cards.append(holders)
    return cards


def planner_and_pods(node: list[list[Held]]) -> tuple[Planner, Inventory, list[dict[str, Any]]]:
    inventory = Inventory("nvidia", [group(count=CARDS)])
    pods = []
    for index, holders in enumerate(node):
        for n, (mode, units) in enumerate(holders):
            alloc = ContainerAllocation(
                MODE_OF[mode], (AllocatedCard(H100, "nvidia", uuid(index), index, units),), (f"legacy-{n}",)
            )
            pods.append(pod(f"c{index}-{n}", container(), phase="Running", allocations={"main": alloc}))
    planner = Planner(
        Reservations(), HostPaths(Path("/nonexistent"), Path("/nonexistent")), {"nvidia": inventory}
    )
    return planner, inventory, pods


REQUESTS = st.one_of(
    st.tuples(st.just("exclusive"), st.just({"nvidia.com/gpu": "1"})),
    st.tuples(st.just("shared"), st.just({"nvidia.com/gpu.shared": "1"})),
    st.builds(lambda pct: ("sliced", sliced_limits(pct=str(pct))), st.integers(1, 100)),
)
RESOURCES = {"exclusive": EXCLUSIVE, "shared": SHARED, "sliced": SLICED}


def has_room(holdings: Holdings, key: tuple[str, str], mode: DeviceAllocationMode, units: int) -> bool:
    return holdings.get(key).can_take(mode, units)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node=nodes(), request=REQUESTS, pick=st.integers(0, CARDS - 1))
def test_no_accepted_plan_oversells_and_the_preference_names_a_card_with_room_first(
    node: list[list[Held]], request: tuple[str, dict[str, str]], pick: int
) -> None:
    kind, limits = request
    resource = RESOURCES[kind]
    planner, inventory, pods = planner_and_pods(node)
    asking = pod("asking", container("main", limits), minute=30)
    everyone = [*pods, asking]
    holdings = planner.holdings(everyone)
    need = planner.need(resource, 1, everyone)
    card = inventory.card((H100, uuid(0)))
    assert card is not None
    tokens = [
        device_id(i, idx) for i in range(CARDS) for idx in token_indexes(resource.mode, card.max_slices)
    ]
    chosen = planner_prefer(resource, tokens, holdings, need)
    with_room = [
        i for i in range(CARDS) if has_room(holdings, (H100, uuid(i)), resource.mode, need((H100, uuid(i))))
    ]
    chosen_card = int(chosen.split(":")[1].rsplit("-", 1)[1])
    if with_room:
        assert chosen_card in with_room, f"named card {chosen_card} while {with_room} have room"

    # Whatever the kubelet picks, Allocate's plan either refuses or leaves no card oversold.
    ids = [t for t in tokens if t.split(":")[1] == uuid(pick)][:1]
    devices, cards = resolve(resource, inventory, ids)
    try:
        plan = planner.plan(resource, devices, cards, everyone)
    except (CardCapacityError, CardConflictError):
        assert not has_room(holdings, (H100, uuid(pick)), resource.mode, need((H100, uuid(pick))))
        return
    assert plan is not None
    assert plan.allocation is not None
    after = Holdings()
    for stored in pods:
        after.add_pod(stored["metadata"]["name"], pod_allocations(stored))
    after.add_pod("asking", {"main": plan.allocation})
    assert not after.oversold(), after.oversold()


def planner_prefer(resource: Any, tokens: list[str], holdings: Holdings, need: NeedOf) -> str:
    order = {(H100, uuid(i)): i for i in range(CARDS)}
    (chosen,) = prefer(resource.mode, tokens, [], 1, holdings, order, need)
    return chosen


async def test_a_replay_on_a_card_older_records_oversold_is_answered_from_its_record(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    """A Pending pod already holding 75 % of a card that another pod's 75 % oversold (records of an older
    version): the kubelet re-allocating its own token adds nothing, so it is answered, not refused."""
    three_quarters = 1_200_000
    old = ContainerAllocation(
        DeviceAllocationMode.SLICED, (AllocatedCard(H100, "nvidia", uuid(0), 0, three_quarters),), ("x",)
    )
    mine = ContainerAllocation(
        DeviceAllocationMode.SLICED,
        (AllocatedCard(H100, "nvidia", uuid(0), 0, three_quarters),),
        (device_id(0, 5),),
    )
    cluster.add(pod("old", container(), phase="Running", allocations={"main": old}))
    cluster.add(
        pod("replay", container("main", sliced_limits(pct="75")), minute=5, allocations={"main": mine})
    )
    response = await allocator.allocate(SLICED, [device_id(0, 5)])
    assert response.envs["NVIDIA_VISIBLE_DEVICES"] == uuid(0)
    cluster.add(pod("more", container("main", sliced_limits(pct="10")), minute=9))
    with pytest.raises(CardCapacityError, match="has -800000 of 1600000 units left"):
        await allocator.allocate(SLICED, [device_id(0, 6)])


def test_the_preference_on_a_full_node_answers_quickly_whatever_pods_are_pending(tmp_path: Path) -> None:
    """Every card full and 500 sliced pods pending: the need is worked out once per card, not per token."""
    holders = [
        pod(
            f"h{i}",
            container(),
            phase="Running",
            allocations={
                "main": ContainerAllocation(
                    DeviceAllocationMode.SLICED, (AllocatedCard(H100, "nvidia", uuid(i), i, CARD),), ("x",)
                )
            },
        )
        for i in range(8)
    ]
    pending = [pod(f"p{i}", container("main", sliced_limits(pct="30"))) for i in range(500)]
    inventory = Inventory("nvidia", [group(count=8)])
    planner = Planner(Reservations(), HostPaths(tmp_path / "d", tmp_path / "l"), {"nvidia": inventory})
    asked: Counter[tuple[str, str]] = Counter()
    need = planner.need(SLICED, 1, [*holders, *pending])

    def counted(key: tuple[str, str]) -> int:
        asked[key] += 1
        return need(key)

    chosen = prefer(
        DeviceAllocationMode.SLICED, sliced_tokens(8), [], 1, planner.holdings(holders), None, counted
    )
    assert len(chosen) == 1
    assert max(asked.values()) == 1, "each card's need is worked out once"
