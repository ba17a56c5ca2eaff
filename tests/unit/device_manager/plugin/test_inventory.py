"""The plugin's card view follows detection: cards of its manufacturer, slices, health, and changes."""

from __future__ import annotations

import asyncio

from gpustack_operator.device_manager.plugin.inventory import Inventory, cards_of, max_slices
from tests.unit.device_manager.allocator.builders import group, uuid


def test_cards_carry_group_memory_cuda_version_health_slices_and_numa() -> None:
    cards = cards_of([group(count=2, unhealthy=[1], runtime="11.8"), group(manufacturer="ascend")], "nvidia")
    assert [(c.uuid, c.index, c.healthy) for c in cards] == [(uuid(0), 0, True), (uuid(1), 1, False)]
    assert {(c.memory_mib, c.runtime_version, c.max_slices, c.numa_node) for c in cards} == {
        (81559, "11.8", 128, 0)
    }


def test_max_slices_is_the_larger_of_physical_and_logical() -> None:
    assert max_slices({"physicalSliced": {"maxSize": 7}, "logicalSliced": {"maxSize": 128}}) == 128
    assert max_slices({"physicalSliced": {"maxSize": 7}}) == 7
    assert max_slices({}) == 0
    assert max_slices(None) == 0


async def test_update_bumps_the_version_and_wakes_waiters_only_on_change() -> None:
    inventory = Inventory("nvidia", [group(count=2)])
    waiter = asyncio.ensure_future(inventory.wait_changed(inventory.version))
    assert inventory.update([group(count=2)]) is False
    await asyncio.sleep(0)
    assert not waiter.done()
    assert inventory.update([group(count=2, unhealthy=[0])]) is True
    assert await asyncio.wait_for(waiter, 5) == 1
    assert inventory.card(("h100-80gb-hbm3", uuid(0))) is not None
    assert not inventory.cards()[0].healthy
