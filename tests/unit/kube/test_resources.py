"""The addresses of the kinds we touch agree with where their API types say they are served."""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_operator.api.schema import DEVICES, INSTANCE_TYPE, ApiType
from gpustack_operator.api.types import kueue
from gpustack_operator.kube import resources
from gpustack_operator.kube.resources import Resource


@pytest.mark.parametrize(
    ("resource", "api"),
    [
        pytest.param(resources.DEVICES, DEVICES, id="Devices"),
        pytest.param(resources.INSTANCE_TYPES, INSTANCE_TYPE, id="InstanceType"),
    ],
)
def test_our_kinds_are_addressed_where_their_crd_serves_them(resource: Resource, api: ApiType[Any]) -> None:
    assert (resource.group, resource.version, resource.plural, resource.kind, resource.namespaced) == (
        api.group,
        api.version,
        api.plural,
        api.kind,
        api.namespaced,
    )


@pytest.mark.parametrize(
    ("resource", "namespaced"),
    [
        pytest.param(resources.RESOURCE_FLAVORS, False, id="ResourceFlavor"),
        pytest.param(resources.CLUSTER_QUEUES, False, id="ClusterQueue"),
        pytest.param(resources.LOCAL_QUEUES, True, id="LocalQueue"),
        pytest.param(resources.WORKLOADS, True, id="Workload"),
        pytest.param(resources.ADMISSION_CHECKS, False, id="AdmissionCheck"),
    ],
)
def test_kueue_kinds_use_the_version_kueue_017_stores(resource: Resource, namespaced: bool) -> None:
    assert resource.api_version == kueue.API_VERSION == "kueue.x-k8s.io/v1beta2"
    assert resource.namespaced is namespaced
    assert resources.for_kind(kueue.API_VERSION, resource.kind) is resource
