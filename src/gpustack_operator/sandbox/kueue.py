"""Kueue as a local process: the objects it needs in the cluster first, and its configuration file.

Kueue's own cert rotator issues the webhook serving cert for `kueue-webhook-service.kueue-system.svc` and
injects the CA into the webhook configurations and conversion CRDs; it blocks until all of them exist. The
apiserver reaches the webhooks through an ExternalName Service pointing at localhost, with the real local
port in each clientConfig, so nothing ever dials a cluster IP. Manifests come from the Kueue module in the Go
module cache, never from copies in this repository.
"""

from __future__ import annotations

import base64
import copy
from pathlib import Path

import yaml

from gpustack_operator.api.json import JSONObj
from gpustack_operator.rules.capacity.kueueconfig import (
    FRAMEWORKS,
    MANAGER_CONFIG_KEY,
    MANAGER_CONFIG_MAP,
    RELEASE_TUNING,
    Tuning,
    manager_configuration,
)

NAMESPACE = "kueue-system"
WEBHOOK_SERVICE = "kueue-webhook-service"
WEBHOOK_SECRET = "kueue-webhook-server-cert"

CONVERSION_CRDS = ("localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters")
# The stock kustomization keeps Kueue's pod/deployment/statefulset webhooks out of these namespaces.
EXCLUDED_NAMESPACE_WEBHOOKS = (
    "mpod.kb.io",
    "mdeployment.kb.io",
    "mstatefulset.kb.io",
    "vpod.kb.io",
    "vdeployment.kb.io",
    "vstatefulset.kb.io",
)


def _load_all(path: Path) -> list[JSONObj]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def crds(module: Path, webhook_port: int) -> list[JSONObj]:
    """Every Kueue CRD, with the conversion webhook stanza where upstream patches one in."""
    out: list[JSONObj] = []
    for path in sorted((module / "config/components/crd/bases").glob("kueue.x-k8s.io_*.yaml")):
        for crd in _load_all(path):
            plural = crd["spec"]["names"]["plural"]
            if plural in CONVERSION_CRDS:
                crd["spec"]["conversion"] = {
                    "strategy": "Webhook",
                    "webhook": {
                        "clientConfig": {
                            "service": {
                                "name": WEBHOOK_SERVICE,
                                "namespace": NAMESPACE,
                                "path": "/convert",
                                "port": webhook_port,
                            }
                        },
                        "conversionReviewVersions": ["v1"],
                    },
                }
            out.append(crd)
    return out


def webhook_configurations(module: Path, webhook_port: int) -> list[JSONObj]:
    """Kueue's Mutating/ValidatingWebhookConfigurations, renamed and routed to the local webhook port."""
    out: list[JSONObj] = []
    for doc in _load_all(module / "config/components/webhook/manifests.yaml"):
        doc = copy.deepcopy(doc)
        kind = "mutating" if doc["kind"] == "MutatingWebhookConfiguration" else "validating"
        doc["metadata"] = {"name": f"kueue-{kind}-webhook-configuration"}
        for hook in doc["webhooks"]:
            service = hook["clientConfig"]["service"]
            service.update(name=WEBHOOK_SERVICE, namespace=NAMESPACE, port=webhook_port)
            if hook["name"] in EXCLUDED_NAMESPACE_WEBHOOKS:
                hook["namespaceSelector"] = {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": ["kube-system", NAMESPACE],
                        }
                    ]
                }
        out.append(doc)
    return out


def support_objects() -> list[JSONObj]:
    """Namespace, the empty cert Secret the rotator fills, and the ExternalName route to localhost."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": WEBHOOK_SECRET, "namespace": NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": WEBHOOK_SERVICE, "namespace": NAMESPACE},
            "spec": {"type": "ExternalName", "externalName": "localhost"},
        },
    ]


def configuration(
    webhook_port: int,
    health_port: int,
    cert_dir: Path,
    frameworks: tuple[str, ...] = FRAMEWORKS,
    tuning: Tuning = RELEASE_TUNING,
) -> JSONObj:
    """Kueue's Configuration for a single local replica: ours (rules.capacity.kueueconfig, what a Helm
    install gives the Kueue subchart too) plus the local ports, certificate directory and namespace."""
    return {
        **manager_configuration(frameworks=frameworks, tuning=tuning),
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": WEBHOOK_SERVICE,
            "webhookSecretName": WEBHOOK_SECRET,
        },
        # The visibility API would write certs to a hard-coded /visibility and needs its own APIService.
        "featureGates": {"VisibilityOnDemand": False},
    }


def manager_config_map(config_text: str) -> JSONObj:
    """The ConfigMap a Helm or kustomize install of Kueue runs from (`kueue-manager-config`), holding the
    configuration file the local Kueue reads: the worker inspects it the way it would in a cluster."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": MANAGER_CONFIG_MAP, "namespace": NAMESPACE},
        "data": {MANAGER_CONFIG_KEY: config_text},
    }


def write_cert_dir(cert_dir: Path, secret_data: dict[str, str]) -> None:
    """Write the Secret's base64 data keys as files, the way a mounted Secret volume presents them."""
    cert_dir.mkdir(parents=True, exist_ok=True)
    for key, value in secret_data.items():
        target = cert_dir / key
        target.write_bytes(base64.b64decode(value))
        target.chmod(0o600)
