"""The chart on the sandbox: `helm install`, the worker under the chart's ServiceAccount and generated RBAC,
two end-to-end Instance scenarios, the Kueue check, then `helm upgrade` and `helm uninstall`.

What runs is what a cluster runs (chart_support): the chart's objects accepted by kube-apiserver (kwok
stands in for its Pods), the worker on the in-cluster transport with a TokenRequest token of the chart's
ServiceAccount, so every request it makes is authorised by the chart's RBAC alone. The Instance scenarios
are test_worker_instances' own (imported, so they run here against this module's `served`): an Instance
created through the aggregated API and the webhooks, queued and admitted by real Kueue through the per-card
check, bound, allocated by the device plugin, its cards in its status. Named `test_chart_*` so it runs
before the other modules that start workers; it puts back what it removes.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml
from prometheus_client.parser import text_string_to_metric_families

from gpustack_operator.api.keys import NODE_DEVICES_ADMISSION_CHECK
from gpustack_operator.controllerkit.rbac import Rule
from gpustack_operator.install.chart import CHART_DIR
from gpustack_operator.install.kueue import kueue_configuration
from gpustack_operator.install.rbac import worker_rbac
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import NODE_FEATURES
from gpustack_operator.rules.capacity.kueueconfig import MANAGER_CONFIG_KEY, MANAGER_CONFIG_MAP
from gpustack_operator.sandbox.build import K8S_VERSION
from gpustack_operator.sandbox.cluster import Sandbox
from gpustack_operator.worker.prerequisites import CONDITION
from tests.helpers import eventually
from tests.integration.chart_support import (
    NAMESPACE,
    RELEASE,
    WORKER,
    helm,
    installed_worker,
    pod_environment,
    value_args,
)
from tests.integration.test_admission_check import h100_in_service
from tests.integration.test_worker_instances import (  # noqa: F401 (collected here, run on this `served`)
    space,
    test_1_a_two_card_instance_runs_in_its_queue_and_shows_its_cards,
    test_2_a_sliced_instance_runs_on_a_slice_the_ledger_shows,
)
from tests.integration.worker_support import (
    APISERVICE,
    EXECUTABLE,
    SETTINGS_APISERVICE,
    WEBHOOK_CONFIGURATIONS,
    Served,
)

KUEUE_NAMESPACE = "kueue-system"
NETWORK_POLICIES = resources.Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True)


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def served(
    sandbox: Sandbox, kube: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Served]:
    async with installed_worker(sandbox, kube, tmp_path_factory.mktemp("chart"), "chart-0") as served:
        await h100_in_service(kube)
        yield served
    # test_z uninstalls; when it did not run (or failed first), do it here so no chart object stays
    if await kube.get_or_none(resources.CLUSTER_ROLES, WORKER) is not None:
        await helm(sandbox, "uninstall", RELEASE, "--namespace", NAMESPACE, "--wait")


async def test_helm_hands_the_kueue_subchart_exactly_the_configuration_the_sandbox_runs(
    sandbox: Sandbox,
) -> None:
    """Rendered with the subchart on, Kueue's ConfigMap holds install.kueue's Configuration (the one the
    sandbox's Kueue runs, but for where it listens) plus only what Kueue's chart adds itself."""
    rendered = await helm(
        sandbox, "template", RELEASE, CHART_DIR, "--namespace", NAMESPACE, f"--kube-version={K8S_VERSION}"
    )
    maps = [
        doc
        for doc in yaml.safe_load_all(rendered)
        if doc and doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == MANAGER_CONFIG_MAP
    ]
    assert len(maps) == 1, [m["metadata"] for m in maps]
    config = yaml.safe_load(maps[0]["data"][MANAGER_CONFIG_KEY])
    added = config.pop("internalCertManagement")
    assert added == {
        "enable": True,
        "webhookServiceName": "kueue-webhook-service",
        "webhookSecretName": "kueue-webhook-server-cert",
    }
    assert config == kueue_configuration()


def _owners(obj: dict[str, object] | None) -> list[str]:
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []  # type: ignore[attr-defined]
    return [f"{ref['kind']}/{ref['name']}" for ref in refs]


async def test_the_api_services_and_webhooks_belong_to_the_chart_and_the_check_does_not(
    kube: Client, served: Served
) -> None:
    for res, name in (
        (resources.APISERVICES, APISERVICE),
        (resources.APISERVICES, SETTINGS_APISERVICE),
        *WEBHOOK_CONFIGURATIONS,
    ):
        assert _owners(await kube.get(res, name)) == [f"ClusterRole/{WORKER}"], name
    assert _owners(await kube.get(resources.ADMISSION_CHECKS, NODE_DEVICES_ADMISSION_CHECK)) == []


async def _condition(kube: Client) -> dict[str, str] | None:
    check = await kube.get(resources.ADMISSION_CHECKS, NODE_DEVICES_ADMISSION_CHECK)
    found = [c for c in (check.get("status") or {}).get("conditions") or [] if c["type"] == CONDITION]
    return found[0] if found else None


async def test_a_kueue_without_our_transformations_is_said_within_30_seconds(
    kube: Client, served: Served
) -> None:
    async def configured() -> bool:
        condition = await _condition(kube)
        return condition is not None and condition["status"] == "True"

    await eventually(configured, timeout=60, what=f"{CONDITION}=True (the sandbox runs our configuration)")
    original = await kube.get(resources.CONFIGMAPS, MANAGER_CONFIG_MAP, KUEUE_NAMESPACE)
    stock = yaml.safe_load(original["data"][MANAGER_CONFIG_KEY])
    stock.pop("resources")
    patch = {"data": {MANAGER_CONFIG_KEY: yaml.safe_dump(stock)}}
    await kube.patch(resources.CONFIGMAPS, MANAGER_CONFIG_MAP, patch, namespace=KUEUE_NAMESPACE)
    try:

        async def said() -> dict[str, str] | None:
            condition = await _condition(kube)
            return condition if condition is not None and condition["status"] == "False" else None

        condition = await eventually(said, timeout=30, what=f"{CONDITION}=False within 30 s")
        assert condition["reason"] == "KueueMisconfigured"
        assert "resources.transformations lacks" in condition["message"]
        events = await kube.list(resources.EVENTS, NAMESPACE)
        assert any(e.get("reason") == "KueueMisconfigured" for e in events), events
        _, readyz = await served.worker.get(served.worker.health_port, "/readyz?verbose")
        assert "[!]kueue-configuration: Kueue's configuration" in readyz
    finally:
        restore = {"data": {MANAGER_CONFIG_KEY: original["data"][MANAGER_CONFIG_KEY]}}
        await kube.patch(resources.CONFIGMAPS, MANAGER_CONFIG_MAP, restore, namespace=KUEUE_NAMESPACE)
    await eventually(configured, timeout=30, what=f"{CONDITION}=True again once Kueue's ConfigMap is fixed")


_VERBS = {
    "GET": ("get", "list"),
    "WATCH": ("watch",),
    "POST": ("create",),
    "PUT": ("update",),
    "PATCH": ("patch",),
    "DELETE": ("delete", "deletecollection"),
}


def requests_made(metrics_text: str) -> dict[tuple[str, str, str], float]:
    """(method, resource, code) -> count, from the worker's request counter."""
    return {
        (s.labels["method"], s.labels["resource"], s.labels["code"]): s.value
        for family in text_string_to_metric_families(metrics_text)
        if family.name == "gpustack_rest_client_requests"
        for s in family.samples
        if s.name.endswith("_total")
    }


def _label(rule: Rule) -> str:
    where = "cluster-wide" if rule.namespace is None else f"in {rule.namespace}"
    return f"{rule.group or 'core'}/{rule.resource} [{' '.join(rule.sorted_verbs)}] {where}"


async def test_x_a_device_manager_under_the_chart_s_account_reports_its_node(
    sandbox: Sandbox, kube: Client, served: Served, tmp_path: Path
) -> None:
    """The device manager's reporting (its node, NodeFeature and Devices, the ledger rebuilt from the Pods)
    under the chart's device-manager ServiceAccount, on the in-cluster transport: one reading of the
    sandbox's simulated h100-0 (the node's running device manager reports the same)."""
    env = await pod_environment(
        kube, sandbox, tmp_path / "serviceaccount", f"{RELEASE}-device-manager", NAMESPACE
    )
    proc = await asyncio.create_subprocess_exec(
        str(EXECUTABLE),
        "device-manager",
        "monitor",
        "--backend=simulated",
        f"--inventory={sandbox.inventory_file}",
        "--node-name=h100-0",
        "--count=1",
        "--period=1",
        "--report",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**{k: v for k, v in os.environ.items() if k != "KUBECONFIG"}, **env},
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    text = out.decode(errors="replace")
    assert proc.returncode == 0, text
    assert "Forbidden" not in text, text
    features = await kube.list(NODE_FEATURES, NAMESPACE)
    assert [f["metadata"]["name"] for f in features], "no NodeFeature reported in the release namespace"
    for feature in features:  # the node's own device manager reports in gpustack-system; one is enough
        await kube.delete(NODE_FEATURES, feature["metadata"]["name"], NAMESPACE)


async def test_y_no_request_of_the_worker_was_forbidden_and_each_rule_shows_what_it_served(
    served: Served,
) -> None:
    """Every request the worker made through the scenarios above, under the chart's RBAC alone, was
    authorised (a 403 would be a verb the code calls that the chart does not grant). The table printed
    is what each generated rule served: the requests that dropping it would have refused."""
    made = requests_made(await served.worker.metrics())
    assert made, "the worker's request counter is empty"
    forbidden = {key: n for key, n in made.items() if key[2] == "403"}
    assert not forbidden, f"refused by the chart's RBAC: {forbidden}"
    rbac = worker_rbac()
    granted = [*rbac.rules, *(rule for role in rbac.built_in for rule in role.rules)]
    served_by: dict[str, list[str]] = {}
    for (method, resource, code), count in sorted(made.items()):
        rules = [r for r in granted if r.resource == resource and set(_VERBS[method]) & r.verbs]
        assert rules, f"{method} {resource} ({code}) was made but no generated rule grants it"
        for rule in rules:
            served_by.setdefault(_label(rule), []).append(f"{method} {resource} {code} x{count:g}")
    print("\nWhat each generated rule of the worker served in this module:")
    for rule in granted:
        print(f"  {_label(rule)}: {', '.join(served_by.get(_label(rule), [])) or 'not exercised here'}")


async def test_z_upgrade_then_uninstall_leaves_only_what_the_readme_says(
    sandbox: Sandbox, kube: Client, served: Served
) -> None:
    served.worker.signal(signal.SIGTERM)
    assert await served.worker.wait() == 0, served.worker.tail()
    await helm(
        sandbox,
        "upgrade",
        RELEASE,
        CHART_DIR,
        "--namespace",
        NAMESPACE,
        "--reuse-values",
        *value_args("worker.logLevel=debug", "deviceManager.networkPolicy.enabled=true"),
    )
    policies = await kube.list(NETWORK_POLICIES, NAMESPACE)
    assert policies, "the upgrade's NetworkPolicies were not created"
    await helm(sandbox, "uninstall", RELEASE, "--namespace", NAMESPACE, "--wait")

    async def collected() -> bool:
        left = [
            name
            for res, name in (
                (resources.APISERVICES, APISERVICE),
                (resources.APISERVICES, SETTINGS_APISERVICE),
                *WEBHOOK_CONFIGURATIONS,
                (resources.CLUSTER_ROLES, WORKER),
                (resources.CLUSTER_ROLES, f"{RELEASE}-device-manager"),
            )
            if await kube.get_or_none(res, name) is not None
        ]
        assert not left, f"still there: {left}"
        return True

    await eventually(collected, timeout=60, what="the chart's cluster-scoped objects garbage-collected")
    # What the README says survives: the CRDs and the AdmissionCheck the worker's ClusterQueues name
    assert await kube.get_or_none(resources.ADMISSION_CHECKS, NODE_DEVICES_ADMISSION_CHECK) is not None
    assert await kube.get_or_none(resources.CRDS, "instancetypes.worker.gpustack.ai") is not None
