"""Kueue's resource configuration: counted resources become their vendor's credits, the rest is dropped."""

from __future__ import annotations

import copy

from gpustack_operator.rules.capacity.kueueconfig import (
    configuration_problems,
    kueue_resources,
    manager_configuration,
)
from gpustack_operator.rules.naming.manufacturers import known_manufacturers


def test_each_vendor_counts_cards_shares_and_slice_units_as_credits_and_drops_the_companions() -> None:
    by_input = {t["input"]: t for t in kueue_resources()["transformations"]}
    assert len(by_input) == len(kueue_resources()["transformations"]), "Kueue rejects a repeated input"
    nvidia = "credits.gpustack.ai/nvidia"
    assert by_input["nvidia.com/gpu"]["outputs"] == {nvidia: "1600000"}
    assert by_input["nvidia.com/gpu.shared"]["outputs"] == {nvidia: "160000"}
    assert by_input["nvidia.com/gpu.sliced.units"]["outputs"] == {nvidia: "1"}
    assert by_input["nvidia.com/gpu.sliced.units"]["multiplyBy"] == "nvidia.com/gpu.sliced", (
        "two slices of 30 units are charged 60 credits, as the admission check counts them"
    )
    assert [t["input"] for t in by_input.values() if "multiplyBy" in t] == [
        t["input"] for t in by_input.values() if t["input"].endswith(".sliced.units")
    ]
    for dropped in (
        "nvidia.com/gpu.sliced",
        "nvidia.com/gpu.sliced.memory-mib",
        "device.gpustack.ai/nvidia.visibility",
    ):
        assert by_input[dropped]["outputs"] == {}
    assert all(t["strategy"] == "Replace" for t in by_input.values())
    assert by_input["huawei.com/npu"]["outputs"] == {"credits.gpustack.ai/ascend": "1600000"}
    outputs = {name for t in by_input.values() for name in t["outputs"]}
    assert outputs == {f"credits.gpustack.ai/{m}" for m in known_manufacturers()}


def test_memory_storage_hugepages_and_pod_count_are_never_quota_but_cpu_is() -> None:
    prefixes = kueue_resources()["excludeResourcePrefixes"]
    for name in ("memory", "ephemeral-storage", "hugepages-2Mi", "pods"):
        assert any(name.startswith(p) for p in prefixes), name
    assert not any("cpu".startswith(p) or "nvidia.com/gpu".startswith(p) for p in prefixes)


def test_the_configuration_we_write_has_no_problems_and_each_missing_part_is_named() -> None:
    ours = manager_configuration(environ={})
    assert configuration_problems(ours, environ={}) == []
    stock = {"apiVersion": ours["apiVersion"], "kind": "Configuration"}
    problems = configuration_problems(stock, environ={})
    assert len(problems) == 3
    assert "batch/job, pod" in problems[0]
    assert "amd.com/gpu, amd.com/gpu.shared, amd.com/gpu.sliced.units and" in problems[1]
    assert "memory" in problems[2]


def test_a_slice_transformation_without_multiply_by_counts_as_a_problem() -> None:
    config = copy.deepcopy(manager_configuration(environ={}))
    for t in config["resources"]["transformations"]:
        t.pop("multiplyBy", None)
        t["outputs"] = {k: int(v) for k, v in t["outputs"].items()}  # YAML numbers read back as ints
    [problem] = configuration_problems(config, environ={})
    assert problem.startswith("resources.transformations lacks or differs for amd.com/gpu.sliced.units, ")
