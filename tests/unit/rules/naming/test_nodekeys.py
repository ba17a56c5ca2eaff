"""The general (CPU) node key keeps different CPUs in different pools (§7.4)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpustack_operator.rules.naming.nodekeys import extract_general_node_key
from tests.unit.rules.builders import cpu_labels, cpu_name, is_label_key, node

EPYC = "AMD EPYC 7763 64-Core Processor"


@pytest.mark.parametrize(
    ("labels", "annotations", "key"),
    [
        pytest.param(cpu_labels(), {}, "generic", id="no-cpu-info"),
        pytest.param(cpu_labels("AMD", "25", "1"), {}, "amd-25-1", id="family-and-id"),
        pytest.param(cpu_labels("AMD", "25", "1"), cpu_name(EPYC), "amd-epyc-7763", id="cpu-name-wins"),
        pytest.param(
            cpu_labels("AMD", "25", "1"), cpu_name("@cpu.model.name"), "amd-25-1", id="unresolved-name"
        ),
        pytest.param(
            cpu_labels("Intel"),
            cpu_name("Intel(R) Xeon(R) Platinum 8358 CPU @ 2.60GHz"),
            "intel-xeon-platinum-8358",
            id="intel-xeon",
        ),
        pytest.param(
            cpu_labels("VendorUnknown"), cpu_name("Kunpeng 920"), "generic-kunpeng-920", id="unknown-vendor"
        ),
        pytest.param(cpu_labels("AMD", model="1"), {}, "amd", id="id-without-family"),
        pytest.param(cpu_labels("AMD", family="25"), {}, "amd", id="family-without-id"),
        pytest.param(cpu_labels("AMD"), cpu_name("(TM)"), "amd", id="name-folds-to-nothing"),
        pytest.param(cpu_labels("Intel", "6", "143"), {}, "intel-6-143", id="intel-family-and-id"),
        pytest.param(cpu_labels("AMD", "25", "1"), cpu_name("(TM)"), "amd-25-1", id="empty-name-falls-back"),
    ],
)
def test_extract_general_node_key(labels: dict[str, str], annotations: dict[str, str], key: str) -> None:
    assert extract_general_node_key(node(labels, annotations)) == key


def test_long_cpu_name_leaves_room_for_capacity_suffix() -> None:
    key = extract_general_node_key(node(cpu_labels("AMD"), cpu_name("epyc-9654-96-core-processor-" * 4)))
    assert key.startswith("amd-")
    assert len(key + ".capacity") <= 63


def test_node_without_metadata_is_generic() -> None:
    assert extract_general_node_key({}) == "generic"


@given(
    st.sampled_from(["", "AMD", "Intel", "VendorUnknown", "ARM", "HiSilicon", "Hygon"]),
    st.text(),
    st.from_regex(r"[0-9]{0,3}", fullmatch=True),
    st.from_regex(r"[0-9]{0,3}", fullmatch=True),
)
def test_general_key_labels_are_valid(vendor: str, name: str, family: str, model: str) -> None:
    key = extract_general_node_key(node(cpu_labels(vendor, family, model), cpu_name(name)))
    for suffix in ("", ".count", ".capacity"):
        assert is_label_key(f"general.feature.gpustack.ai/{key}{suffix}"), key + suffix
