"""With the worker stopped, its webhooks fail closed where they apply and nowhere else.

A queued Pod (label `kueue.x-k8s.io/queue-name`) cannot be created while nothing answers our Pod
webhook (failurePolicy Fail: an unfolded slice would be admitted at the wrong size), and kube-apiserver
says which webhook it could not call; a Pod without the label is not selected, so it is created as usual.

Named `test_worker_*` to run with the other tests that start a real worker, after the chain tests.
"""

from __future__ import annotations

import json
import signal

import pytest

from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.sandbox.cluster import Sandbox
from gpustack_operator.sandbox.process import free_port
from tests.helpers import eventually
from tests.integration.test_worker_webhooks import MEM_PCT, SLICED, queued_pod
from tests.integration.worker_support import APISERVICE, Kubectl, ready, worker_pool


async def test_queued_pods_are_refused_while_the_worker_is_down_and_others_are_not(
    sandbox: Sandbox, kube: Client, kueue_namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    kubectl = Kubectl(sandbox)
    queued = queued_pod(kueue_namespace, "some-queue", {SLICED: "1", MEM_PCT: "25"})
    plain = queued_pod(kueue_namespace, "unused", {})
    del plain["metadata"]["labels"]
    async with worker_pool(sandbox, kube, tmp_path_factory.mktemp("webhooks-down")) as pool:
        worker = await pool.start("hooks-down", f"--secure-port={free_port()}")
        try:
            await eventually(lambda: ready(worker), timeout=180, what="worker ready (webhooks installed)")
            worker.signal(signal.SIGTERM)
            assert await worker.wait() == 0
            assert await kube.get_or_none(resources.MUTATING_WEBHOOKS, "gpustack-worker-mutation") is not None

            rc, _, err = await kubectl.run("create", "-f", "-", stdin=json.dumps(queued))
            assert rc != 0
            assert 'failed calling webhook "gpustack-worker.mutate.core.v1.pod"' in err
            assert not await kube.list(resources.PODS, kueue_namespace)

            await kubectl.ok("create", "-f", "-", stdin=json.dumps(plain))
            assert len(await kube.list(resources.PODS, kueue_namespace)) == 1
        finally:
            await kube.delete(resources.APISERVICES, APISERVICE)
