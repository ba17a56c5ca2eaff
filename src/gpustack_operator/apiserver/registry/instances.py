"""`instances.worker.gpustack.ai/v1`: the namespaced v1alpha1 Instance CRD served as v1 (contract §2.1).

A cast like InstanceType's: every verb and the status subresource go to the CRD
(registry/generic/crdproxy.py), so the Instance webhooks and the InstanceReconciler see v1 writes exactly as
v1alpha1 ones. The columns are the CRD's own printer columns (api/crds.py), so `kubectl get instances` reads
the same in both versions; `kubectl get instances -A` adds NAMESPACE from each row's object. Reads are not
cached: the worker holds no informer of every namespace's Instances for this. Not served yet: the `log`,
`events` and `metrics` subresources the contract lists.
"""

from __future__ import annotations

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
from gpustack_operator.apiserver.served import Backends, Resource
from gpustack_operator.apiserver.table import NAME, printer_column
from gpustack_operator.conversion.apiversion import WORKER
from gpustack_operator.kube.client import Client
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
)
SCHEMA = INSTANCE.openapi_schema()
COLUMNS = (NAME, *(printer_column(c) for c in INSTANCE_COLUMNS))


def proxy(client: Client) -> CRDProxy:
    return CRDProxy(client, SERVED, STORED, WORKER, COLUMNS)


def _storage(backends: Backends) -> CRDProxy:
    return proxy(backends.client)


RESOURCE = Resource(SERVED, SCHEMA, _storage, COLUMNS, rbac=proxy_rules(STORED))
