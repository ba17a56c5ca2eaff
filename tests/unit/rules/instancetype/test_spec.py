"""The InstanceType admission rules (contract §4.1 defaulting, §4.2 create checks and update freeze).

What an admin sees: the labels a type is stamped with (its pool and its queue entrance), and the exact
`kubectl` refusal text (field path and message) for an incomplete or malformed type or a frozen field.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpustack_operator.api.field import FieldError
from gpustack_operator.api.json import JSONObj
from gpustack_operator.rules.instancetype import spec as instancetype
from gpustack_operator.rules.naming.queues import format_local_queue_name
from tests.unit.jsonish import json_values

ENTRANCE = "schedule.gpustack.ai/queue-entrance"
ACC = "feature.gpustack.ai/acceleratable"
OS, ARCH = "kubernetes.io/os", "kubernetes.io/arch"
G, A = "general.feature.gpustack.ai/", "acceleratable.feature.gpustack.ai/"
WHOLE_CORES = "must be a positive integer number of cores, without a unit"


def a_type(
    name: str = "gpustack--nvidia-tesla-t4-linux-amd64", labels: dict[str, str] | None = None, **spec: Any
) -> JSONObj:
    """A complete accelerated type; ``spec`` overrides (a value of None removes the field)."""
    body: JSONObj = {
        "acceleratable": True,
        "acceleratorGroup": "nvidia-tesla-t4",
        "os": "linux",
        "arch": "amd64",
        "unitResources": {"cpu": "4", "ram": "16Gi"},
        "localStorage": "100Gi",
    }
    body.update(spec)
    body = {k: v for k, v in body.items() if v is not None}
    metadata: JSONObj = {"name": name}
    if labels is not None:
        metadata["labels"] = labels
    return {
        "apiVersion": "worker.gpustack.ai/v1alpha1",
        "kind": "InstanceType",
        "metadata": metadata,
        "spec": body,
    }


def a_cpu_type(**spec: Any) -> JSONObj:
    base: JSONObj = {
        "acceleratable": False,
        "acceleratorGroup": None,
        "generalGroup": "amd-epyc-7763",
        "unitResources": {"cpu": "1", "ram": "2Gi"},
        **spec,
    }
    return a_type("gpustack--amd-epyc-7763-linux-amd64", **base)


def messages(errors: list[FieldError]) -> list[str]:
    return [str(e) for e in errors]


# --- §4.1 defaulting ------------------------------------------------------------------------------


def test_an_empty_general_group_defaults_to_generic() -> None:
    assert instancetype.default(a_type(generalGroup=""), aware=False)["spec"]["generalGroup"] == "generic"
    assert instancetype.default(a_type(), aware=True)["spec"]["generalGroup"] == "generic"


def test_a_set_general_group_is_kept() -> None:
    assert instancetype.default(a_cpu_type(), aware=True)["spec"]["generalGroup"] == "amd-epyc-7763"


@pytest.mark.parametrize(
    ("obj", "aware", "expected"),
    [
        pytest.param(
            a_type(),
            False,
            {ACC: "true", OS: "linux", ARCH: "amd64", f"{A}nvidia-tesla-t4": "true"},
            id="an accelerated pool is selected by its accelerator key",
        ),
        pytest.param(
            a_type(generalGroup="amd-epyc-7763"),
            True,
            {
                ACC: "true",
                OS: "linux",
                ARCH: "amd64",
                f"{A}nvidia-tesla-t4": "true",
                f"{G}amd-epyc-7763": "true",
            },
            id="with awareness on, an accelerated pool also keys on its CPU",
        ),
        pytest.param(
            a_cpu_type(),
            False,
            {ACC: "false", OS: "linux", ARCH: "amd64"},
            id="without awareness, a CPU pool keys on nothing but the boolean",
        ),
        pytest.param(
            a_cpu_type(),
            True,
            {ACC: "false", OS: "linux", ARCH: "amd64", f"{G}amd-epyc-7763": "true"},
            id="with awareness on, a CPU pool keys on its CPU",
        ),
    ],
)
def test_the_pool_schedule_labels_are_stamped(obj: JSONObj, aware: bool, expected: dict[str, str]) -> None:
    labels = instancetype.default(obj, aware=aware)["metadata"]["labels"]
    assert labels == {**expected, ENTRANCE: format_local_queue_name(obj["metadata"]["name"])}


def test_the_queue_entrance_label_names_the_local_queue_of_the_type() -> None:
    labels = instancetype.default(a_type("gpustack--generic-linux-amd64"), aware=False)["metadata"]["labels"]
    assert labels[ENTRANCE] == "gpustack-fnv64-3b93966fd73eb9ec"


def test_stale_feature_labels_are_removed_and_other_labels_kept() -> None:
    stale = {
        f"{A}nvidia-a100": "true",
        f"{G}intel-6-143": "true",
        "team": "ml",
        ACC: "false",
        ENTRANCE: "gpustack-fnv64-0000000000000000",
    }
    labels = instancetype.default(a_type(labels=stale), aware=False)["metadata"]["labels"]
    assert f"{A}nvidia-a100" not in labels
    assert f"{G}intel-6-143" not in labels
    assert labels["team"] == "ml"
    assert labels[ACC] == "true"
    assert labels[ENTRANCE] == format_local_queue_name("gpustack--nvidia-tesla-t4-linux-amd64")


def test_turning_awareness_off_drops_the_cpu_key_on_the_next_write() -> None:
    aware = instancetype.default(a_cpu_type(), aware=True)
    assert f"{G}amd-epyc-7763" in aware["metadata"]["labels"]
    unaware = instancetype.default(aware, aware=False)
    assert f"{G}amd-epyc-7763" not in unaware["metadata"]["labels"]


def test_an_accelerated_type_without_a_group_gets_only_the_general_group_default() -> None:
    obj = a_type(acceleratorGroup="", generalGroup="", labels={"team": "ml"})
    out = instancetype.default(obj, aware=False)
    assert out["spec"]["generalGroup"] == "generic"
    assert out["metadata"]["labels"] == {"team": "ml"}


def test_defaulting_leaves_its_input_alone() -> None:
    obj = a_type(generalGroup="", labels={f"{A}old": "true"})
    before = copy.deepcopy(obj)
    instancetype.default(obj, aware=True)
    assert obj == before


def test_the_entrance_is_not_stamped_while_the_name_is_unknown() -> None:
    obj = a_type()
    obj["metadata"] = {"generateName": "pool-"}
    assert ENTRANCE not in instancetype.default(obj, aware=False)["metadata"]["labels"]


def test_a_name_that_is_not_utf8_gets_no_entrance() -> None:
    labels = instancetype.default(a_type("pool-\ud800"), aware=False)["metadata"]["labels"]
    assert ENTRANCE not in labels
    assert labels[ACC] == "true"


# --- §4.2 create ----------------------------------------------------------------------------------


def test_a_complete_type_is_accepted() -> None:
    assert instancetype.validate_create(a_type()) == []
    assert instancetype.validate_create(a_cpu_type()) == []


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(
            a_type(acceleratorGroup=""),
            "spec.acceleratorGroup: Required value: must be specified when acceleratable is true",
            id="an accelerated type needs its accelerator group",
        ),
        pytest.param(a_type(os=""), "spec.os: Required value: must be specified", id="os is required"),
        pytest.param(
            a_type(arch=None), "spec.arch: Required value: must be specified", id="arch is required"
        ),
        pytest.param(
            a_type(unitResources={"ram": "16Gi"}),
            "spec.unitResources.cpu: Required value: must be specified",
            id="the unit cpu is required",
        ),
        pytest.param(
            a_type(unitResources=None),
            "spec.unitResources.cpu: Required value: must be specified",
            id="a missing unit is refused field by field",
        ),
        pytest.param(
            a_type(localStorage=""),
            "spec.localStorage: Required value: must be specified",
            id="local storage is required",
        ),
        pytest.param(
            a_type(unitResources={"cpu": "500m", "ram": "16Gi"}),
            f'spec.unitResources.cpu: Invalid value: "500m": {WHOLE_CORES}',
            id="an accelerated unit cpu has no suffix",
        ),
        pytest.param(
            a_type(unitResources={"cpu": "0", "ram": "16Gi"}),
            f'spec.unitResources.cpu: Invalid value: "0": {WHOLE_CORES}',
            id="an accelerated unit cpu is positive",
        ),
        pytest.param(
            a_type(unitResources={"cpu": "2147483648", "ram": "16Gi"}),
            f'spec.unitResources.cpu: Invalid value: "2147483648": {WHOLE_CORES}',
            id="an accelerated unit cpu fits int32",
        ),
        pytest.param(
            a_cpu_type(unitResources={"cpu": "2", "ram": "2Gi"}),
            'spec.unitResources.cpu: Invalid value: "2": must be 1 for a type without accelerators',
            id="a CPU-only unit is exactly one core",
        ),
        pytest.param(
            a_type(unitResources={"cpu": "4", "ram": "16gi"}),
            'spec.unitResources.ram: Invalid value: "16gi": must be a positive whole number of Gi, e.g. 16Gi',
            id="the Gi suffix is case-sensitive",
        ),
        pytest.param(
            a_type(unitResources={"cpu": "4", "ram": "16G"}),
            'spec.unitResources.ram: Invalid value: "16G": must be a positive whole number of Gi, e.g. 16Gi',
            id="unit ram is in Gi only",
        ),
        pytest.param(
            a_type(unitResources={"cpu": "4", "ram": "0Gi"}),
            'spec.unitResources.ram: Invalid value: "0Gi": must be a positive whole number of Gi, e.g. 16Gi',
            id="unit ram is positive",
        ),
        pytest.param(
            a_type(localStorage="1.5Gi"),
            'spec.localStorage: Invalid value: "1.5Gi": must be a positive whole number of Gi, e.g. 16Gi',
            id="local storage is whole Gi",
        ),
        pytest.param(
            a_type(os=7),
            "spec.os: Invalid value: 7: must be a string",
            id="a number where a string belongs is refused",
        ),
    ],
)
def test_an_incomplete_or_malformed_type_is_refused(obj: JSONObj, expected: str) -> None:
    assert expected in messages(instancetype.validate_create(obj))


def test_a_cpu_only_type_needs_no_accelerator_group() -> None:
    assert instancetype.validate_create(a_cpu_type(acceleratorGroup="")) == []


def test_an_accelerated_unit_cpu_may_be_any_positive_integer() -> None:
    assert instancetype.validate_create(a_type(unitResources={"cpu": "12", "ram": "96Gi"})) == []


def test_an_empty_spec_is_refused_on_every_required_field() -> None:
    paths = [e.path for e in instancetype.validate_create({"spec": {"acceleratable": True}})]
    assert paths == [
        "spec.acceleratorGroup",
        "spec.os",
        "spec.arch",
        "spec.unitResources.cpu",
        "spec.unitResources.ram",
        "spec.localStorage",
    ]


def test_a_type_without_a_spec_is_refused() -> None:
    assert messages(instancetype.validate_create({"metadata": {"name": "x"}})) == [
        "spec: Required value: must be specified"
    ]


# --- §4.2 update ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"displayName": "Tesla T4"}, id="rename"),
        pytest.param({"description": "the old cards"}, id="describe"),
        pytest.param({"inactive": True}, id="take out of service"),
    ],
)
def test_display_name_description_and_inactive_may_change(change: JSONObj) -> None:
    assert instancetype.validate_update(a_type(), a_type(**change)) == []


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"unitResources": {"cpu": "8", "ram": "16Gi"}}, id="resize the unit"),
        pytest.param({"localStorage": "200Gi"}, id="more local storage"),
        pytest.param({"acceleratorGroup": "nvidia-a100"}, id="re-point the pool"),
        pytest.param({"acceleratable": False}, id="flip acceleratable"),
        pytest.param({"generalGroup": "intel-6-143"}, id="change the CPU group"),
        pytest.param({"memory": "16Gi"}, id="add a descriptor"),
    ],
)
def test_the_rest_of_the_spec_is_frozen(change: JSONObj) -> None:
    errors = instancetype.validate_update(a_type(), a_type(**change))
    assert messages(errors) == ["spec: Forbidden: is immutable except displayName, description and inactive"]


def test_create_checks_are_not_rerun_on_update() -> None:
    legacy = a_type(unitResources={"cpu": "500m", "ram": "16G"})
    assert instancetype.validate_create(legacy) != []
    assert (
        instancetype.validate_update(
            legacy, a_type(unitResources={"cpu": "500m", "ram": "16G"}, inactive=True)
        )
        == []
    )


def test_an_omitted_field_equals_its_empty_value() -> None:
    assert instancetype.validate_update(a_type(manufacturer=""), a_type()) == []


# --- untrusted input ------------------------------------------------------------------------------

spec_keys = st.sampled_from(
    [
        "acceleratable",
        "acceleratorGroup",
        "generalGroup",
        "os",
        "arch",
        "unitResources",
        "localStorage",
        "displayName",
    ]
)
specs = st.dictionaries(spec_keys, json_values, max_size=8) | json_values
objects = st.fixed_dictionaries(
    {},
    optional={
        "metadata": st.fixed_dictionaries({}, optional={"name": json_values, "labels": json_values})
        | json_values,
        "spec": specs,
    },
)


@settings(max_examples=300, deadline=None)
@given(old=objects, new=objects, aware=st.booleans())
def test_garbage_never_raises(old: JSONObj, new: JSONObj, aware: bool) -> None:
    before = copy.deepcopy(new)
    assert isinstance(instancetype.default(new, aware=aware), dict)
    assert new == before
    for errors in (instancetype.validate_create(new), instancetype.validate_update(old, new)):
        assert isinstance(errors, list)
        assert all(isinstance(e, FieldError) for e in errors)
