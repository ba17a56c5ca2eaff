"""`instancetypes.worker.gpustack.ai/v1`: the v1alpha1 CRD served as v1, with the contract's columns.

Columns (contract §3.1, Era B): Name, Entrance, Accel.(Exclusive), Accel.(Shared), Accel.(Sliced), CPU
(each `<onceMaxRequest>/<remaining>` of that capacity view) and Phase; Age follows with priority 1, so
only `-o wide` shows it, as in the Go original. A view the status lacks prints `<none>`. Product and
Memory (`spec.product`, `spec.memory`: the pool's card, filled from its flavors by the defaulting webhook)
stand before Phase, as the InstanceTypeFlavor and the earlier InstanceType columns show them (§2.4), so a
user sees which card a pool offers and the VRAM a `.sliced.memory-mib` is divided by. Beside the proxy,
`fit` (instancetypefit.py) asks the admission check whether a request would be admitted into the pool.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import CATEGORY, KIND_INSTANCE_TYPE, PLURAL_INSTANCE_TYPES, V1, WORKER_GROUP
from gpustack_operator.api.schema.instancetype import INSTANCE_TYPE
from gpustack_operator.apiserver.discovery import ServedResource
from gpustack_operator.apiserver.registry.generic.cachedreads import Informed
from gpustack_operator.apiserver.registry.generic.crdproxy import (
    STATUS_SUBRESOURCE,
    VERBS,
    CRDProxy,
    proxy_rules,
)
from gpustack_operator.apiserver.registry.instancetypefit import FIT, InstanceTypeFit
from gpustack_operator.apiserver.served import Backends, Resource
from gpustack_operator.apiserver.table import NAME, Column, age
from gpustack_operator.conversion.apiversion import WORKER
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import INSTANCE_TYPES as STORED

__all__ = ["COLUMNS", "RESOURCE", "SCHEMA", "SERVED", "proxy"]

NONE = "<none>"

SERVED = ServedResource(
    group=WORKER_GROUP,
    version=V1,
    plural=PLURAL_INSTANCE_TYPES,
    singular="instancetype",
    kind=KIND_INSTANCE_TYPE,
    namespaced=False,
    verbs=VERBS,
    short_names=("instype",),
    categories=(CATEGORY,),
    subresources=STATUS_SUBRESOURCE,
    readers=(FIT,),
)

SCHEMA = INSTANCE_TYPE.openapi_schema()
"""v1 is the v1alpha1 struct (a cast), so its OpenAPI schema is the CRD's, from the same source."""


def _status(obj: JSONObj) -> JSONObj:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def _pair(view: str) -> Callable[[JSONObj], str]:
    def cell(obj: JSONObj) -> str:
        resource = _status(obj).get(view)
        if not isinstance(resource, dict) or not resource:
            return NONE
        return f"{resource.get('onceMaxRequest', NONE)}/{resource.get('remaining', NONE)}"

    return cell


def _field(name: str) -> Callable[[JSONObj], str]:
    return lambda obj: str(_status(obj).get(name) or NONE)


def _spec_field(name: str) -> Callable[[JSONObj], str]:
    def cell(obj: JSONObj) -> str:
        spec = obj.get("spec")
        value = spec.get(name) if isinstance(spec, dict) else None
        return str(value) if value not in (None, "") else NONE

    return cell


COLUMNS = (
    NAME,
    Column("Entrance", _field("entrance"), description="The LocalQueue that workloads of this type join."),
    Column(
        "Accel.(Exclusive)",
        _pair("accelerator"),
        description="Whole cards: the most one workload can take / remaining.",
    ),
    Column("Accel.(Shared)", _pair("acceleratorShared"), description="Card shares: once-max / remaining."),
    Column(
        "Accel.(Sliced)", _pair("acceleratorSliced"), description="VRAM-percent units: once-max / remaining."
    ),
    Column("CPU", _pair("cpu"), description="CPU units: once-max / remaining."),
    Column("Product", _spec_field("product"), description="The pool's card (or CPU) product."),
    Column("Memory", _spec_field("memory"), description="VRAM per card."),
    Column("Phase", _field("phase"), description="Active, Activating, Inactive or Draining."),
    Column(
        "Age",
        age,
        type="date",
        description="CreationTimestamp is the server time when this object was created.",
        priority=1,
    ),
)


def proxy(client: Client, cache: Informed | None = None) -> CRDProxy:
    """The v1 handlers over the v1alpha1 CRD; `cache`, the worker's informer of every v1alpha1
    InstanceType, answers GET and LIST when it can (registry/generic/cachedreads.py)."""
    return CRDProxy(client, SERVED, STORED, WORKER, COLUMNS, cache=cache)


class InstanceTypeRoutes:
    """The proxy's routes and the `fit` question under the same item path."""

    def __init__(self, backends: Backends) -> None:
        cache = backends.cache(STORED)
        self.proxy = proxy(backends.client, cache)
        self.fit = InstanceTypeFit(backends.client, cache, backends.fit)

    def add_routes(self, router: web.UrlDispatcher) -> None:
        self.proxy.add_routes(router)
        router.add_post(
            f"/apis/{SERVED.group}/{SERVED.version}/{SERVED.plural}/{{name}}/{FIT.name}", self.fit.post
        )


def _storage(backends: Backends) -> InstanceTypeRoutes:
    return InstanceTypeRoutes(backends)


RESOURCE = Resource(SERVED, SCHEMA, _storage, COLUMNS, rbac=proxy_rules(STORED))
