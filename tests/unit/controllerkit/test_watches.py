"""Key functions: which primary objects a watched object's change names."""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_operator.controllerkit.spec import ControllerSpec
from gpustack_operator.controllerkit.watches import for_, owner_keys
from gpustack_operator.kube import resources
from gpustack_operator.kube.resources import Resource

from .fakes import ScriptedReconciler, obj

INSTANCE_TYPES = Resource("worker.gpustack.ai", "v1alpha1", "instancetypes", "InstanceType", namespaced=False)


def ref(kind: str, name: str, api_version: str = "v1", controller: bool | None = True) -> dict[str, Any]:
    r: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}"}
    if controller is not None:
        r["controller"] = controller
    return r


@pytest.mark.parametrize(
    ("owner", "refs", "namespace", "keys"),
    [
        pytest.param(resources.CONFIGMAPS, [ref("ConfigMap", "o")], "ns", ["ns/o"], id="namespaced owner"),
        pytest.param(
            INSTANCE_TYPES,
            [ref("InstanceType", "h100", "worker.gpustack.ai/v1alpha1")],
            None,
            ["h100"],
            id="cluster-scoped owner of a cluster-scoped object",
        ),
        pytest.param(
            INSTANCE_TYPES,
            [ref("InstanceType", "h100", "worker.gpustack.ai/v1")],
            "ns",
            ["h100"],
            id="another served version of the owner's group still counts",
        ),
        pytest.param(
            resources.CONFIGMAPS,
            [ref("ConfigMap", "o", controller=None)],
            "ns",
            [],
            id="a non-controller ref",
        ),
        pytest.param(
            INSTANCE_TYPES,
            [ref("InstanceType", "x", "other.example.com/v1")],
            None,
            [],
            id="same kind, other group",
        ),
        pytest.param(resources.CONFIGMAPS, [], "ns", [], id="no owner references"),
    ],
)
def test_owner_keys(
    owner: Resource, refs: list[dict[str, Any]], namespace: str | None, keys: list[str]
) -> None:
    owned = obj("child", namespace, metadata={"ownerReferences": refs})
    assert owner_keys(owner)(owned) == keys


def test_the_primary_key_is_namespace_slash_name_or_just_the_name() -> None:
    watch = for_(resources.CONFIGMAPS)
    assert watch.keys(obj("a", "ns")) == ["ns/a"]
    assert watch.keys(obj("node-1", None)) == ["node-1"]


def test_a_controller_needs_at_least_one_worker() -> None:
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        ControllerSpec("x", ScriptedReconciler(), for_(resources.CONFIGMAPS), concurrency=0)
