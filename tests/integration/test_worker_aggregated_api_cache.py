"""v1 InstanceType reads from the worker's informer cache, through kube-apiserver and the real kubectl.

The worker answers GET and LIST of `instancetypes.worker.gpustack.ai/v1` from its shared informer when it can
(apiserver/registry/generic/cachedreads.py). What a user must not notice: a list right after a create through
v1 has the new object, a GET of an object the cache has not seen yet is no 404, and every selector filters
exactly as the CRD's own list does. What they may notice: the reads stop costing API requests (the worker's
own request counter says so).

Named `test_worker_*` to run with the other tests that start a real worker.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import INSTANCE_TYPES
from gpustack_operator.sandbox.cluster import Sandbox
from tests.helpers import eventually
from tests.integration.worker_support import Kubectl, Served, cpu_type, serving_worker

V1 = "instancetypes.v1.worker.gpustack.ai"
CRD = "instancetypes.v1alpha1.worker.gpustack.ai"


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def served(
    sandbox: Sandbox, kube: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Served]:
    async with serving_worker(
        sandbox, kube, tmp_path_factory.mktemp("aggregated-cache"), "cache-0"
    ) as served:
        yield served


async def instance_type_gets(served: Served) -> int:
    """GET requests the worker has sent for InstanceTypes (its own counter; watches count apart)."""
    pattern = re.compile(
        r'^gpustack_rest_client_requests_total\{code="\d+",method="GET",resource="instancetypes"\} (\S+)$'
    )
    text = await served.worker.metrics()
    return sum(int(float(m.group(1))) for line in text.splitlines() if (m := pattern.match(line)))


async def names(kubectl: Kubectl, resource: str, *selectors: str) -> list[str]:
    return (await kubectl.ok("get", resource, *selectors, "-o", "name")).split()


async def test_worker_list_and_get_right_after_a_create_see_it(
    kubectl: Kubectl, kube: Client, served: Served
) -> None:
    """Read-your-writes: a create through v1 holds the cache back until its informer has the object; a
    create straight to the CRD is not known to the proxy, so its GET misses the cache and asks the API."""
    run = uuid.uuid4().hex[:6]
    created = []
    try:
        for i in range(5):
            name = f"cache-{run}-{i}"
            await kubectl.ok("create", "-f", "-", stdin=json.dumps(cpu_type(name)))
            created.append(name)
            assert f"instancetype.worker.gpustack.ai/{name}" in await names(kubectl, V1)
            name = f"cache-{run}-crd-{i}"
            await kube.create(INSTANCE_TYPES, cpu_type(name, INSTANCE_TYPES.api_version))
            created.append(name)
            row = await kubectl.ok("get", V1, name, "--no-headers")
            assert row.split()[0] == name
        await eventually(lambda: listed_all(kubectl, created), timeout=30, what="the cache has every type")
        gets = await instance_type_gets(served)
        for name in created:
            assert (await kubectl.ok("get", V1, name, "--no-headers")).split()[0] == name
        assert await instance_type_gets(served) - gets < len(created)  # Table GETs come from the cache
    finally:
        for name in created:
            await kube.delete(INSTANCE_TYPES, name)


async def listed_all(kubectl: Kubectl, created: list[str]) -> bool:
    listed = set(await names(kubectl, V1))
    return all(f"instancetype.worker.gpustack.ai/{n}" in listed for n in created)


SELECTORS = (
    ("-l", "tier=gold"),
    ("-l", "tier==gold"),
    ("-l", "tier!=gold"),
    ("-l", "zone"),
    ("-l", "!zone"),
    ("-l", "tier in (gold,silver)"),
    ("-l", "tier notin (gold)"),
    ("-l", "tier=gold,zone=east"),
    ("-l", "example.com/team=ml"),
    ("-l", "tier>1"),  # not parsed by the cache: the API server answers
    ("--field-selector", "metadata.name={first}"),
    ("--field-selector", "metadata.name!={first}"),
)


async def test_worker_selectors_filter_as_the_crd_does(
    kubectl: Kubectl, kube: Client, served: Served
) -> None:
    run = uuid.uuid4().hex[:6]
    labelled = {
        f"sel-{run}-a": {"tier": "gold", "zone": "east"},
        f"sel-{run}-b": {"tier": "silver"},
        f"sel-{run}-c": {},
        f"sel-{run}-d": {"tier": "gold", "example.com/team": "ml"},
    }
    first = next(iter(labelled))
    try:
        for name, labels in labelled.items():
            doc = cpu_type(name, INSTANCE_TYPES.api_version)
            doc["metadata"]["labels"] = {"run": run, **labels}
            await kube.create(INSTANCE_TYPES, doc)
        await eventually(lambda: listed_all(kubectl, list(labelled)), timeout=30, what="the cache has them")
        gets = await instance_type_gets(served)
        cached = 0
        for flag, selector in SELECTORS:
            # Scoped to this test's objects: other tests' types may still be going away meanwhile.
            selector = selector.format(first=first)
            if flag == "-l":
                args: tuple[str, ...] = ("-l", f"run={run},{selector}")
            else:
                args = ("-l", f"run={run}", flag, selector)
            ours = await names(kubectl, V1, *args)
            theirs = await names(kubectl, CRD, *args)
            assert ours == theirs, (flag, selector)
            cached += selector != "tier>1"
        gold_or_silver = await names(kubectl, V1, "-l", f"run={run},tier in (gold,silver),!zone")
        assert gold_or_silver == [f"instancetype.worker.gpustack.ai/sel-{run}-{x}" for x in "bd"]
        # Each uncached list would have cost the worker a GET of its own.
        assert await instance_type_gets(served) - gets < cached
    finally:
        for name in labelled:
            await kube.delete(INSTANCE_TYPES, name)


async def test_worker_a_cached_list_version_resumes_a_watch(
    kubectl: Kubectl, kube: Client, served: Served
) -> None:
    """The cached list's resourceVersion is the informer's: a watch from it sees what came after."""
    raw = json.loads(await kubectl.ok("get", "--raw", "/apis/worker.gpustack.ai/v1/instancetypes"))
    version = raw["metadata"]["resourceVersion"]
    assert int(version) > 0
    name = f"cache-watch-{uuid.uuid4().hex[:6]}"
    await kube.create(INSTANCE_TYPES, cpu_type(name, INSTANCE_TYPES.api_version))
    try:
        path = (
            "/apis/worker.gpustack.ai/v1/instancetypes?watch=1&timeoutSeconds=3"
            f"&resourceVersion={version}&fieldSelector=metadata.name%3D{name}"
        )
        events = [json.loads(line) for line in (await kubectl.ok("get", "--raw", path)).splitlines()]
        assert events[0]["type"] == "ADDED"
        assert events[0]["object"]["metadata"]["name"] == name
        assert events[0]["object"]["apiVersion"] == "worker.gpustack.ai/v1"
    finally:
        await kube.delete(INSTANCE_TYPES, name)
