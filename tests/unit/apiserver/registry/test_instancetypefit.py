"""`instancetypes/fit`: the request becomes the Pod the chain would see, and the question is published.

The request in an Instance's terms or a container's limits must turn into the Pod limits the instance
controller and the Pod webhook would produce (so the check is asked about the Pod it will really see); a
request that cannot be one is refused saying why. Discovery and both OpenAPI documents describe it as a
`create` taking and answering an InstanceTypeFit.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_operator.apiserver.catalog import CATALOG
from gpustack_operator.apiserver.openapi import group_version_document
from gpustack_operator.apiserver.openapi_paths import path_items
from gpustack_operator.apiserver.registry.instancetypefit import pod_template
from gpustack_operator.apiserver.registry.instancetypes import SERVED
from gpustack_operator.apiserver.swagger import swagger_document
from gpustack_operator.rules.instance.input import RenderError

H100: dict[str, Any] = {
    "spec": {
        "acceleratable": True,
        "manufacturer": "nvidia",
        "memory": "80Gi",
        "feature": {"logicalSliced": {"maxSize": 10}},
    },
}
CPU: dict[str, Any] = {"spec": {"acceleratable": False}}


def limits(spec: dict[str, Any], instance_type: dict[str, Any] = H100) -> dict[str, str]:
    container = pod_template(spec, instance_type)["spec"]["containers"][0]
    assert container["resources"]["requests"] == container["resources"]["limits"]
    return dict(container["resources"]["limits"])


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        pytest.param({"resources": {"accelerator": 2}}, {"nvidia.com/gpu": "2"}, id="instance: 2 cards"),
        pytest.param(
            {"resources": {"acceleratorSlicedMemoryPercentage": 25}},
            {
                "nvidia.com/gpu.sliced": "1",
                "nvidia.com/gpu.sliced.memory-percentage": "25",
                "nvidia.com/gpu.sliced.cores-percentage": "25",
                "nvidia.com/gpu.sliced.units": "400k",
            },
            id="instance: a quarter slice",
        ),
        pytest.param(
            {"limits": {"nvidia.com/gpu.shared": "3"}}, {"nvidia.com/gpu.shared": "3"}, id="pod: 3 shares"
        ),
        pytest.param(
            {"limits": {"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-mib": "20480"}},
            {
                "nvidia.com/gpu.sliced": "1",
                "nvidia.com/gpu.sliced.memory-mib": "20480",
                "nvidia.com/gpu.sliced.cores-percentage": "100",
                "nvidia.com/gpu.sliced.units": "400k",
            },
            id="pod: 20 GiB of an 80 GiB card",
        ),
    ],
)
def test_the_request_becomes_the_pods_limits_as_the_chain_renders_them(
    spec: dict[str, Any], want: dict[str, str]
) -> None:
    assert limits(spec) == want


@pytest.mark.parametrize(
    ("spec", "instance_type", "says"),
    [
        pytest.param({}, H100, "exactly one of resources and limits", id="neither"),
        pytest.param({"resources": {"accelerator": 1}, "limits": {}}, H100, "exactly one", id="both"),
        pytest.param({"resources": {"accelerator": 1}}, CPU, "CPU-only", id="a CPU type"),
        pytest.param({"resources": {"accelerator": 0}}, H100, "no accelerator", id="zero cards"),
        pytest.param(
            {"limits": {"nvidia.com/gpu.sliced": "1"}}, H100, "memory-percentage", id="slice without memory"
        ),
    ],
)
def test_a_request_that_is_no_pod_is_refused_saying_why(
    spec: dict[str, Any], instance_type: dict[str, Any], says: str
) -> None:
    with pytest.raises(RenderError, match=says):
        pod_template(spec, instance_type)


def test_fit_is_published_as_a_create_taking_and_answering_an_instancetypefit() -> None:
    [entry] = [e for e in SERVED.entries() if e["name"] == "instancetypes/fit"]
    assert (entry["kind"], entry["verbs"]) == ("InstanceTypeFit", ["create"])
    [item] = [i for i in path_items(SERVED) if i.path.endswith("/{name}/fit")]
    [op] = item.operations
    assert (op.method, op.operation_id, op.body, op.consumes) == (
        "post",
        "createWorkerGpustackAiV1InstanceTypeFit",
        "inline",
        ("application/json",),
    )
    v3 = group_version_document("worker.gpustack.ai/v1", CATALOG.served, CATALOG.schemas)
    post = v3["paths"]["/apis/worker.gpustack.ai/v1/instancetypes/{name}/fit"]["post"]
    body = post["requestBody"]["content"]["application/json"]["schema"]
    assert body == post["responses"]["200"]["content"]["application/json"]["schema"]
    assert set(body["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}
    v2 = swagger_document(CATALOG.served, CATALOG.schemas)
    assert v2["paths"]["/apis/worker.gpustack.ai/v1/instancetypes/{name}/fit"]["post"]["parameters"]
