"""Our generated CRDs are accepted by a real kube-apiserver, and objects round-trip through it unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpustack_operator.api import crds
from gpustack_operator.api.schema.apitype import ApiType
from gpustack_operator.api.schema.devices import DEVICES
from gpustack_operator.api.schema.instance import INSTANCE
from gpustack_operator.api.schema.instancetype import INSTANCE_TYPE
from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.conditions import conditions
from gpustack_operator.kube.resources import Resource
from tests.helpers import eventually

GOLDEN = Path(__file__).resolve().parents[1] / "unit" / "golden"


def resource_of(api: ApiType[Any]) -> Resource:
    return Resource(api.group, api.version, api.plural, api.kind, api.namespaced)


async def install(kube: Client) -> None:
    for crd in crds.custom_resource_definitions():
        await kube.apply(resources.CRDS, crd)

    async def established() -> bool:
        for crd in crds.custom_resource_definitions():
            got = await kube.get(resources.CRDS, crd["metadata"]["name"])
            conds = conditions(got)
            assert "NonStructuralSchema" not in conds, conds["NonStructuralSchema"]["message"]
            if conds.get("Established", {}).get("status") != "True":
                return False
        return True

    await eventually(established, timeout=60, what="our CRDs Established")


@pytest.mark.parametrize(
    ("api", "golden"),
    [
        pytest.param(INSTANCE_TYPE, "instancetype.json", id="instancetype"),
        pytest.param(DEVICES, "devices.json", id="devices"),
        pytest.param(INSTANCE, "instance.json", id="instance"),
    ],
)
async def test_golden_objects_round_trip_through_the_real_apiserver(
    kube: Client, namespace: str, api: ApiType[Any], golden: str
) -> None:
    await install(kube)
    obj = json.loads((GOLDEN / golden).read_text())
    if api.namespaced:
        obj["metadata"]["namespace"] = namespace
    res = resource_of(api)
    created = await kube.create(res, {k: v for k, v in obj.items() if k != "status"})
    if "status" in obj:
        created = await kube.patch(
            res,
            obj["metadata"]["name"],
            {"status": obj["status"]},
            namespace=obj["metadata"].get("namespace"),
            subresource="status",
        )
    # The server kept every field our schema writes: nothing pruned, nothing rewritten.
    assert api.dump(api.load(created))["spec"] == api.dump(api.load(obj))["spec"]
    if "status" in obj:
        assert api.dump(api.load(created))["status"] == api.dump(api.load(obj))["status"]
    await kube.delete(res, obj["metadata"]["name"], obj["metadata"].get("namespace"))


async def test_the_apiserver_rejects_what_our_schema_rejects(kube: Client) -> None:
    await install(kube)
    bad = json.loads((GOLDEN / "devices.json").read_text())
    bad["metadata"]["name"] = "bad-devices"
    bad.pop("status", None)
    bad["spec"]["groups"][0]["memory"] = "lots"
    assert any(e.path.endswith("memory") for e in DEVICES.validate(bad))
    with pytest.raises(errors.Invalid) as refused:
        await kube.create(resource_of(DEVICES), bad)
    assert any("memory" in c.field for c in refused.value.causes)
