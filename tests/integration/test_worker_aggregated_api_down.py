"""Checklist row 27: with the worker gone, v1 is ServiceUnavailable and the CRD's v1alpha1 still works.

Named `test_worker_*` to run with the other tests that start a real worker, after the chain tests: a
worker derives the inventory's pools (flavors, queues, types), and those outlive it.
"""

from __future__ import annotations

import signal
import uuid

import pytest

from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.conditions import is_true
from gpustack_operator.kube.resources import INSTANCE_TYPES
from gpustack_operator.sandbox.cluster import Sandbox
from gpustack_operator.sandbox.process import free_port
from tests.helpers import eventually
from tests.integration.worker_support import APISERVICE, Kubectl, cpu_type, ready, worker_pool


async def test_row27_v1_unavailable_without_the_worker_and_the_crd_keeps_working(
    sandbox: Sandbox, kube: Client, tmp_path_factory: pytest.TempPathFactory
) -> None:
    kubectl = Kubectl(sandbox)
    name = f"agg-down-{uuid.uuid4().hex[:6]}"
    async with worker_pool(sandbox, kube, tmp_path_factory.mktemp("aggregated-api-down")) as pool:
        # without webhooks: they fail closed, and this test writes an InstanceType once the worker is gone
        worker = await pool.start("api-down", f"--secure-port={free_port()}", "--no-webhooks")
        try:
            await eventually(lambda: ready(worker), timeout=180, what="worker ready (APIService Available)")
            worker.signal(signal.SIGTERM)
            assert await worker.wait() == 0
            # created once the worker is gone, so no finalizer of its controllers holds the object
            await kube.create(INSTANCE_TYPES, cpu_type(name, INSTANCE_TYPES.api_version))

            async def unavailable() -> bool:
                return not is_true(await kube.get(resources.APISERVICES, APISERVICE), "Available")

            await eventually(unavailable, timeout=90, what="the APIService reported unavailable")
            rc, _, err = await kubectl.run(
                "get", "--raw", f"/apis/worker.gpustack.ai/v1/instancetypes/{name}"
            )
            assert rc != 0
            assert "the server is currently unable to handle the request" in err
            # fresh discovery leaves the unavailable v1 out, so the short form falls back to the CRD's
            # version (a kubectl whose disk cache still lists v1 gets the ServiceUnavailable above instead)
            fresh = f"--cache-dir={tmp_path_factory.mktemp('kubectl-cache')}"
            plain = await kubectl.ok("get", "instancetypes", name, fresh)
            assert plain.splitlines()[1].split()[0] == name
            out = await kubectl.ok("get", "instancetypes.v1alpha1.worker.gpustack.ai", name, "-o", "name")
            assert out.split() == [f"instancetype.worker.gpustack.ai/{name}"]
        finally:
            await kube.delete(resources.APISERVICES, APISERVICE)
            await kube.delete(INSTANCE_TYPES, name)
