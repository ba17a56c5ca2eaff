"""Our `/openapi/v2` through the real kube-apiserver: merged beside the CRD's, read by `kubectl explain`.

kube-apiserver's aggregator downloads `/openapi/v2` from each APIService and merges the paths under its
group version (with the definitions they reach) into its own `/openapi/v2`; `kubectl explain
--output=plaintext-openapiv2` reads that merged document. So these tests start one real worker, wait
for its definitions to appear in kube-apiserver's document, and check that the CRD's v1alpha1 ones are
still there under their own names (nothing replaced or renamed by the merge).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from gpustack_operator.kube.client import Client
from gpustack_operator.sandbox.cluster import Sandbox
from tests.helpers import eventually
from tests.integration.worker_support import Kubectl, Served, serving_worker

OURS = ("ai.gpustack.worker.v1.InstanceType", "ai.gpustack.v1.Setting")
CRD_KIND = "ai.gpustack.worker.v1alpha1.InstanceType"
MERGED_WITHIN = 150.0
"""Seconds from Available until kube-apiserver's /openapi/v2 holds our definitions. The aggregator's v2
controller (kube-aggregator pkg/controllers/openapi/controller.go) downloads a new APIService's spec 1 s
after adding it; a failed download is retried by a rate limiter whose first delay is 60 s
(`successfulUpdateDelay`, doubling up to an hour), and a success is re-polled every 60 s. A first try that
races the ExternalName Service routing therefore lands within about 61 s; twice that, plus slack for a
shared 2-core machine, bounds the wait without hiding a worker that never serves v2 (a 404 would stop the
polling for good, so the bound would then be hit)."""


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def served(
    sandbox: Sandbox, kube: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Served]:
    async with serving_worker(sandbox, kube, tmp_path_factory.mktemp("openapi-v2"), "api-v2") as served:
        yield served


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def merged(kubectl: Kubectl, served: Served) -> dict[str, Any]:
    """kube-apiserver's /openapi/v2 once it holds the definitions of both our APIServices."""

    async def ours_merged() -> dict[str, Any] | None:
        spec: dict[str, Any] = json.loads(await kubectl.ok("get", "--raw", "/openapi/v2"))
        return spec if all(name in spec["definitions"] for name in OURS) else None

    return await eventually(
        ours_merged, timeout=MERGED_WITHIN, interval=2.0, what="our /openapi/v2 merged by kube-apiserver"
    )


async def test_merged_v2_holds_our_v1_definitions_and_keeps_the_crds(merged: dict[str, Any]) -> None:
    definitions, paths = merged["definitions"], merged["paths"]
    assert definitions[OURS[0]]["x-kubernetes-group-version-kind"] == [
        {"group": "worker.gpustack.ai", "version": "v1", "kind": "InstanceType"}
    ]
    assert definitions[OURS[1]]["x-kubernetes-group-version-kind"] == [
        {"group": "gpustack.ai", "version": "v1", "kind": "Setting"}
    ]
    assert definitions[CRD_KIND]["x-kubernetes-group-version-kind"] == [
        {"group": "worker.gpustack.ai", "version": "v1alpha1", "kind": "InstanceType"}
    ]
    renamed = [name for name in definitions if name.startswith("ai.gpustack.") and "_v" in name]
    assert renamed == []
    assert "/apis/worker.gpustack.ai/v1alpha1/instancetypes/{name}" in paths  # the CRD's, still its own
    patch = paths["/apis/worker.gpustack.ai/v1/instancetypes/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "worker.gpustack.ai",
        "version": "v1",
        "kind": "InstanceType",
    }
    assert "application/strategic-merge-patch+json" not in patch["consumes"]
    assert "fieldValidation" in [p.get("name") for p in patch["parameters"]]
    assert "/apis/gpustack.ai/v1/namespaces/{namespace}/settings/{name}" in paths


def _heading(out: str) -> dict[str, str]:
    """`KIND:`, `VERSION:` (v2 explain prints the group inside it: `<group>/<version>`) and, for a field,
    `RESOURCE:`."""
    fields = (line.split(None, 1) for line in out.splitlines() if line[:1].isupper() and ":" in line)
    return {field[0].rstrip(":"): field[1].strip() for field in fields if len(field) == 2}


def _words(text: str) -> str:
    return " ".join(text.split())  # explain wraps lines


async def test_explain_from_openapi_v2_prints_our_kind_and_field_docs(
    kubectl: Kubectl, merged: dict[str, Any]
) -> None:
    ours = merged["definitions"][OURS[0]]
    out = await kubectl.ok("explain", "instancetypes", "--output=plaintext-openapiv2")
    assert _heading(out) == {"KIND": "InstanceType", "VERSION": "worker.gpustack.ai/v1"}
    assert _words(ours["description"]) in _words(out)
    assert _words(ours["properties"]["spec"]["description"]) in _words(out)
    spec = await kubectl.ok("explain", "instancetypes.spec", "--output=plaintext-openapiv2")
    assert _heading(spec)["VERSION"] == "worker.gpustack.ai/v1"
    assert _heading(spec)["RESOURCE"] == "spec <Object>"
    unit = ours["properties"]["spec"]["properties"]["unitResources"]
    assert "unitResources\t<Object>" in spec
    assert _words(unit["description"]) in _words(spec)
    settings = await kubectl.ok("explain", "settings.spec", "--output=plaintext-openapiv2")
    assert _heading(settings)["KIND"] == "Setting"
    assert _heading(settings)["VERSION"] == "gpustack.ai/v1"
    assert "value\t<string>" in settings
