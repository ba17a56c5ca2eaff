"""Addresses of the kinds we touch: group, version, plural and scope, and the URL paths built from them.

We work on plain JSON for every kind (core, our CRDs, Kueue v1beta2, NFD v1alpha1), so a kind is just where
it lives on the server.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from gpustack_operator.api.types import kueue


@dataclass(frozen=True)
class Resource:
    """A served resource: `group` is "" for the core group."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, name: str | None = None, namespace: str | None = None, subresource: str | None = None
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        return base


NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
JOBS = Resource("batch", "v1", "jobs", "Job", namespaced=True)
SERVICES = Resource("", "v1", "services", "Service", namespaced=True)
SECRETS = Resource("", "v1", "secrets", "Secret", namespaced=True)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
STORAGE_CLASSES = Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False)
PERSISTENT_VOLUME_CLAIMS = Resource(
    "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", namespaced=True
)
SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True)
RUNTIME_CLASSES = Resource("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", namespaced=False)
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False
)
APISERVICES = Resource("apiregistration.k8s.io", "v1", "apiservices", "APIService", namespaced=False)
MUTATING_WEBHOOKS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    namespaced=False,
)
VALIDATING_WEBHOOKS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
EVENTS = Resource("events.k8s.io", "v1", "events", "Event", namespaced=True)
CORE_EVENTS = Resource("", "v1", "events", "Event", namespaced=True)
"""The Events of `EVENTS`, read in core/v1's shape (`involvedObject`, `lastTimestamp`) as kubectl does."""
POD_METRICS = Resource("metrics.k8s.io", "v1beta1", "pods", "PodMetrics", namespaced=True)
"""A Pod's container usage, served by metrics-server (or another metrics.k8s.io API) when installed."""
ROLEBINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", namespaced=True)
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False)
TOKEN_REVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False)
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False
)

KUEUE_GROUP = kueue.GROUP
_KUEUE = kueue.VERSION
"""v1beta2: what Kueue v0.17 stores and prefers (api.types.kueue)."""
RESOURCE_FLAVORS = Resource(KUEUE_GROUP, _KUEUE, "resourceflavors", "ResourceFlavor", namespaced=False)
CLUSTER_QUEUES = Resource(KUEUE_GROUP, _KUEUE, "clusterqueues", "ClusterQueue", namespaced=False)
LOCAL_QUEUES = Resource(KUEUE_GROUP, _KUEUE, "localqueues", "LocalQueue", namespaced=True)
WORKLOADS = Resource(KUEUE_GROUP, _KUEUE, "workloads", "Workload", namespaced=True)
ADMISSION_CHECKS = Resource(KUEUE_GROUP, _KUEUE, "admissionchecks", "AdmissionCheck", namespaced=False)

NODE_FEATURES = Resource("nfd.k8s-sigs.io", "v1alpha1", "nodefeatures", "NodeFeature", namespaced=True)
NODE_FEATURE_RULES = Resource(
    "nfd.k8s-sigs.io", "v1alpha1", "nodefeaturerules", "NodeFeatureRule", namespaced=False
)

DEVICES = Resource("worker.gpustack.ai", "v1alpha1", "devices", "Devices", namespaced=False)
"""Our per-node inventory and ledger (stored version of the CRD)."""
INSTANCE_TYPES = Resource("worker.gpustack.ai", "v1alpha1", "instancetypes", "InstanceType", namespaced=False)
"""One schedulable hardware pool, backed 1:1 by the ClusterQueue of its name (stored version of the CRD)."""
INSTANCES = Resource("worker.gpustack.ai", "v1alpha1", "instances", "Instance", namespaced=True)
"""A user's GPU workspace: one Pod rendered from an InstanceType (stored version of the CRD)."""

CORE_AND_EXTENSIONS: tuple[Resource, ...] = (
    NAMESPACES,
    NODES,
    PODS,
    SERVICES,
    SECRETS,
    CONFIGMAPS,
    SERVICEACCOUNTS,
    RUNTIME_CLASSES,
    CRDS,
    APISERVICES,
    MUTATING_WEBHOOKS,
    VALIDATING_WEBHOOKS,
    LEASES,
    EVENTS,
    ROLEBINDINGS,
    CLUSTER_ROLES,
    RESOURCE_FLAVORS,
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    WORKLOADS,
    ADMISSION_CHECKS,
    NODE_FEATURES,
    NODE_FEATURE_RULES,
    DEVICES,
    INSTANCE_TYPES,
)


def for_kind(api_version: str, kind: str) -> Resource:
    """The Resource of a well-known apiVersion/kind (used to apply manifests read from files)."""
    for res in CORE_AND_EXTENSIONS:
        if res.api_version == api_version and res.kind == kind:
            return res
    raise KeyError(f"unknown kind {kind} in {api_version}")
