"""Settings as served objects: values from the Secret, defaults when absent, sensitive values hidden; and
the RFC 7386 merge patch a `kubectl patch --type=merge` or `kubectl edit` of a Setting is applied with."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gpustack_operator.apiserver.registry.settings import setting_object
from gpustack_operator.kube.patches import merge_patch
from gpustack_operator.settings import secret
from gpustack_operator.settings.catalog import INSTANCE_GENERAL_RESOURCES_OVERCOMMIT as OVERCOMMIT
from gpustack_operator.settings.setting import Prop

SECRET = {
    "metadata": {
        "resourceVersion": "42",
        "annotations": {secret.uid_annotation(OVERCOMMIT.name): "uid-1"},
    },
    "data": {OVERCOMMIT.name: secret.encode("false")},
}


def test_a_setting_shows_the_secrets_value_version_and_uid() -> None:
    obj = setting_object(OVERCOMMIT, SECRET, "gpustack-system")
    assert obj["metadata"] == {
        "name": OVERCOMMIT.name,
        "namespace": "gpustack-system",
        "uid": "uid-1",
        "resourceVersion": "42",
    }
    assert obj["status"]["value"] == "false"
    assert obj["status"]["editable"] is True


def test_without_the_secret_a_setting_shows_its_default() -> None:
    assert setting_object(OVERCOMMIT, None, "ns")["status"]["value"] == OVERCOMMIT.default


def test_a_sensitive_value_is_never_shown() -> None:
    hidden = dataclasses.replace(OVERCOMMIT, props=Prop.EDITABLE | Prop.SENSITIVE)
    assert setting_object(hidden, SECRET, "ns")["status"]["value"] == "(sensitive)"


@pytest.mark.parametrize(
    ("target", "patch", "result"),
    [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        (["a", "b"], {"a": "b"}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_follows_rfc_7386(target: Any, patch: Any, result: Any) -> None:
    assert merge_patch(target, patch) == result
