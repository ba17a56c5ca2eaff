"""GetPreferredAllocation steers the kubelet away from cards Allocate would refuse."""

from __future__ import annotations

from pathlib import Path

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator.allocator import Allocator
from gpustack_operator.device_manager.allocator.annotation import AllocatedCard, ContainerAllocation
from gpustack_operator.device_manager.allocator.holdings import Holdings, prefer
from gpustack_operator.device_manager.plugin.inventory import Inventory
from tests.unit.device_manager.allocator.builders import (
    EXCLUSIVE,
    H100,
    SLICED,
    container,
    device_id,
    group,
    pod,
    uuid,
)
from tests.unit.device_manager.allocator.conftest import FakeCluster, make_allocator

SLICED_MODE, EXCLUSIVE_MODE = DeviceAllocationMode.SLICED, DeviceAllocationMode.EXCLUSIVE


def held(*cards: tuple[int, DeviceAllocationMode, int]) -> Holdings:
    """Holdings where card i is held in a mode with some units taken."""
    holdings = Holdings()
    for index, mode, units in cards:
        allocation = ContainerAllocation(
            mode, (AllocatedCard(H100, "nvidia", uuid(index), index, units),), ()
        )
        holdings.add_pod(f"ns/holder-{index}", {"main": allocation})
    return holdings


def slices(*cards: int, per_card: int = 2) -> list[str]:
    return [device_id(card, idx) for card in cards for idx in range(per_card)]


def test_slices_pack_onto_the_sliced_card_with_least_room_then_free_ones_never_first_on_exclusive() -> None:
    holdings = held((0, EXCLUSIVE_MODE, 1_600_000), (1, SLICED_MODE, 1_200_000), (2, SLICED_MODE, 400_000))
    chosen = prefer(SLICED_MODE, slices(0, 1, 2, 3), [], 4, holdings, order={})
    assert chosen == [device_id(1), device_id(2), device_id(3), device_id(0)]


def test_a_sliced_card_without_room_for_the_need_comes_after_the_free_cards() -> None:
    """Issue 22: a full sliced card used to rank first, so six half-card pods all landed on card 0."""
    holdings = held((0, SLICED_MODE, 1_600_000), (1, SLICED_MODE, 1_000_000))
    half = 800_000
    chosen = prefer(SLICED_MODE, slices(0, 1, 2), [], 1, holdings, order={}, need=lambda _key: half)
    assert chosen == [device_id(2)], "card 1 has 600,000 left, card 0 nothing: only card 2 takes a half"
    chosen = prefer(SLICED_MODE, slices(0, 1, 2), [], 1, holdings, order={}, need=lambda _key: 500_000)
    assert chosen == [device_id(1)], "a need card 1 still has room for packs onto it"


def test_shares_go_one_per_card_where_the_card_has_room() -> None:
    shared = DeviceAllocationMode.SHARED
    holdings = held((0, shared, 1_440_000), (1, shared, 1_600_000))  # one share left on 0, none on 1
    tokens = [device_id(card, idx * 160_000) for card in (0, 1, 2, 3) for idx in range(3)]
    chosen = prefer(shared, tokens, [], 2, holdings, order={}, need=lambda _key: 160_000)
    assert chosen == [device_id(0), device_id(2)], "the last share of 0, then a free card; never full 1"
    chosen = prefer(shared, tokens, [], 3, holdings, order={}, need=lambda _key: 160_000)
    assert chosen == [device_id(0), device_id(2), device_id(3)], "one share per card, never two of one"


def test_whole_cards_avoid_cards_held_in_another_mode_and_follow_the_card_index() -> None:
    holdings = held((0, SLICED_MODE, 400_000))
    order = {(H100, uuid(i)): i for i in range(3)}
    chosen = prefer(EXCLUSIVE_MODE, [device_id(2), device_id(0), device_id(1)], [], 2, holdings, order)
    assert chosen == [device_id(1), device_id(2)]


def test_tokens_spread_over_distinct_cards_and_must_include_comes_first() -> None:
    chosen = prefer(SLICED_MODE, slices(0, 1, per_card=3), [device_id(1, 2)], 3, Holdings(), order={})
    assert chosen == [device_id(1, 2), device_id(0, 0), device_id(1, 0)]
    assert prefer(SLICED_MODE, ["junk", *slices(0)], [], 1, Holdings()) == [device_id(0, 0)]


async def test_the_allocator_prefers_from_the_pods_it_sees(cluster: FakeCluster, tmp_path: Path) -> None:
    allocator: Allocator = make_allocator(cluster, tmp_path, Inventory("nvidia", [group(count=3)]))
    exclusive = ContainerAllocation(
        EXCLUSIVE_MODE, (AllocatedCard(H100, "nvidia", uuid(0), 0, 1_600_000),), ()
    )
    cluster.add(pod("tenant", container(), phase="Running", allocations={"main": exclusive}))
    assert allocator.preferred(SLICED, slices(0, 1, 2), [], 1) == [device_id(1)]
    assert allocator.preferred(EXCLUSIVE, [device_id(2), device_id(1)], [], 1) == [device_id(1)]
