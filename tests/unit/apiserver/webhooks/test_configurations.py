"""The webhook configurations Prepare applies: contract §4's names, paths, rules and policies."""

from __future__ import annotations

import base64
import copy
from typing import Any

from gpustack_operator.apiserver.webhooks.kinds import worker_webhooks
from gpustack_operator.apiserver.webhooks.lookup import Lookups
from gpustack_operator.apiserver.webhooks.server import configurations, drifted


def bodies(ca: bytes | None = b"CA PEM") -> dict[str, dict[str, Any]]:
    hooks = worker_webhooks(Lookups(None, "gpustack-system"), "gpustack-system")  # type: ignore[arg-type]
    return {b["kind"]: b for b in configurations(hooks, "gpustack-system", "gpustack-worker", 31443, ca)}


def by_name(kind: str) -> dict[str, dict[str, Any]]:
    return {w["name"]: w for w in bodies()[kind]["webhooks"]}


def test_configuration_names_sort_before_kueues() -> None:
    names = [b["metadata"]["name"] for b in bodies().values()]
    assert sorted(names) == ["gpustack-worker-mutation", "gpustack-worker-validation"]
    assert all(name < "kueue-mutating-webhook-configuration" for name in names)


def test_names_and_paths_follow_the_contract() -> None:
    paths = {
        name: hook["clientConfig"]["service"]["path"]
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for name, hook in by_name(kind).items()
    }
    assert paths == {
        "mutate.worker.gpustack.ai.v1alpha1.instancetype": "/mutate-worker-gpustack-ai-v1alpha1-instancetype",
        "validate.worker.gpustack.ai.v1alpha1.instancetype": (
            "/validate-worker-gpustack-ai-v1alpha1-instancetype"
        ),
        "mutate.worker.gpustack.ai.v1alpha1.instance": "/mutate-worker-gpustack-ai-v1alpha1-instance",
        "validate.worker.gpustack.ai.v1alpha1.instance": "/validate-worker-gpustack-ai-v1alpha1-instance",
        "gpustack-worker.mutate.core.v1.pod": "/gpustack-worker-mutate-core-v1-pod",
        "gpustack-worker.validate.core.v1.pod": "/gpustack-worker-validate-core-v1-pod",
        # beyond the contract: a queued Job's Pod template is folded too (Kueue charges the template)
        "gpustack-worker.mutate.batch.v1.job": "/gpustack-worker-mutate-batch-v1-job",
    }


def test_every_webhook_fails_closed_with_the_contract_policies() -> None:
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in bodies()[kind]["webhooks"]:
            assert hook["failurePolicy"] == "Fail"
            assert hook["sideEffects"] == "None"
            assert hook["matchPolicy"] == "Equivalent"
            assert hook["timeoutSeconds"] == 10
            assert hook["admissionReviewVersions"] == ["v1"]
            service = hook["clientConfig"]["service"]
            assert (service["namespace"], service["name"], service["port"]) == (
                "gpustack-system",
                "gpustack-worker",
                31443,
            )
            assert base64.b64decode(hook["clientConfig"]["caBundle"]) == b"CA PEM"


def test_pods_are_reviewed_on_create_only_and_only_when_queued() -> None:
    pod = by_name("MutatingWebhookConfiguration")["gpustack-worker.mutate.core.v1.pod"]
    assert pod["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods"],
            "scope": "Namespaced",
            "operations": ["CREATE"],
        }
    ]
    assert pod["objectSelector"] == {
        "matchExpressions": [{"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}]
    }
    it = by_name("ValidatingWebhookConfiguration")["validate.worker.gpustack.ai.v1alpha1.instancetype"]
    assert (it["rules"][0]["scope"], it["rules"][0]["operations"]) == ("Cluster", ["CREATE", "UPDATE"])
    assert "objectSelector" not in it


def test_without_a_ca_the_bundle_is_left_to_the_system_roots() -> None:
    hooks = worker_webhooks(Lookups(None, "ns"), "ns")  # type: ignore[arg-type]
    for body in configurations(hooks, "ns", "svc", 443, None):
        assert all("caBundle" not in w["clientConfig"] for w in body["webhooks"])


def test_a_configuration_with_server_defaults_has_not_drifted_but_an_edit_or_deletion_has() -> None:
    desired = bodies()["MutatingWebhookConfiguration"]
    live = copy.deepcopy(desired)
    for hook in live["webhooks"]:
        hook.setdefault("namespaceSelector", {})  # what kube-apiserver adds
    assert not drifted(live, desired)
    assert drifted(None, desired)
    edited = copy.deepcopy(live)
    edited["webhooks"][0]["failurePolicy"] = "Ignore"
    assert drifted(edited, desired)
    fewer = copy.deepcopy(live)
    fewer["webhooks"].pop()
    assert drifted(fewer, desired)
