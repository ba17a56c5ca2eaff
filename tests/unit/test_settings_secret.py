"""The gpustack-settings Secret backfill: adds what is missing, never overwrites an admin's value."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from gpustack_operator.settings.catalog import CONTAINER_REGISTRY, INSTANCE_TYPE_AWARE_CPU_MANUFACTURER
from gpustack_operator.settings.secret import (
    SECRET_NAME,
    backfill_patch,
    decode_values,
    encode,
    new_secret,
    setting_flag,
    setting_text,
    uid_annotation,
)

VALUES = {"container-registry": "", "node-management-manual": "false"}


def uids() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"uid-{next(counter)}"


def existing(
    data: dict[str, str], annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": SECRET_NAME,
            "resourceVersion": "42",
            "labels": labels or {"resource.gpustack.ai/type": "settings"},
            "annotations": annotations
            if annotations is not None
            else {uid_annotation(k): "old" for k in VALUES},
        },
        "data": {k: encode(v) for k, v in data.items()},
    }


def test_a_new_secret_holds_every_value_its_uids_and_the_label() -> None:
    secret = new_secret(VALUES, namespace="gpustack-system", new_uid=uids())
    assert secret == {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": "gpustack-settings",
            "namespace": "gpustack-system",
            "labels": {"resource.gpustack.ai/type": "settings"},
            "annotations": {
                "note.gpustack.ai/container-registry-uid": "uid-1",
                "note.gpustack.ai/node-management-manual-uid": "uid-2",
            },
        },
        "data": {"container-registry": "", "node-management-manual": "ZmFsc2U="},
    }
    assert decode_values(secret) == VALUES


def test_an_admin_value_is_never_overwritten() -> None:
    current = existing({"node-management-manual": "true", "container-registry": "registry.local"})
    assert backfill_patch(current, VALUES, new_uid=uids()) is None
    assert decode_values(current)["node-management-manual"] == "true"


def test_only_missing_keys_and_uids_are_added() -> None:
    current = existing(
        {"node-management-manual": "true"}, annotations={uid_annotation("node-management-manual"): "kept"}
    )
    patch = backfill_patch(current, VALUES, new_uid=uids())
    assert patch == {
        "metadata": {"annotations": {uid_annotation("container-registry"): "uid-1"}, "resourceVersion": "42"},
        "data": {"container-registry": ""},
    }


def test_a_wrong_ownership_label_is_corrected() -> None:
    current = existing(dict(VALUES), labels={"resource.gpustack.ai/type": "nodes"})
    assert backfill_patch(current, VALUES) == {
        "metadata": {"labels": {"resource.gpustack.ai/type": "settings"}, "resourceVersion": "42"}
    }


def test_an_empty_secret_without_data_is_filled() -> None:
    patch = backfill_patch({"metadata": {"name": SECRET_NAME}}, VALUES, new_uid=uids())
    assert patch is not None
    assert decode_values(patch) == VALUES
    assert "resourceVersion" not in patch["metadata"]


def test_a_setting_is_read_one_way_falling_back_to_its_default_whatever_is_wrong() -> None:
    aware = INSTANCE_TYPE_AWARE_CPU_MANUFACTURER
    registry = CONTAINER_REGISTRY
    stored = {"data": {aware.name: encode("true"), registry.name: encode("registry.example")}}
    assert setting_flag(stored, aware) is True
    assert setting_text(stored, registry) == "registry.example"
    assert setting_flag(None, aware) is False, "no Secret: the default"
    assert setting_flag({"data": {}}, aware) is False, "no key: the default"
    assert setting_flag({"data": {aware.name: encode("maybe")}}, aware) is False, "not a boolean: the default"
    assert setting_text({"data": {registry.name: "%%% not base64"}}, registry) == registry.default
