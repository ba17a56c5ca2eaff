"""`instances.worker.gpustack.ai/v1`: the namespaced v1alpha1 Instance CRD served as v1 (contract §2.1).

A cast like InstanceType's: every verb and the status subresource go to the CRD
(registry/generic/crdproxy.py), so the Instance webhooks and the InstanceReconciler see v1 writes exactly as
v1alpha1 ones. The columns are the CRD's own printer columns (api/crds.py), so `kubectl get instances` reads
the same in both versions; `kubectl get instances -A` adds NAMESPACE from each row's object. Reads are not
cached: the worker holds no informer of every namespace's Instances for this. The read-only subresources
`log`, `events` and `metrics` are the Instance's own (instancelog.py, instanceevents.py,
instancemetrics.py), served beside the proxy: each user is authorized on `instances/<sub>` by the same
SubjectAccessReview as every request, then the worker reads the Pod, its log, the Events and the
PodMetrics with its own credentials (the rules below).
"""

from __future__ import annotations

from aiohttp import web

from gpustack_operator.api.crds import INSTANCE_COLUMNS
from gpustack_operator.api.keys import CATEGORY, KIND_INSTANCE, PLURAL_INSTANCES, V1, WORKER_GROUP
from gpustack_operator.api.schema.instance import INSTANCE
from gpustack_operator.apiserver.discovery import ServedResource
from gpustack_operator.apiserver.registry.generic.crdproxy import (
    STATUS_SUBRESOURCE,
    VERBS,
    CRDProxy,
    proxy_rules,
)
from gpustack_operator.apiserver.registry.instanceevents import EVENTS, InstanceEvents
from gpustack_operator.apiserver.registry.instancelog import LOG, InstanceLog
from gpustack_operator.apiserver.registry.instancemetrics import METRICS, InstanceMetrics
from gpustack_operator.apiserver.served import Backends, Resource
from gpustack_operator.apiserver.table import NAME, printer_column
from gpustack_operator.controllerkit.rbac import Rule
from gpustack_operator.conversion.apiversion import WORKER
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import CORE_EVENTS, POD_METRICS, PODS
from gpustack_operator.kube.resources import INSTANCES as STORED

__all__ = ["COLUMNS", "RESOURCE", "SCHEMA", "SERVED", "proxy"]

SERVED = ServedResource(
    group=WORKER_GROUP,
    version=V1,
    plural=PLURAL_INSTANCES,
    singular="instance",
    kind=KIND_INSTANCE,
    namespaced=True,
    verbs=VERBS,
    short_names=("inst",),
    categories=(CATEGORY,),
    subresources=STATUS_SUBRESOURCE,
    readers=(LOG, EVENTS, METRICS),
)
SCHEMA = INSTANCE.openapi_schema()
COLUMNS = (NAME, *(printer_column(c) for c in INSTANCE_COLUMNS))


def proxy(client: Client) -> CRDProxy:
    return CRDProxy(client, SERVED, STORED, WORKER, COLUMNS)


class InstanceRoutes:
    """The proxy's routes and the read-only subresources' under the same item path."""

    def __init__(self, client: Client) -> None:
        self.proxy = proxy(client)
        self.readers = {
            LOG.name: InstanceLog(client).get,
            EVENTS.name: InstanceEvents(client).get,
            METRICS.name: InstanceMetrics(client).get,
        }

    def add_routes(self, router: web.UrlDispatcher) -> None:
        self.proxy.add_routes(router)
        item = f"/apis/{SERVED.group}/{SERVED.version}/namespaces/{{namespace}}/{SERVED.plural}/{{name}}"
        for name, handler in self.readers.items():
            router.add_get(f"{item}/{name}", handler)


def _storage(backends: Backends) -> InstanceRoutes:
    return InstanceRoutes(backends.client)


RBAC = (
    *proxy_rules(STORED),
    Rule.of(PODS, "get"),
    Rule.of(PODS, "get", subresource="log"),
    Rule.of(CORE_EVENTS, "list"),
    Rule.of(POD_METRICS, "get"),
)
"""The proxy's verbs on the CRD, and what the subresources read: the Pod, its log, Events, PodMetrics."""
RESOURCE = Resource(SERVED, SCHEMA, _storage, COLUMNS, rbac=RBAC)
