"""`kubectl get devices` (v1): the columns count what the ledger says, by the card model's rules."""

from __future__ import annotations

from typing import Any

from gpustack_operator.apiserver.registry.devices import COLUMNS


def row(obj: dict[str, Any]) -> dict[str, Any]:
    return {column.name: column.cell(obj) for column in COLUMNS if column.name not in ("Name", "Age")}


def test_the_columns_count_free_held_unhealthy_and_oversold_cards_as_the_ledger_writes_them() -> None:
    ledger = [
        {"id": "GPU-0", "index": 0, "mode": 0, "remaining": 1_600_000},
        {"id": "GPU-1", "index": 1, "mode": 1},  # held whole: the ledger omits a remaining of 0
        {"id": "GPU-2", "index": 2, "mode": 2, "remaining": 1_440_000},
        {"id": "GPU-3", "index": 3, "mode": 3, "remaining": -800_000, "oversold": True},
        {"id": "GPU-4", "index": 4, "mode": 0, "remaining": 1_600_000},  # untouched but unhealthy
    ]
    spec = [{"id": f"GPU-{i}", "status": {"unhealthy": i == 4}} for i in range(5)]
    group = {
        "id": "h100",
        "manufacturer": "nvidia",
        "name": "NVIDIA H100",
        "memory": 81559,
        "accelerators": spec,
    }
    obj = {
        "metadata": {"name": "h100-0"},
        "spec": {"groups": [group]},
        "status": {"groups": [{"id": "h100", "manufacturer": "nvidia", "accelerators": ledger}]},
    }
    assert row(obj) == {
        "Manufacturer": "nvidia",
        "Cards": 5,
        "Free": 1,
        "Exclusive": 1,
        "Shared": 1,
        "Sliced": 1,
        "Unhealthy": 1,
        "Oversold": 1,
        "Product": "NVIDIA H100",
        "VRAM": "81559Mi",
    }
    wide = {c.name for c in COLUMNS if c.priority}
    assert wide == {"Oversold", "Product", "VRAM"}, "-o wide only"


def test_a_node_of_two_products_names_both_and_their_vram_in_the_spec_order() -> None:
    groups = [
        {"id": "a10", "manufacturer": "nvidia", "name": "NVIDIA A10", "memory": 23028},
        {"id": "910b", "manufacturer": "ascend", "name": "Ascend 910B", "memory": 65536},
        {"id": "a10-bis", "manufacturer": "nvidia", "name": "NVIDIA A10", "memory": 23028},
    ]
    obj = {"metadata": {"name": "mixed"}, "spec": {"groups": groups}}
    assert row(obj)["Product"] == "NVIDIA A10,Ascend 910B"
    assert row(obj)["VRAM"] == "23028Mi,65536Mi"


def test_a_node_without_a_ledger_yet_shows_zeros_not_an_error() -> None:
    obj = {"metadata": {"name": "n"}, "spec": {"groups": []}}
    assert row(obj) == {
        "Manufacturer": "<none>",
        "Cards": 0,
        "Free": 0,
        "Exclusive": 0,
        "Shared": 0,
        "Sliced": 0,
        "Unhealthy": 0,
        "Oversold": 0,
        "Product": "<none>",
        "VRAM": "<none>",
    }
