"""A serving CA rotated in `--cert-dir` (as cert-manager does) while the worker runs: it loads the new
certificate, re-applies its APIServices and webhook configurations with the new bundle, and
kube-apiserver keeps routing to it, with no restart.

Its own worker (and so its own module): the rotation would pull the CA from under other tests' worker.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from gpustack_operator.apiserver.webhooks.server import MUTATING_CONFIGURATION
from gpustack_operator.certs import pki
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.errors import KubeError
from gpustack_operator.kube.resources import INSTANCE_TYPES
from gpustack_operator.sandbox.cluster import Sandbox
from gpustack_operator.settings.environment import DEFAULT_SERVICE_NAME
from tests.helpers import eventually
from tests.integration.worker_support import APISERVICE, SETTINGS_APISERVICE, Served, cpu_type, serving_worker


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def rotation(
    sandbox: Sandbox, kube: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Served, Path]]:
    log_dir = tmp_path_factory.mktemp("ca-rotation")
    async with serving_worker(sandbox, kube, log_dir, "rotate-0") as served:
        yield served, log_dir


async def test_a_rotated_ca_is_re_registered_and_kube_apiserver_keeps_routing(
    kube: Client, rotation: tuple[Served, Path]
) -> None:
    served, log_dir = rotation
    cert_dir = log_dir / "tls"
    before = (await kube.get(resources.APISERVICES, APISERVICE))["spec"]["caBundle"]
    assert base64.b64decode(before) == (cert_dir / "ca.crt").read_bytes()

    new_ca = pki.new_ca(f"rotated-{uuid.uuid4().hex[:6]}")
    hosts = pki.service_hosts(DEFAULT_SERVICE_NAME, served.namespace)
    pki.issue(new_ca, hosts[0], hosts=hosts, server=True).write(cert_dir, "tls")
    (cert_dir / "ca.crt").write_bytes(new_ca.cert_pem)
    wanted = base64.b64encode(new_ca.cert_pem).decode()

    async def re_registered() -> bool:
        bundles = [
            (await kube.get(resources.APISERVICES, name))["spec"].get("caBundle")
            for name in (APISERVICE, SETTINGS_APISERVICE)
        ]
        hooks = await kube.get(resources.MUTATING_WEBHOOKS, MUTATING_CONFIGURATION)
        bundles += [hook["clientConfig"].get("caBundle") for hook in hooks["webhooks"]]
        return all(bundle == wanted for bundle in bundles)

    await eventually(re_registered, timeout=60, what="APIServices and webhooks carrying the new CA")

    async def routed() -> bool:
        try:
            listed = await kube.request("GET", "/apis/worker.gpustack.ai/v1/instancetypes", retries=0)
        except KubeError:
            return False
        return listed.get("apiVersion") == "worker.gpustack.ai/v1"

    # kube-apiserver now verifies the worker's new certificate against the new bundle
    await eventually(routed, timeout=60, what="v1 answered through kube-apiserver after the rotation")
    # and a webhook call (CREATE of an InstanceType is mutated by the worker) goes through too
    name = f"rot-{uuid.uuid4().hex[:6]}"
    created = await kube.create(INSTANCE_TYPES, cpu_type(name, INSTANCE_TYPES.api_version))
    try:
        assert created["metadata"]["labels"]  # the mutating webhook labelled it
    finally:
        await kube.delete(INSTANCE_TYPES, name)
