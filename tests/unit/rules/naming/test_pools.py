"""Pool schedule labels and the flavor selector that inverts them (§7.7)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpustack_operator.rules.naming.pools import pool_flavor_selector, pool_schedule_labels

ACC = "feature.gpustack.ai/acceleratable"
OS = "kubernetes.io/os"
ARCH = "kubernetes.io/arch"
A = "acceleratable.feature.gpustack.ai/"
G = "general.feature.gpustack.ai/"


@pytest.mark.parametrize(
    ("args", "labels"),
    [
        pytest.param(
            (True, False, "generic", "nvidia-tesla-t4", "linux", "amd64"),
            {ACC: "true", OS: "linux", ARCH: "amd64", f"{A}nvidia-tesla-t4": "true"},
            id="unaware-accelerated",
        ),
        pytest.param(
            (True, True, "amd-epyc-7763", "nvidia-tesla-t4", "linux", "amd64"),
            {
                ACC: "true",
                OS: "linux",
                ARCH: "amd64",
                f"{A}nvidia-tesla-t4": "true",
                f"{G}amd-epyc-7763": "true",
            },
            id="aware-accelerated-adds-cpu-key",
        ),
        pytest.param(
            (False, False, "generic", "", "linux", "arm64"),
            {ACC: "false", OS: "linux", ARCH: "arm64"},
            id="unaware-cpu",
        ),
        pytest.param(
            (False, True, "amd-25-1", "", "linux", "amd64"),
            {ACC: "false", OS: "linux", ARCH: "amd64", f"{G}amd-25-1": "true"},
            id="aware-cpu",
        ),
        pytest.param((False, True, "generic", "", "", ""), {ACC: "false"}, id="aware-generic-and-no-os-arch"),
        pytest.param(
            (True, False, "", "", "linux", "amd64"),
            {ACC: "true", OS: "linux", ARCH: "amd64"},
            id="accelerated-without-group",
        ),
        pytest.param(
            (False, False, "", "nvidia-tesla-t4", "linux", "amd64"),
            {ACC: "false", OS: "linux", ARCH: "amd64"},
            id="cpu-pool-ignores-accelerator-group",
        ),
    ],
)
def test_pool_schedule_labels(args: tuple[bool, bool, str, str, str, str], labels: dict[str, str]) -> None:
    assert pool_schedule_labels(*args) == labels


@pytest.mark.parametrize(
    ("labels", "selector"),
    [
        pytest.param(
            {
                ACC: "true",
                OS: "linux",
                ARCH: "amd64",
                f"{A}nvidia-tesla-t4": "true",
                "resource.gpustack.ai/type": "instancetypes",
                f"{A}nvidia-tesla-t4.count": "2",
            },
            {ACC: "true", OS: "linux", ARCH: "amd64", f"{A}nvidia-tesla-t4": "true"},
            id="keeps-discriminators-drops-the-rest",
        ),
        pytest.param({ACC: "false"}, {ACC: "false"}, id="boolean-alone-is-a-discriminator"),
        pytest.param(
            {f"{G}amd-25-1": "true", OS: "linux"},
            {f"{G}amd-25-1": "true", OS: "linux"},
            id="feature-key-alone-is-a-discriminator",
        ),
        pytest.param({OS: "linux", ARCH: "amd64"}, None, id="os-arch-only-selects-nothing"),
        pytest.param(
            {ACC: "maybe", f"{A}nvidia": "false"}, None, id="non-boolean-values-are-not-discriminators"
        ),
        pytest.param({}, None, id="empty"),
    ],
)
def test_pool_flavor_selector(labels: dict[str, str], selector: dict[str, str] | None) -> None:
    assert pool_flavor_selector(labels) == selector


@given(
    st.booleans(),
    st.booleans(),
    st.sampled_from(["", "generic", "amd-25-1", "intel-xeon-platinum-8358"]),
    st.sampled_from(["", "nvidia-tesla-t4", "amd-instinct-mi300x"]),
    st.sampled_from(["", "linux"]),
    st.sampled_from(["", "amd64", "arm64"]),
)
def test_selector_inverts_schedule_labels(
    acceleratable: bool, aware: bool, general: str, accel: str, os: str, arch: str
) -> None:
    labels = pool_schedule_labels(acceleratable, aware, general, accel, os, arch)
    assert pool_flavor_selector({**labels, "resource.gpustack.ai/type": "instancetypes"}) == labels
