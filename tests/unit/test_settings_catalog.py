"""The editable settings: defaults, GPUSTACK_* first-install overrides, and errors for bad values."""

from __future__ import annotations

import pytest

from gpustack_operator.settings import catalog
from gpustack_operator.settings.catalog import SETTINGS, SettingsEnvironmentError, initial_values
from gpustack_operator.settings.setting import Prop, Setting, SettingValueError

DEFAULTS = {
    "container-registry": "",
    "container-namespace": "",
    "image-pull-secrets": "",
    "image-pull-policy": "IfNotPresent",
    "instance-general-resources-overcommit": "true",
    "instance-ssh-server-image": "gpustack/ssh-server:v1.3.0",
    "instance-access-static-address": "",
    "instance-access-wildcard-dns": "",
    "instance-privileged-allowed": "false",
    "node-management-manual": "false",
    "instance-type-mixed-on-node": "true",
    "instance-type-derived-from-node": "true",
    "instance-type-drain-when-no-flavors": "true",
    "instance-type-aware-cpu-manufacturer": "false",
}


def test_defaults_without_environment() -> None:
    assert initial_values({}) == DEFAULTS


def test_every_setting_is_editable_and_visible() -> None:
    assert all(
        s.props == Prop.EDITABLE and s.editable and not s.sensitive and not s.private
        for s in SETTINGS.values()
    )


@pytest.mark.parametrize(
    ("name", "env_name"),
    [
        ("container-registry", "GPUSTACK_CONTAINER_REGISTRY"),
        ("instance-type-aware-cpu-manufacturer", "GPUSTACK_INSTANCE_TYPE_AWARE_CPU_MANUFACTURER"),
    ],
)
def test_env_names_are_upper_snake(name: str, env_name: str) -> None:
    assert SETTINGS[name].env_name == env_name


def test_environment_overrides_defaults() -> None:
    env = {
        "GPUSTACK_CONTAINER_REGISTRY": "registry.local:5000",
        "GPUSTACK_NODE_MANAGEMENT_MANUAL": "TRUE",
        "GPUSTACK_INSTANCE_SSH_SERVER_IMAGE": "registry.local:5000/gpustack/ssh-server:v2",
        "GPUSTACK_INSTANCE_TYPE_MIXED_ON_NODE": "",  # empty means unset
    }
    assert initial_values(env) == {
        **DEFAULTS,
        "container-registry": "registry.local:5000",
        "node-management-manual": "TRUE",
        "instance-ssh-server-image": "registry.local:5000/gpustack/ssh-server:v2",
    }


def test_bad_environment_values_are_all_reported_with_their_text() -> None:
    env = {"GPUSTACK_NODE_MANAGEMENT_MANUAL": "yes", "GPUSTACK_INSTANCE_SSH_SERVER_IMAGE": "Not An Image"}
    with pytest.raises(SettingsEnvironmentError) as caught:
        initial_values(env)
    assert [(e.name, e.source) for e in caught.value.errors] == [
        ("instance-ssh-server-image", "GPUSTACK_INSTANCE_SSH_SERVER_IMAGE"),
        ("node-management-manual", "GPUSTACK_NODE_MANAGEMENT_MANUAL"),
    ]
    assert "'yes' is not a boolean" in str(caught.value)


@pytest.mark.parametrize(
    ("setting", "text"),
    [
        (catalog.CONTAINER_REGISTRY, ""),
        (catalog.CONTAINER_REGISTRY, "{}"),
        (catalog.IMAGE_PULL_POLICY, ""),
        (catalog.INSTANCE_ACCESS_WILDCARD_DNS, "[]"),
        (catalog.CONTAINER_NAMESPACE, "anything goes"),
    ],
)
def test_blank_is_admitted_where_the_original_allowed_it(setting: Setting, text: str) -> None:
    try:
        setting.admit(text)
    except SettingValueError as exc:
        pytest.fail(f"{setting.name} refused {text!r}: {exc}")


@pytest.mark.parametrize(
    ("setting", "text"),
    [
        (catalog.INSTANCE_SSH_SERVER_IMAGE, ""),
        (catalog.INSTANCE_PRIVILEGED_ALLOWED, ""),
        (catalog.INSTANCE_PRIVILEGED_ALLOWED, "{}"),
        (catalog.CONTAINER_REGISTRY, "not a registry"),
    ],
)
def test_blank_or_malformed_is_refused_elsewhere(setting: Setting, text: str) -> None:
    with pytest.raises(SettingValueError, match=f"setting {setting.name}"):
        setting.admit(text)


def test_boolean_reads_are_strict_and_default_when_missing() -> None:
    overcommit = catalog.INSTANCE_GENERAL_RESOURCES_OVERCOMMIT
    assert overcommit.bool_in({}) is True
    assert overcommit.bool_in({overcommit.name: "0"}) is False
    with pytest.raises(SettingValueError, match="'no' is not a boolean"):
        overcommit.bool_in({overcommit.name: "no"})


def test_boolean_settings_are_the_contract_switches() -> None:
    flags = sorted(name for name, s in SETTINGS.items() if s.is_bool)
    assert flags == sorted(name for name, value in DEFAULTS.items() if value in ("true", "false"))
