"""The Instance admission rules (contract §4.3): resources folded from the type's unit, and the checks.

What a user sees: the resources their stored Instance ends up with (cards, CPU, RAM, local storage, the
sliced percentages) and the exact `kubectl` refusal text for a request that does not fit its type, a
reserved namespace, a bad volume, or an edit to a running instance.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpustack_operator.api.field import FieldError
from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.quantity import string_percent_multiply
from gpustack_operator.rules.instance import spec as instance
from tests.unit.jsonish import fields, json_values

SYSTEM = "gpustack-system"
MEM, CORES = "acceleratorSlicedMemoryPercentage", "acceleratorSlicedCoresPercentage"


def a_gpu_type(
    *, sliceable: bool = False, once_max: str | None = "2", local_storage: str = "100Gi"
) -> JSONObj:
    """An accelerated type: 4 cores and 16Gi per card, two free cards on one node at most."""
    status: JSONObj = {"phase": "Active"}
    if once_max is not None:
        status["accelerator"] = {"onceMaxRequest": once_max, "remaining": "4", "capacity": "4"}
    if sliceable:
        status["acceleratorSliced"] = {"onceMaxRequest": "100", "remaining": "400", "capacity": "400"}
    return {
        "metadata": {"name": "t4"},
        "spec": {
            "acceleratable": True,
            "acceleratorGroup": "nvidia-tesla-t4",
            "os": "linux",
            "arch": "amd64",
            "unitResources": {"cpu": "4", "ram": "16Gi"},
            "localStorage": local_storage,
        },
        "status": status,
    }


def a_cpu_type() -> JSONObj:
    """A CPU-only type: 2Gi per core, 8 cores on one node at most, 10Gi of local storage."""
    return {
        "metadata": {"name": "cpu"},
        "spec": {
            "acceleratable": False,
            "os": "linux",
            "arch": "amd64",
            "unitResources": {"cpu": "1", "ram": "2Gi"},
            "localStorage": "10Gi",
        },
        "status": {"phase": "Active", "cpu": {"onceMaxRequest": "8", "remaining": "16", "capacity": "16"}},
    }


def an_instance(
    resources: JSONObj | None = None,
    *,
    namespace: str = "team-a",
    stop: bool = False,
    phase: str | None = None,
    **spec: Any,
) -> JSONObj:
    body: JSONObj = {"type": "t4", "image": "ubuntu:24.04", "volume": {"ephemeral": {"capacity": "50Gi"}}}
    if resources is not None:
        body["resources"] = resources
    if stop:
        body["stop"] = True
    body.update(spec)
    obj: JSONObj = {"metadata": {"name": "box", "namespace": namespace}, "spec": body}
    if phase is not None:
        obj["status"] = {"phase": phase}
    return obj


def defaulted(obj: JSONObj, instance_type: JSONObj | None, *, overcommit: bool = False) -> JSONObj:
    result: JSONObj = instance.default(obj, instance_type, overcommit=overcommit)["spec"]["resources"]
    return result


def messages(errors: list[FieldError]) -> list[str]:
    return [str(e) for e in errors]


def create_errors(obj: JSONObj, instance_type: JSONObj | None) -> list[str]:
    return messages(instance.validate_create(obj, instance_type, system_namespace=SYSTEM))


# --- StringPercentMultiply -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("quantity", "percent", "expected"),
    [
        pytest.param("4", 25, "1", id="a quarter of four cores is one"),
        pytest.param("4", 30, "1200m", id="a fraction of a core is shown in millicores"),
        pytest.param("1", 33, "330m", id="a third of a core"),
        pytest.param("16Gi", 25, "4Gi", id="binary stays binary"),
        pytest.param("16Gi", 30, "5033165Ki", id="a fraction of a Ki rounds up to a whole Ki"),
        pytest.param("1Ki", 1, "1Ki", id="never rounds a positive share down to zero"),
        pytest.param("16G", 33, "5280M", id="decimal SI stays decimal"),
        pytest.param("4", 100, "4", id="all of it"),
        pytest.param("4", 0, "0", id="none of it"),
    ],
)
def test_string_percent_multiply(quantity: str, percent: int, expected: str) -> None:
    assert string_percent_multiply(quantity, percent) == expected


# --- default ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "instance_type"),
    [
        pytest.param(an_instance(), a_gpu_type(), id="a running instance"),
        pytest.param(an_instance(stop=True), a_gpu_type(), id="a stopped instance"),
        pytest.param(an_instance(type=""), None, id="an instance without a type"),
    ],
)
def test_pull_policy_mount_and_resources_are_always_defaulted(
    obj: JSONObj, instance_type: JSONObj | None
) -> None:
    spec = instance.default(obj, instance_type, overcommit=False)["spec"]
    assert spec["imagePullPolicy"] == "IfNotPresent"
    assert spec["volumeMount"] == "/workspace"
    assert isinstance(spec["resources"], dict)


def test_set_pull_policy_and_mount_are_kept() -> None:
    spec = instance.default(
        an_instance(imagePullPolicy="Always", volumeMount="/data"), None, overcommit=False
    )["spec"]
    assert (spec["imagePullPolicy"], spec["volumeMount"]) == ("Always", "/data")


@pytest.mark.parametrize(
    ("obj", "instance_type"),
    [
        pytest.param(an_instance(stop=True), a_gpu_type(), id="stopped"),
        pytest.param(an_instance(), None, id="its type is unknown"),
        pytest.param(an_instance(type=""), a_gpu_type(), id="it names no type"),
    ],
)
def test_resources_are_not_folded_when(obj: JSONObj, instance_type: JSONObj | None) -> None:
    assert defaulted(obj, instance_type) == {}


@pytest.mark.parametrize(
    ("resources", "overcommit", "expected"),
    [
        pytest.param(
            None,
            False,
            {"accelerator": "1", "cpu": "4", "ram": "16Gi", "localStorage": "15Gi"},
            id="one card and its unit by default",
        ),
        pytest.param(
            {"accelerator": "2"},
            False,
            {"accelerator": "2", "cpu": "8", "ram": "32Gi", "localStorage": "15Gi"},
            id="two cards take two units",
        ),
        pytest.param(
            {"accelerator": "2", "cpu": "3", "ram": "1Gi", "localStorage": "40Gi"},
            False,
            {"accelerator": "2", "cpu": "3", "ram": "1Gi", "localStorage": "40Gi"},
            id="without overcommit, what the user set is kept",
        ),
        pytest.param(
            {"accelerator": "2", "cpu": "3", "ram": "1Gi"},
            True,
            {"accelerator": "2", "cpu": "8", "ram": "32Gi", "localStorage": "15Gi"},
            id="with overcommit, cpu and ram always follow the unit",
        ),
        pytest.param(
            {"accelerator": "0"},
            False,
            {"accelerator": "0", "cpu": "4", "ram": "16Gi", "localStorage": "15Gi"},
            id="zero cards still take one unit",
        ),
        pytest.param(
            {"accelerator": 2, "cpu": 0},
            False,
            {"accelerator": 2, "cpu": "8", "ram": "32Gi", "localStorage": "15Gi"},
            id="numbers are quantities too",
        ),
    ],
)
def test_whole_cards_fold_the_unit_per_card(
    resources: JSONObj | None, overcommit: bool, expected: JSONObj
) -> None:
    assert defaulted(an_instance(resources), a_gpu_type(), overcommit=overcommit) == expected


@pytest.mark.parametrize(
    ("resources", "overcommit", "expected"),
    [
        pytest.param(
            {MEM: 25},
            False,
            {MEM: 25, CORES: 25, "accelerator": "1", "cpu": "1", "ram": "4Gi", "localStorage": "15Gi"},
            id="a memory share copies to cores and takes that share of the unit",
        ),
        pytest.param(
            {CORES: 50},
            False,
            {CORES: 50, MEM: 50, "accelerator": "1", "cpu": "2", "ram": "8Gi", "localStorage": "15Gi"},
            id="a cores share copies to memory",
        ),
        pytest.param(
            {MEM: 30, CORES: 60, "accelerator": "0"},
            False,
            {
                MEM: 30,
                CORES: 60,
                "accelerator": "1",
                "cpu": "1200m",
                "ram": "5033165Ki",
                "localStorage": "15Gi",
            },
            id="the memory share sizes cpu and ram, and zero cards become one",
        ),
        pytest.param(
            {MEM: 25, "cpu": "3"},
            False,
            {MEM: 25, CORES: 25, "accelerator": "1", "cpu": "3", "ram": "4Gi", "localStorage": "15Gi"},
            id="without overcommit a set cpu is kept",
        ),
        pytest.param(
            {MEM: 25, "cpu": "3"},
            True,
            {MEM: 25, CORES: 25, "accelerator": "1", "cpu": "1", "ram": "4Gi", "localStorage": "15Gi"},
            id="with overcommit cpu follows the share",
        ),
    ],
)
def test_a_slice_folds_its_share_of_the_unit(resources: JSONObj, overcommit: bool, expected: JSONObj) -> None:
    assert defaulted(an_instance(resources), a_gpu_type(sliceable=True), overcommit=overcommit) == expected


def test_a_sliceable_feature_in_the_spec_makes_the_type_sliceable() -> None:
    instance_type = a_gpu_type()
    instance_type["spec"]["feature"] = {"logicalSliced": {"maxSize": 128}}
    assert defaulted(an_instance({MEM: 50}), instance_type)["ram"] == "8Gi"


def test_percentages_on_a_type_that_cannot_slice_take_whole_cards() -> None:
    assert defaulted(an_instance({MEM: 25}), a_gpu_type()) == {
        MEM: 25,
        "accelerator": "1",
        "cpu": "4",
        "ram": "16Gi",
        "localStorage": "15Gi",
    }


@pytest.mark.parametrize(
    ("resources", "overcommit", "expected"),
    [
        pytest.param(
            None, False, {"cpu": "1", "ram": "2Gi", "localStorage": "10Gi"}, id="one core by default"
        ),
        pytest.param(
            {"cpu": "4"}, False, {"cpu": "4", "ram": "8Gi", "localStorage": "10Gi"}, id="ram per core"
        ),
        pytest.param(
            {"cpu": "4", "ram": "1Gi"},
            False,
            {"cpu": "4", "ram": "1Gi", "localStorage": "10Gi"},
            id="set ram kept",
        ),
        pytest.param(
            {"cpu": "4", "ram": "1Gi"},
            True,
            {"cpu": "4", "ram": "8Gi", "localStorage": "10Gi"},
            id="overcommit recomputes ram",
        ),
    ],
)
def test_a_cpu_only_type_folds_ram_per_core(
    resources: JSONObj | None, overcommit: bool, expected: JSONObj
) -> None:
    obj = an_instance(resources, type="cpu")
    assert defaulted(obj, a_cpu_type(), overcommit=overcommit) == expected


def test_local_storage_defaults_to_15gi_capped_at_the_type() -> None:
    assert defaulted(an_instance(), a_gpu_type(local_storage="100Gi"))["localStorage"] == "15Gi"
    assert defaulted(an_instance(), a_gpu_type(local_storage="8Gi"))["localStorage"] == "8Gi"
    assert defaulted(an_instance({"localStorage": "50Gi"}), a_gpu_type())["localStorage"] == "50Gi"


def test_defaulting_leaves_its_input_alone() -> None:
    obj = an_instance({MEM: 25})
    before = copy.deepcopy(obj)
    instance.default(obj, a_gpu_type(sliceable=True), overcommit=True)
    assert obj == before


# --- validate create -------------------------------------------------------------------------------------


def test_a_defaulted_instance_that_fits_its_type_is_accepted() -> None:
    for obj, instance_type in [
        (an_instance({"accelerator": "2"}), a_gpu_type()),
        (an_instance({MEM: 25}), a_gpu_type(sliceable=True)),
        (an_instance({"cpu": "8"}, type="cpu"), a_cpu_type()),
    ]:
        assert create_errors(instance.default(obj, instance_type, overcommit=False), instance_type) == []


@pytest.mark.parametrize("namespace", [SYSTEM, "kube-system"])
def test_reserved_namespaces_are_refused(namespace: str) -> None:
    errors = create_errors(an_instance(namespace=namespace), a_gpu_type())
    assert f"metadata.namespace: Forbidden: {namespace} is reserved for the system" in errors


def test_the_type_is_required() -> None:
    assert create_errors(an_instance(type=""), None) == ["spec.type: Required value: must be specified"]


def test_a_running_instance_needs_a_type_that_exists() -> None:
    errors = create_errors(an_instance(type="nope"), None)
    assert errors == ['spec.type: Not found: "nope": no InstanceType has this name']


def test_a_stopped_instance_may_name_a_type_not_there_yet() -> None:
    assert create_errors(an_instance(type="nope", stop=True), None) == []


@pytest.mark.parametrize(
    ("volume", "expected"),
    [
        pytest.param(
            None,
            "spec.volume: Required value: exactly one of ephemeral or persistent must be specified",
            id="no volume",
        ),
        pytest.param(
            {},
            "spec.volume: Required value: exactly one of ephemeral or persistent must be specified",
            id="an empty volume",
        ),
        pytest.param(
            {"ephemeral": {"capacity": "1Gi"}, "persistent": {"name": "data"}},
            "spec.volume: Forbidden: exactly one of ephemeral or persistent must be specified",
            id="both kinds",
        ),
        pytest.param(
            {"ephemeral": {"capacity": "0"}},
            'spec.volume.ephemeral.capacity: Invalid value: "0": must be greater than 0',
            id="an empty ephemeral volume",
        ),
        pytest.param(
            {"ephemeral": {}},
            "spec.volume.ephemeral.capacity: Required value: must be specified",
            id="an ephemeral volume without a size",
        ),
        pytest.param(
            {"persistent": {}},
            "spec.volume.persistent.name: Required value: must name the claim of the persistent volume",
            id="a persistent volume without a claim",
        ),
    ],
)
def test_the_volume_is_exactly_one_valid_kind(volume: JSONObj | None, expected: str) -> None:
    obj = an_instance({"accelerator": "1"})
    if volume is None:
        del obj["spec"]["volume"]
    else:
        obj["spec"]["volume"] = volume
    assert create_errors(obj, a_gpu_type()) == [expected]


def test_a_persistent_volume_with_a_claim_is_accepted() -> None:
    obj = an_instance({"accelerator": "1"}, volume={"persistent": {"name": "data"}})
    assert create_errors(obj, a_gpu_type()) == []


ONCE_MAX = "status.accelerator.onceMaxRequest of InstanceType 't4'"


@pytest.mark.parametrize(
    ("resources", "instance_type", "expected"),
    [
        pytest.param(
            {"accelerator": "1", MEM: 120, CORES: 50},
            a_gpu_type(sliceable=True),
            f"spec.resources.{MEM}: Invalid value: 120: must be between 0 and 100, inclusive",
            id="a slice is at most the whole card",
        ),
        pytest.param(
            {"accelerator": "1", MEM: 50, CORES: -5},
            a_gpu_type(sliceable=True),
            f"spec.resources.{CORES}: Invalid value: -5: must be between 0 and 100, inclusive",
            id="a share is not negative",
        ),
        pytest.param(
            {"accelerator": "2", MEM: 50, CORES: 50},
            a_gpu_type(sliceable=True),
            f'spec.resources.accelerator: Invalid value: "2": must be 1 when {MEM} or {CORES} is set',
            id="a slice is of one card",
        ),
        pytest.param(
            {"accelerator": "1.5"},
            a_gpu_type(),
            'spec.resources.accelerator: Invalid value: "1.5": must be a whole number of accelerators',
            id="whole cards are whole",
        ),
        pytest.param(
            {"accelerator": "-1"},
            a_gpu_type(),
            'spec.resources.accelerator: Invalid value: "-1": must be greater than or equal to 0',
            id="cards are not negative",
        ),
        pytest.param(
            {"accelerator": "3", "cpu": "12", "ram": "48Gi"},
            a_gpu_type(),
            f'spec.resources.accelerator: Invalid value: "3": must be less than or equal to 2 ({ONCE_MAX})',
            id="no more cards than one instance can get now",
        ),
        pytest.param(
            {"accelerator": "1"},
            a_gpu_type(once_max=None),
            f'spec.resources.accelerator: Invalid value: "1": must be less than or equal to 0 ({ONCE_MAX})',
            id="a type whose capacity is not observed yet has no free cards",
        ),
        pytest.param(
            {"accelerator": "1", "cpu": "5"},
            a_gpu_type(),
            'spec.resources.cpu: Invalid value: "5": must be less than or equal to 4 '
            "(unitResources.cpu 4 × 1)",
            id="cpu within the unit per card",
        ),
        pytest.param(
            {"accelerator": "2", "ram": "33Gi"},
            a_gpu_type(),
            'spec.resources.ram: Invalid value: "33Gi": must be less than or equal to 32Gi '
            "(unitResources.ram 16Gi × 2)",
            id="ram within the unit per card",
        ),
        pytest.param(
            {"accelerator": "1", MEM: 50, "ram": "17Gi"},
            a_gpu_type(sliceable=True),
            'spec.resources.ram: Invalid value: "17Gi": must be less than or equal to 16Gi '
            "(unitResources.ram 16Gi × 1)",
            id="a slice's ram within one unit",
        ),
        pytest.param(
            {"accelerator": "1", "localStorage": "101Gi"},
            a_gpu_type(),
            'spec.resources.localStorage: Invalid value: "101Gi": must be less than or equal to 100Gi '
            "(localStorage of InstanceType 't4')",
            id="local storage within the type's",
        ),
        pytest.param(
            {"accelerator": "1", "ram": "-1Gi"},
            a_gpu_type(),
            'spec.resources.ram: Invalid value: "-1Gi": must be greater than or equal to 0',
            id="ram is not negative",
        ),
        pytest.param(
            {"accelerator": "1", "cpu": "lots"},
            a_gpu_type(),
            'spec.resources.cpu: Invalid value: "lots": must be a quantity, e.g. 2, 500m or 16Gi',
            id="a quantity that does not parse",
        ),
        pytest.param(
            {"accelerator": "1", MEM: "half"},
            a_gpu_type(sliceable=True),
            f'spec.resources.{MEM}: Invalid value: "half": must be an integer',
            id="a share that is not a number",
        ),
    ],
)
def test_requests_beyond_the_type_are_refused(
    resources: JSONObj, instance_type: JSONObj, expected: str
) -> None:
    assert expected in create_errors(an_instance(resources), instance_type)


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        pytest.param(
            {"cpu": "2", "accelerator": "1"},
            'spec.resources.accelerator: Invalid value: "1": '
            "must be 0: InstanceType 'cpu' has no accelerators",
            id="no cards from a CPU-only type",
        ),
        pytest.param(
            {"cpu": "9"},
            'spec.resources.cpu: Invalid value: "9": must be less than or equal to 8 '
            "(status.cpu.onceMaxRequest of InstanceType 'cpu')",
            id="no more cores than one instance can get now",
        ),
        pytest.param(
            {"cpu": "4", "ram": "9Gi"},
            'spec.resources.ram: Invalid value: "9Gi": must be less than or equal to 8Gi '
            "(unitResources.ram 2Gi × 4)",
            id="ram within the unit per core",
        ),
        pytest.param(
            {"cpu": "1", "localStorage": "11Gi"},
            'spec.resources.localStorage: Invalid value: "11Gi": must be less than or equal to 10Gi '
            "(localStorage of InstanceType 'cpu')",
            id="local storage within the type's",
        ),
    ],
)
def test_cpu_only_requests_beyond_the_type_are_refused(resources: JSONObj, expected: str) -> None:
    assert create_errors(an_instance(resources, type="cpu"), a_cpu_type()) == [expected]


def test_a_cpu_only_instance_with_ram_for_its_cores_is_accepted() -> None:
    assert create_errors(an_instance({"cpu": "4", "ram": "8Gi"}, type="cpu"), a_cpu_type()) == []


# --- validate update -------------------------------------------------------------------------------------

RUNNING_CHANGES = [
    ("type", "a100"),
    ("image", "ubuntu:26.04"),
    ("imagePullPolicy", "Always"),
    ("command", ["sleep", "1"]),
    ("privileged", True),
    ("ports", [{"port": 22}]),
    ("env", [{"name": "A", "value": "1"}]),
    ("volumeMount", "/data"),
    ("imagePullSecret", {"name": "regcred"}),
    ("resources", {"accelerator": "2"}),
    ("sshPublicKey", {"name": "me"}),
]


def test_every_frozen_field_is_listed() -> None:
    assert {key for key, _ in RUNNING_CHANGES} == set(instance.RUNNING_IMMUTABLE)


@pytest.mark.parametrize(("key", "value"), RUNNING_CHANGES, ids=[key for key, _ in RUNNING_CHANGES])
def test_a_running_instance_is_frozen(key: str, value: Any) -> None:
    old = an_instance({"accelerator": "1"}, phase="Running")
    new = copy.deepcopy(old)
    new["spec"][key] = value
    errors = messages(instance.validate_update(old, new, a_gpu_type()))
    assert errors == [f"spec.{key}: Forbidden: may not be changed while the instance runs; stop it first"]


def test_a_stopped_instance_may_be_edited() -> None:
    old = an_instance({"accelerator": "1"}, stop=True, phase="Stopped")
    new = an_instance({"accelerator": "2"}, stop=True, image="ubuntu:26.04", type="a100")
    assert instance.validate_update(old, new, None) == []


def test_a_running_instance_may_be_renamed_and_stopped() -> None:
    old = an_instance({"accelerator": "1"}, phase="Running")
    new = an_instance({"accelerator": "1"}, stop=True, displayName="my box", description="for tests")
    assert instance.validate_update(old, new, a_gpu_type()) == []


def test_the_volume_is_frozen_even_when_stopped() -> None:
    old = an_instance(stop=True, phase="Stopped")
    new = an_instance(stop=True, volume={"ephemeral": {"capacity": "60Gi"}})
    assert messages(instance.validate_update(old, new, None)) == ["spec.volume: Forbidden: is immutable"]


def test_an_instance_starts_from_stopped() -> None:
    old = an_instance({"accelerator": "1"}, stop=True, phase="Stopped")
    assert instance.validate_update(old, an_instance({"accelerator": "1"}), a_gpu_type()) == []


@pytest.mark.parametrize(("phase", "shown"), [("Stopping", "Stopping"), (None, "unknown")])
def test_an_instance_does_not_start_before_it_stopped(phase: str | None, shown: str) -> None:
    old = an_instance({"accelerator": "1"}, stop=True, phase=phase)
    errors = messages(instance.validate_update(old, an_instance({"accelerator": "1"}), a_gpu_type()))
    assert errors == [f"spec.stop: Forbidden: an instance starts only from phase Stopped; it is {shown}"]


def test_starting_needs_a_type_that_exists() -> None:
    old = an_instance(stop=True, phase="Stopped", type="gone")
    errors = messages(instance.validate_update(old, an_instance(type="gone"), None))
    assert errors == ['spec.type: Not found: "gone": no InstanceType has this name']


def test_starting_without_a_type_is_refused() -> None:
    old = an_instance(stop=True, phase="Stopped")
    errors = messages(instance.validate_update(old, an_instance(type=""), None))
    assert errors == ["spec.type: Required value: must be specified"]


def test_starting_rechecks_the_requests() -> None:
    old = an_instance({"accelerator": "3"}, stop=True, phase="Stopped")
    errors = messages(instance.validate_update(old, an_instance({"accelerator": "3"}), a_gpu_type()))
    assert errors == [
        f'spec.resources.accelerator: Invalid value: "3": must be less than or equal to 2 ({ONCE_MAX})'
    ]


def test_an_instance_cannot_stop_while_starting() -> None:
    old = an_instance({"accelerator": "1"}, phase="Starting")
    errors = messages(
        instance.validate_update(old, an_instance({"accelerator": "1"}, stop=True), a_gpu_type())
    )
    assert errors == ["spec.stop: Forbidden: an instance cannot be stopped while it is Starting"]


# --- untrusted input -------------------------------------------------------------------------------------

quantities = (
    st.sampled_from(["1", "0", "-1", "1.5", "16Gi", "1e1000", "9Ei", "x", "", "1e-1000"]) | json_values
)
resources = fields(
    ["accelerator", "cpu", "ram", "localStorage", MEM, CORES], quantities | st.integers(-200, 200)
)
instance_specs = fields(
    ["type", "image", "stop", "resources", "volume", "imagePullPolicy", "volumeMount", "command"],
    resources | json_values,
)
instances = st.fixed_dictionaries(
    {}, optional={"metadata": json_values, "spec": instance_specs, "status": fields(["phase"], json_values)}
)
type_specs = fields(
    ["acceleratable", "unitResources", "localStorage", "feature"],
    quantities | fields(["cpu", "ram"], quantities) | st.booleans(),
)
views = fields(
    ["accelerator", "acceleratorSliced", "cpu", "detail"], fields(["onceMaxRequest", "capacity"], quantities)
)
instance_types = (
    st.none() | st.fixed_dictionaries({}, optional={"spec": type_specs, "status": views}) | json_values
)


@settings(max_examples=300, deadline=None)
@given(old=instances, new=instances, instance_type=instance_types, overcommit=st.booleans())
def test_garbage_never_raises(old: JSONObj, new: JSONObj, instance_type: Any, overcommit: bool) -> None:
    if not isinstance(instance_type, dict):
        instance_type = None
    before = copy.deepcopy(new)
    assert isinstance(instance.default(new, instance_type, overcommit=overcommit), dict)
    assert new == before
    for errors in (
        instance.validate_create(new, instance_type, system_namespace=SYSTEM),
        instance.validate_update(old, new, instance_type),
    ):
        assert isinstance(errors, list)
        assert all(isinstance(e, FieldError) for e in errors)
