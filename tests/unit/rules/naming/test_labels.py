"""Node labels from the device manager (cards) and the worker (managed mark, CPU) (§5.3, §7.5)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpustack_operator.api.types.devices import DevicesGroup
from gpustack_operator.rules.naming.labels import (
    construct_acceleratable_node_labels,
    construct_node_capacity_labels,
)
from gpustack_operator.rules.naming.manufacturers import known_manufacturers
from tests.unit.rules.builders import (
    accelerators,
    cpu_labels,
    cpu_name,
    is_label_key,
    is_label_value,
    node,
    tesla_t4_group,
)

A = "acceleratable.feature.gpustack.ai/"
G = "general.feature.gpustack.ai/"
MANAGED = "gpustack.ai/managed"
CPU16 = {"cpu": "16"}


def test_device_manager_labels_describe_each_card_model() -> None:
    assert construct_acceleratable_node_labels([tesla_t4_group(cards=2)]) == {
        "feature.gpustack.ai/acceleratable": "true",
        f"{A}nvidia": "true",
        f"{A}nvidia.driver-version": "550.54.15",
        f"{A}nvidia.runtime-version": "12.4",
        f"{A}nvidia-tesla-t4": "true",
        f"{A}nvidia-tesla-t4.product": "Tesla-T4",
        f"{A}nvidia-tesla-t4.memory": "15Gi",
        f"{A}nvidia-tesla-t4.cores": "0",
        f"{A}nvidia-tesla-t4.count": "2",
        f"{A}nvidia-tesla-t4.family": "Turing",
        f"{A}nvidia-tesla-t4.comcap": "7.5",
    }


def test_optional_device_labels_are_omitted_and_cores_default_to_zero() -> None:
    group: DevicesGroup = {
        "id": "mi300x",
        "manufacturer": "amd",
        "name": "AMD Instinct MI300X",
        "memory": 196608,
        "accelerators": accelerators(1),
    }
    assert construct_acceleratable_node_labels([group]) == {
        "feature.gpustack.ai/acceleratable": "true",
        f"{A}amd": "true",
        f"{A}amd-mi300x": "true",
        f"{A}amd-mi300x.product": "AMD-Instinct-MI300X",
        f"{A}amd-mi300x.memory": "192Gi",
        f"{A}amd-mi300x.cores": "0",
        f"{A}amd-mi300x.count": "1",
    }


@pytest.mark.parametrize(
    ("mib", "memory"),
    [
        pytest.param(15360, "15Gi", id="15Gi"),
        pytest.param(81920, "80Gi", id="80Gi"),
        pytest.param(196608, "192Gi", id="192Gi"),
    ],
)
def test_device_memory_label(mib: int, memory: str) -> None:
    group = tesla_t4_group()
    group["memory"] = mib
    assert construct_acceleratable_node_labels([group])[f"{A}nvidia-tesla-t4.memory"] == memory


def test_groups_without_cards_give_no_labels() -> None:
    assert construct_acceleratable_node_labels([tesla_t4_group(cards=0)]) == {}
    assert construct_acceleratable_node_labels([]) == {}


def test_two_groups_with_one_key_add_up_their_cards() -> None:
    labels = construct_acceleratable_node_labels([tesla_t4_group(cards=2), tesla_t4_group(cards=3)])
    assert labels[f"{A}nvidia-tesla-t4.count"] == "5"


@given(
    st.sampled_from(known_manufacturers()),
    st.from_regex(r"[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?", fullmatch=True),
    st.text(),
    st.text(),
    st.integers(min_value=0, max_value=2**22),
)
def test_device_labels_are_valid_whatever_the_hardware_reports(
    manufacturer: str, group_id: str, name: str, version: str, mib: int
) -> None:
    group: DevicesGroup = {
        "id": group_id,
        "manufacturer": manufacturer,
        "name": name,
        "memory": mib,
        "driverVersion": version,
        "family": version,
        "accelerators": accelerators(1),
    }
    for key, value in construct_acceleratable_node_labels([group]).items():
        assert is_label_key(key), key
        assert is_label_value(value), (key, value)


@pytest.mark.parametrize(
    ("labels", "annotations", "want"),
    [
        pytest.param(
            cpu_labels("AMD", "25", "1"),
            {},
            {MANAGED: "true", f"{G}amd": "true", f"{G}amd-25-1": "true", f"{G}amd-25-1.count": "16"},
            id="amd-family-and-id",
        ),
        pytest.param(
            cpu_labels(),
            {},
            {MANAGED: "true", f"{G}generic": "true", f"{G}generic.count": "16"},
            id="no-cpu-info-is-generic",
        ),
        pytest.param(
            cpu_labels("Intel", "6", "143"),
            {},
            {MANAGED: "true", f"{G}intel": "true", f"{G}intel-6-143": "true", f"{G}intel-6-143.count": "16"},
            id="intel-family-and-id",
        ),
        pytest.param(
            cpu_labels("AMD", "25", "1"),
            cpu_name("AMD EPYC 7763 64-Core Processor"),
            {
                MANAGED: "true",
                f"{G}amd": "true",
                f"{G}amd-epyc-7763": "true",
                f"{G}amd-epyc-7763.count": "16",
            },
            id="cpu-name",
        ),
        pytest.param(
            {**cpu_labels("AMD", "25", "1"), f"{A}nvidia-tesla-t4": "true", f"{A}nvidia-tesla-t4.count": "2"},
            {},
            {MANAGED: "true", f"{G}amd": "true", f"{G}amd-25-1": "true", f"{G}amd-25-1.count": "16"},
            id="device-labels-present-cpu-labels-only",
        ),
        pytest.param(
            {**cpu_labels("AMD", "25", "1"), MANAGED: "false"},
            {},
            {MANAGED: "false", f"{G}amd": "true", f"{G}amd-25-1": "true", f"{G}amd-25-1.count": "16"},
            id="admin-false-kept",
        ),
    ],
)
def test_construct_node_capacity_labels(
    labels: dict[str, str], annotations: dict[str, str], want: dict[str, str]
) -> None:
    assert construct_node_capacity_labels(node(labels, annotations, CPU16)) == want


@pytest.mark.parametrize(
    ("existing", "managed"),
    [
        pytest.param(None, None, id="no-label-stays-unlabelled"),
        pytest.param("true", "true", id="admin-true-kept"),
        pytest.param("false", "false", id="admin-false-kept"),
        pytest.param("maybe", None, id="junk-value-ignored"),
    ],
)
def test_manual_mode_honours_only_an_admins_mark(existing: str | None, managed: str | None) -> None:
    labels = cpu_labels("AMD", "25", "1") | ({MANAGED: existing} if existing else {})
    got = construct_node_capacity_labels(node(labels, {}, CPU16), manual=True)
    assert got.get(MANAGED) == managed
    assert got[f"{G}amd-25-1.count"] == "16"


@pytest.mark.parametrize(
    ("capacity", "count"),
    [
        pytest.param({"cpu": "15500m"}, "16", id="fractional-cpu-rounds-up"),
        pytest.param({"cpu": "0"}, None, id="zero-cpu-no-count"),
        pytest.param({}, None, id="no-capacity-no-count"),
        pytest.param({"cpu": "lots"}, None, id="malformed-capacity-no-count"),
    ],
)
def test_cpu_count_label(capacity: dict[str, str], count: str | None) -> None:
    got = construct_node_capacity_labels(node(cpu_labels("AMD", "25", "1"), {}, capacity))
    assert got.get(f"{G}amd-25-1.count") == count


ERA_A_SUFFIXES = (".cpu", ".ram", ".storage", ".z-flavor", ".z-queue", ".z-cohort")


@pytest.mark.parametrize("manual", [pytest.param(False, id="auto"), pytest.param(True, id="manual")])
@pytest.mark.parametrize(
    ("labels", "annotations"),
    [
        pytest.param(cpu_labels("AMD", "25", "1"), {}, id="amd"),
        pytest.param(cpu_labels(), {}, id="generic"),
        pytest.param(
            cpu_labels("Intel", "6", "143"), cpu_name("Intel(R) Xeon(R) Platinum 8358 CPU"), id="xeon"
        ),
    ],
)
def test_capacity_labels_never_carry_era_a_keys(
    labels: dict[str, str], annotations: dict[str, str], manual: bool
) -> None:
    for key in construct_node_capacity_labels(node(labels, annotations, CPU16), manual):
        assert not any(old in key for old in ERA_A_SUFFIXES), key


@given(st.text(), st.sampled_from(["AMD", "Intel", "", "VendorUnknown"]), st.booleans())
def test_capacity_labels_are_valid_for_any_cpu_name(name: str, vendor: str, manual: bool) -> None:
    labels = construct_node_capacity_labels(
        node(cpu_labels(vendor, "25", "1"), cpu_name(name), CPU16), manual
    )
    for key, value in labels.items():
        assert is_label_key(key), key
        assert is_label_value(value), value
