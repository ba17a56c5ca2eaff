"""kwok's configuration: which stages animate the fake nodes and pods.

kwok takes the stock "fast" node and pod stages from its own module, heartbeats nodes through Leases (so the
node-lifecycle controller sees them alive), and one stage of ours that finishes a plain Pod on request: the
stock completion stage only handles Job-owned pods, and tests need to free Kueue quota held by a Pod.
A pod that asks for an extended resource starts only once the node's kubelet stand-in has admitted it (run
the device plugin's Allocate), as a real kubelet admits a pod before its containers start.

Every container of every fake Pod has one log: the file `ClusterLogs` names (kwok reads it in the CRI
format a container runtime writes, and serves it on the kubelet's `/containerLogs`, so `kubectl logs` and
anything reading `pods/log` get real lines through kube-apiserver). The sandbox starts it with one line;
`append_container_log` adds more (a test's marker). Followed logs see new lines as they are written.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

MANAGED_ANNOTATION = "kwok.x-k8s.io/node"
# Set this annotation to "true" on a Running pod to make it Succeed (frees its Kueue quota).
COMPLETE_ANNOTATION = "sandbox.gpustack.ai/complete"
# The kubelet stand-in sets this to "true" once a pod passed admission (device plugin Allocate included).
ADMITTED_ANNOTATION = "sandbox.gpustack.ai/admitted"
ADMISSION_GATE = (
    "([(.spec.initContainers // [])[], (.spec.containers // [])[] | (.resources.limits // {}) | keys[]"
    ' | select(contains("/"))] | length == 0)'
    f' or (.metadata.annotations["{ADMITTED_ANNOTATION}"] == "true")'
)
"""jq: true for a pod without extended resources, or one the stand-in admitted."""
CONTAINER_LOG = "container.log"
STARTED = "kwok: fake container started (sandbox)"
"""The log's first line."""
STAGE_FILES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)


def _complete_on_request() -> dict[str, Any]:
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "pod-complete-on-request"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                    {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                    {
                        "key": f'.metadata.annotations["{COMPLETE_ANNOTATION}"]',
                        "operator": "In",
                        "values": ["true"],
                    },
                ]
            },
            "next": {"statusTemplate": "phase: Succeeded\n"},
        },
    }


def _cluster_logs(log_file: Path) -> dict[str, Any]:
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "ClusterLogs",
        "metadata": {"name": "every-container"},
        "spec": {"selector": {}, "logs": [{"logsFile": str(log_file), "follow": True}]},
    }


def cri_line(text: str, when: datetime | None = None, stream: str = "stdout") -> str:
    """One full line of a container's log as a CRI runtime writes it (`<RFC 3339> stdout F <text>`)."""
    stamp = (when or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return f"{stamp} {stream} F {text}\n"


def start_container_log(path: Path) -> None:
    """The fake containers' log with its first line, unless it is there already (a restarted sandbox)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(cri_line(STARTED))


def append_container_log(path: Path, text: str) -> None:
    """Add a line to every fake container's log."""
    with path.open("a") as sink:
        sink.write(cri_line(text))


def configuration(module: Path, log_file: Path, node_lease_seconds: int = 40) -> str:
    """The multi-document YAML kwok reads with --config."""
    docs: list[Any] = [
        {
            "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
            "kind": "KwokConfiguration",
            "options": {
                "nodeLeaseDurationSeconds": node_lease_seconds,
                "nodeLeaseParallelism": 4,
                "nodePlayStageParallelism": 4,
                "podPlayStageParallelism": 4,
                "podsOnNodeSyncParallelism": 4,
                "enablePodsOnNodeSyncStreamWatch": True,
                # The kubelet API's log, exec, attach and port-forward endpoints (off unless set here);
                # only logs are configured, so the others answer that nothing is.
                "enableDebuggingHandlers": True,
            },
        }
    ]
    for rel in STAGE_FILES:
        docs.extend(d for d in yaml.safe_load_all((module / rel).read_text()) if d)
    for doc in docs:
        if doc.get("kind") == "Stage" and doc["metadata"]["name"] == "pod-ready":
            gate = {"key": ADMISSION_GATE, "operator": "In", "values": ["true"]}
            doc["spec"]["selector"]["matchExpressions"].append(gate)
    docs.append(_complete_on_request())
    docs.append(_cluster_logs(log_file))
    return yaml.safe_dump_all(docs, sort_keys=False)
