"""The §4.1 device-detail defaulting as a pure function: which flavors a type's pool has, what is filled
from their notes, and that an admin's own values stand."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpustack_operator.api.quantity import Quantity
from gpustack_operator.rules.capacity.credits import quantity_to_mib
from gpustack_operator.rules.cards import slice_units
from gpustack_operator.rules.instancetype.descriptors import (
    card_memory_mib,
    carry_over,
    devices_selector,
    enrich,
    flavor_selector,
    pool_descriptors,
)

A = "acceleratable.feature.gpustack.ai/"
G = "general.feature.gpustack.ai/"
H100 = "nvidia-h100-80gb-hbm3"
EPYC: dict[str, Any] = {
    "manufacturer": "amd",
    "product": "AMD EPYC 9654 96-Core Processor",
    "family": "25",
    "physicalCores": "96",
    "clockSpeed": "2400000000",
    "cache": {"l2": "1048576", "l3": "33554432"},
}


def flavor(name: str, **notes: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"resource.gpustack.ai/type": "nodes"},
            "annotations": {f"note.gpustack.ai/{k}": v for k, v in notes.items()} | {"other/x": "y"},
        }
    }


def h100_flavor(name: str = "gpustack--amd-25-17--nvidia-h100-80gb-hbm3-linux-amd64-8d", **more: str) -> Any:
    notes = {
        "acceleratable": "true",
        "generalGroup": "amd-25-17",
        "acceleratorGroup": H100,
        "manufacturer": "nvidia",
        "product": "NVIDIA-H100-80GB-HBM3",
        "memory": "81559Mi",
        "cores": "16896",
        "sliceable": "true",
        "cpuDetail": json.dumps(EPYC),
    }
    return flavor(name, **(notes | more))


def cpu_flavor(name: str, g_key: str, product: str, detail: dict[str, Any] | None = None) -> Any:
    notes = {"acceleratable": "false", "generalGroup": g_key, "manufacturer": g_key.split("-")[0]}
    notes |= {"product": product, "family": "25"}
    if detail is not None:
        notes["cpuDetail"] = json.dumps(detail)
    return flavor(name, **notes)


def accelerated_type(**spec: Any) -> dict[str, Any]:
    base = {
        "acceleratable": True,
        "acceleratorGroup": H100,
        "generalGroup": "generic",
        "os": "linux",
        "arch": "amd64",
        "unitResources": {"cpu": "4", "ram": "16Gi"},
        "localStorage": "100Gi",
    }
    return {"metadata": {"name": "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"}, "spec": base | spec}


def cpu_type(general_group: str = "generic") -> dict[str, Any]:
    spec = {"acceleratable": False, "generalGroup": general_group, "os": "linux", "arch": "amd64"}
    return {"metadata": {"name": "t"}, "spec": spec}


# ---- which flavors --------------------------------------------------------------------------------------


def test_an_accelerated_pool_selects_its_card_flavors_and_when_aware_its_cpu_too() -> None:
    base = {
        "feature.gpustack.ai/acceleratable": "true",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        A + H100: "true",
        "resource.gpustack.ai/type": "nodes",
    }
    assert flavor_selector(accelerated_type(), aware=False) == base
    aware = accelerated_type(generalGroup="amd-25-17")
    assert flavor_selector(aware, aware=True) == base | {G + "amd-25-17": "true"}


def test_a_collapsed_cpu_pool_selects_every_cpu_flavor_of_its_platform() -> None:
    assert flavor_selector(cpu_type(), aware=False) == {
        "feature.gpustack.ai/acceleratable": "false",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "resource.gpustack.ai/type": "nodes",
    }


def test_an_accelerated_type_without_its_group_selects_nothing() -> None:
    assert flavor_selector(accelerated_type(acceleratorGroup=""), aware=False) is None
    assert flavor_selector({"spec": "junk"}, aware=False) is None


# ---- what is filled -------------------------------------------------------------------------------------


def test_a_derived_card_type_gets_product_memory_vendor_cores_and_display_name() -> None:
    spec = enrich(accelerated_type(), [h100_flavor()], aware=False)["spec"]
    assert {k: spec.get(k) for k in ("manufacturer", "product", "family", "memory", "cores")} == {
        "manufacturer": "nvidia",
        "product": "NVIDIA-H100-80GB-HBM3",
        "family": None,
        "memory": "81559Mi",
        "cores": "16896",
    }
    assert spec["displayName"] == "NVIDIA-H100-80GB-HBM3"
    assert "cpu" not in spec  # the CPU detail is folded only when the pools are split by CPU
    assert "sliceable" not in spec


def test_the_memory_filled_is_the_divisor_of_the_pod_webhooks_fold_exactly() -> None:
    spec = enrich(accelerated_type(), [h100_flavor(memory="64Gi")], aware=False)["spec"]
    card = quantity_to_mib(Quantity.parse(spec["memory"]))
    assert card == 65536
    assert slice_units(None, Quantity(4096), card) == 100_000  # 4096 x 1_600_000 / 65536


def test_aware_folds_the_cpu_detail_into_spec_cpu_of_a_card_type() -> None:
    it = accelerated_type(generalGroup="amd-25-17")
    spec = enrich(it, [h100_flavor()], aware=True)["spec"]
    assert spec["cpu"] == EPYC
    assert "physicalCores" not in spec  # the type's own CPU fields are for a CPU type


def test_aware_folds_the_cpu_detail_into_the_spec_of_a_cpu_type() -> None:
    epyc = cpu_flavor("gpustack--amd-25-17-linux-amd64-192c", "amd-25-17", EPYC["product"], EPYC)
    spec = enrich(cpu_type("amd-25-17"), [epyc], aware=True)["spec"]
    assert (spec["manufacturer"], spec["product"], spec["family"]) == ("amd", EPYC["product"], "25")
    assert (spec["physicalCores"], spec["clockSpeed"], spec["cache"]) == ("96", "2400000000", EPYC["cache"])
    assert "cpu" not in spec
    assert spec["displayName"] == EPYC["product"]


def test_the_collapsed_cpu_pool_is_generic_and_names_no_product() -> None:
    flavors = [
        cpu_flavor("gpustack--amd-25-1-linux-amd64-128c", "amd-25-1", "AMD EPYC 7763", EPYC),
        cpu_flavor("gpustack--intel-6-207-linux-amd64-128c", "intel-6-207", "INTEL XEON 8592+"),
    ]
    spec = enrich(cpu_type(), flavors, aware=False)["spec"]
    assert spec["manufacturer"] == "generic"
    assert "product" not in spec
    assert "displayName" not in spec
    assert "physicalCores" not in spec


def test_a_field_the_pools_flavors_disagree_on_is_left_out() -> None:
    other = h100_flavor("gpustack--intel-6-106--nvidia-h100-linux-amd64-4d", memory="81920Mi")
    flavors = [h100_flavor(), other]
    found = pool_descriptors(flavors, acceleratable=True, aware=False)
    assert "memory" not in found
    assert found["product"] == "NVIDIA-H100-80GB-HBM3"


def test_cpu_details_are_agreed_field_by_field() -> None:
    other = EPYC | {"clockSpeed": "2500000000", "cache": {"l2": "1048576", "l3": "0"}}
    flavors = [h100_flavor(), h100_flavor("x-4d", cpuDetail=json.dumps(other))]
    cpu = pool_descriptors(flavors, acceleratable=True, aware=True)["cpu"]
    assert "clockSpeed" not in cpu
    assert cpu["cache"] == {"l2": "1048576"}
    assert cpu["physicalCores"] == "96"


def test_flavors_being_deleted_of_the_other_kind_or_with_bad_notes_fill_nothing() -> None:
    deleting = h100_flavor(memory="1Mi")
    deleting["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    cpu = cpu_flavor("c", "amd-25-17", "AMD")
    bad = h100_flavor("b", cpuDetail="{not json")
    assert pool_descriptors([deleting, cpu], acceleratable=True, aware=False) == {}
    assert "cpu" not in pool_descriptors([bad], acceleratable=True, aware=True)
    assert pool_descriptors([{"metadata": {"annotations": "junk"}}], acceleratable=True, aware=True) == {}


@pytest.mark.parametrize(
    "own",
    [
        {"memory": "40960Mi"},
        {"product": "Mine", "displayName": "Mine too"},
        {"manufacturer": "acme", "cores": "1"},
        {"cpu": {"physicalCores": "8"}},
    ],
)
def test_a_hand_made_types_own_values_are_never_replaced(own: dict[str, Any]) -> None:
    it = accelerated_type(generalGroup="amd-25-17", **own)
    spec = enrich(it, [h100_flavor()], aware=True)["spec"]
    for key, value in own.items():
        if isinstance(value, dict):
            assert spec[key] == EPYC | value  # the rest is filled around the admin's field
        else:
            assert spec[key] == value


def test_without_flavors_nothing_is_filled_and_the_input_is_not_changed() -> None:
    it = accelerated_type()
    assert enrich(it, [], aware=True) == it
    assert enrich({"spec": None}, [h100_flavor()], aware=False) == {"spec": None}
    enrich(it, [h100_flavor()], aware=False)
    assert "memory" not in it["spec"]


def test_an_update_keeps_the_details_the_stored_type_has_and_the_new_object_omits() -> None:
    stored = enrich(accelerated_type(generalGroup="amd-25-17"), [h100_flavor()], aware=True)
    replaced = accelerated_type(generalGroup="amd-25-17", displayName="renamed")
    kept = carry_over(stored, replaced)["spec"]
    assert (kept["memory"], kept["product"], kept["cpu"], kept["displayName"]) == (
        "81559Mi",
        "NVIDIA-H100-80GB-HBM3",
        EPYC,
        "renamed",
    )
    changed = carry_over(stored, accelerated_type(memory="1Mi"))["spec"]
    assert changed["memory"] == "1Mi"  # a change stays a change (validation refuses it)
    assert carry_over(stored, {"spec": "junk"}) == {"spec": "junk"}


# ---- the card's exact VRAM ---------------------------------------------------------------------------------


def devices(name: str, *groups: tuple[str, str, object]) -> dict[str, Any]:
    """A Devices with (manufacturer, group id, memory MiB) groups."""
    listed = [{"manufacturer": m, "id": i, "name": i, "memory": mib} for m, i, mib in groups]
    return {"metadata": {"name": name}, "spec": {"groups": listed}}


def test_the_memory_is_the_cards_exact_mib_from_its_devices_not_the_rounded_label() -> None:
    a10 = accelerated_type(acceleratorGroup="nvidia-a10")
    note = h100_flavor(memory="22Gi", acceleratorGroup="nvidia-a10", product="NVIDIA-A10")
    reported = [
        devices("a10-0", ("nvidia", "a10", 23028), ("intel", "x", 1)),
        devices("a10-1", ("nvidia", "a10", 23028)),
    ]
    spec = enrich(a10, [note], aware=False, devices=reported)["spec"]
    assert spec["memory"] == "23028Mi"
    card = quantity_to_mib(Quantity.parse(spec["memory"]))
    assert slice_units(None, Quantity(card), card) == 1_600_000  # a whole card is a whole card
    assert enrich(a10, [note], aware=False)["spec"]["memory"] == "22Gi"  # no Devices yet: the note
    assert (
        enrich(a10 | {"spec": a10["spec"] | {"memory": "1Mi"}}, [note], aware=False, devices=reported)[
            "spec"
        ]["memory"]
        == "1Mi"
    )  # an admin's own value stands


def test_devices_disagreeing_or_malformed_give_no_exact_memory() -> None:
    assert (
        card_memory_mib(
            [devices("a", ("nvidia", "a10", 23028)), devices("b", ("nvidia", "a10", 24000))], "nvidia-a10"
        )
        is None
    )
    junk: list[dict[str, Any]] = [
        {"spec": {"groups": ["x", {"manufacturer": "nvidia", "id": "a10", "memory": True}]}},
        {"spec": "x"},
    ]
    assert card_memory_mib(junk, "nvidia-a10") is None
    assert card_memory_mib([devices("a", ("nvidia", "a10", "23028"))], "nvidia-a10") is None


def test_the_devices_of_a_card_type_are_selected_by_its_model_os_and_arch() -> None:
    assert devices_selector(accelerated_type()) == {
        A + H100: "true",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    }
    assert devices_selector(cpu_type()) is None
