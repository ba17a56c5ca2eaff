"""Accelerator group IDs and keys name a card model everywhere it is scheduled (§7.2)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from gpustack_operator.api.keys import CAPACITY_SUFFIX, PRODUCT_SUFFIX
from gpustack_operator.rules.naming.groups import (
    accelerator_key,
    construct_group_id,
    extract_acceleratable_keys,
    extract_acceleratable_node_keys,
    format_group_memory,
)
from gpustack_operator.rules.naming.manufacturers import known_manufacturers
from tests.unit.rules.builders import is_label_key, node

WITH_MEMORY = {"GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY": "true"}


@pytest.mark.parametrize(
    ("mib", "word"),
    [
        pytest.param(0, "0g", id="unknown"),
        pytest.param(1, "1g", id="tiny-is-1g"),
        pytest.param(1024, "1g", id="one-gibi"),
        pytest.param(1025, "1g", id="just-over-one-gibi"),
        pytest.param(44280, "43g", id="44280-rounds-down"),
        pytest.param(43693, "43g", id="43693-rounds-up"),
        pytest.param(15360, "15g", id="t4"),
        pytest.param(143771, "140g", id="h200"),
    ],
)
def test_format_group_memory(mib: int, word: str) -> None:
    assert format_group_memory(mib) == word


@pytest.mark.parametrize(
    ("manufacturer", "name", "mib", "environ", "group_id"),
    [
        pytest.param("nvidia", "Tesla T4", 15360, {}, "tesla-t4", id="nvidia-t4"),
        pytest.param(
            "nvidia", "NVIDIA H100 80GB HBM3", 81559, {}, "h100-80gb-hbm3", id="vendor-word-dropped"
        ),
        pytest.param("amd", "AMD Instinct MI300X", 196608, {}, "instinct-mi300x", id="amd"),
        pytest.param("nvidia", "Tesla T4", 15360, WITH_MEMORY, "tesla-t4-15g", id="with-memory"),
        pytest.param("nvidia", "NVIDIA H200", 143771, WITH_MEMORY, "h200-140g", id="with-memory-rounded"),
        pytest.param(
            "nvidia",
            "Tesla T4",
            15360,
            {"GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY": "no"},
            "tesla-t4",
            id="memory-switch-off",
        ),
    ],
)
def test_construct_group_id(
    manufacturer: str, name: str, mib: int, environ: dict[str, str], group_id: str
) -> None:
    assert construct_group_id(manufacturer, name, mib, environ) == group_id


def test_accelerator_key() -> None:
    assert accelerator_key("nvidia", "tesla-t4") == "nvidia-tesla-t4"


@given(
    st.sampled_from(known_manufacturers()),
    st.text(min_size=1),
    st.integers(min_value=0, max_value=2**24),
    st.sampled_from([{}, WITH_MEMORY]),
)
def test_every_label_of_an_accelerator_key_is_a_valid_label_key(
    manufacturer: str, name: str, mib: int, environ: dict[str, str]
) -> None:
    group_id = construct_group_id(manufacturer, name, mib, environ)
    assume(group_id)
    key = accelerator_key(manufacturer, group_id)
    for suffix in ("", CAPACITY_SUFFIX, PRODUCT_SUFFIX, ".count"):
        assert is_label_key(f"acceleratable.feature.gpustack.ai/{key}{suffix}"), key + suffix


NVIDIA_LABELS = {
    "feature.gpustack.ai/acceleratable": "true",
    "acceleratable.feature.gpustack.ai/nvidia": "true",
    "acceleratable.feature.gpustack.ai/nvidia.driver-version": "550.54.15",
    "acceleratable.feature.gpustack.ai/nvidia-tesla-t4": "true",
    "acceleratable.feature.gpustack.ai/nvidia-tesla-t4.count": "2",
    "acceleratable.feature.gpustack.ai/nvidia-tesla-t4.product": "Tesla-T4",
}


@pytest.mark.parametrize(
    ("labels", "keys"),
    [
        pytest.param(NVIDIA_LABELS, ["nvidia-tesla-t4"], id="nvidia-node"),
        pytest.param(
            {"acceleratable.feature.gpustack.ai/unknown-tesla-t4": "true"}, [], id="unknown-manufacturer"
        ),
        pytest.param({"feature.gpustack.ai/nvidia-tesla-t4": "true"}, [], id="old-prefix"),
        pytest.param(
            {"acceleratable.feature.gpustack.ai/nvidia-a10.5g": "true"}, ["nvidia-a10.5g"], id="dot-in-id"
        ),
        pytest.param({"acceleratable.feature.gpustack.ai/nvidia-h100": "false"}, [], id="not-true"),
        pytest.param({}, [], id="no-labels"),
        pytest.param({"foo": "bar"}, [], id="unrelated-label"),
    ],
)
def test_extract_acceleratable_keys(labels: dict[str, str], keys: list[str]) -> None:
    assert extract_acceleratable_keys(labels) == keys
    assert extract_acceleratable_node_keys(node(labels)) == keys


def test_extract_from_a_node_without_metadata() -> None:
    assert extract_acceleratable_node_keys({}) == []
