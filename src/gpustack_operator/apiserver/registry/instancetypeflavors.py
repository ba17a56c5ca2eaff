"""`instancetypeflavors.worker.gpustack.ai/v1`: list-only, computed on every LIST (contract §3.2).

Reads Kueue's node ResourceFlavors (the caller's label selector joins ours) and the
`instance-type-aware-cpu-manufacturer` setting straight from the API server, never from a cache, as the
Go original's uncached reader does; flavorlist computes the items. Only `list` exists: a GET of one name
is 404 (no such route) and `watch` is 405, as kube's generic server answers an unimplemented verb.
A field selector may pin `metadata.name`; any other field is kube's 400.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import (
    CATEGORY,
    KIND_INSTANCE_TYPE_FLAVOR,
    PLURAL_INSTANCE_TYPE_FLAVORS,
    RESOURCE_TYPE_LABEL,
    RESOURCE_TYPE_NODES,
    V1,
    WORKER_GROUP,
)
from gpustack_operator.apiserver.discovery import ServedResource
from gpustack_operator.apiserver.negotiation import negotiate
from gpustack_operator.apiserver.registry.flavorlist import flavor_list
from gpustack_operator.apiserver.registry.representation import render_list
from gpustack_operator.apiserver.requestinfo import is_watch
from gpustack_operator.apiserver.status import bad_request, method_not_allowed
from gpustack_operator.apiserver.table import Column
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.settings import secret
from gpustack_operator.settings.admission import parse_bool
from gpustack_operator.settings.catalog import INSTANCE_TYPE_AWARE_CPU_MANUFACTURER

__all__ = ["COLUMNS", "SCHEMA", "SERVED", "FlavorList"]


SERVED = ServedResource(
    group=WORKER_GROUP,
    version=V1,
    plural=PLURAL_INSTANCE_TYPE_FLAVORS,
    singular="instancetypeflavor",
    kind=KIND_INSTANCE_TYPE_FLAVOR,
    namespaced=False,
    verbs=("list",),
    short_names=("instypeflavor",),
    categories=(CATEGORY,),
)


def _spec(key: str) -> Any:
    def cell(obj: JSONObj) -> Any:
        value = (obj.get("spec") or {}).get(key)
        return "<none>" if value is None or value == "" else value

    return cell


COLUMNS = (
    Column(
        "Name",
        lambda obj: str((obj.get("metadata") or {}).get("name", "")),
        format="name",
        description="The pool's name.",
    ),
    Column("GeneralGroup", _spec("generalGroup"), description="CPU node key, or generic."),
    Column("AcceleratorGroup", _spec("acceleratorGroup"), description="Accelerator node key."),
    Column(
        "Acceleratable", _spec("acceleratable"), type="boolean", description="Schedules onto accelerators."
    ),
    Column("Manufacturer", _spec("manufacturer"), description="Device manufacturer, or generic."),
    Column("Product", _spec("product"), description="Device product."),
    Column("Memory", _spec("memory"), description="Per-card memory."),
    Column("Cores", _spec("cores"), description="Per-card cores."),
    Column("Sliceable", _spec("sliceable"), type="boolean", description="Whether cards can be sliced."),
)

_STRING = {"type": "string"}
SCHEMA: JSONObj = {
    "description": "InstanceTypeFlavor is one hardware flavor an InstanceType can be made of, computed from "
    "the cluster's nodes.",
    "type": "object",
    "properties": {
        "apiVersion": _STRING,
        "kind": _STRING,
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "properties": {
                "acceleratorGroup": {"description": "Accelerator node key; empty for a CPU pool.", **_STRING},
                "acceleratable": {"description": "Whether the flavor has accelerators.", "type": "boolean"},
                "manufacturer": {"description": "Device manufacturer, or generic.", **_STRING},
                "product": {"description": "Device product.", **_STRING},
                "family": {"description": "Device family.", **_STRING},
                "memory": {"description": "Per-card memory, e.g. 24Gi.", **_STRING},
                "cores": {"description": "Per-card cores.", **_STRING},
                "sliceable": {"description": "Whether cards can be sliced.", "type": "boolean"},
                "generalGroup": {
                    "description": "CPU node key when aware; generic for the CPU pool.",
                    **_STRING,
                },
            },
        },
    },
}
"""The contract §2.4 fields (no CRD exists for this kind, so its schema lives here)."""


def _name_filter(selector: str) -> str | None:
    """The name a `metadata.name=` selector pins (None: no selector); other fields are kube's 400."""
    if not selector:
        return None
    name = None
    for term in selector.split(","):
        field, _, value = term.partition("=")
        if field.strip() != "metadata.name" or field.endswith("!"):
            raise bad_request(f'"{field.strip()}" is not a known field selector: only "metadata.name"')
        name = value.removeprefix("=").strip()
    return name


class FlavorList:
    """The list handler; `add_routes` mounts it."""

    def __init__(self, client: Client, settings_namespace: str) -> None:
        self.client = client
        self.settings_namespace = settings_namespace

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_route("*", f"/apis/{SERVED.group}/{SERVED.version}/{SERVED.plural}", self.collection)

    async def collection(self, request: web.Request) -> web.Response:
        qualified = f"{SERVED.plural}.{SERVED.group}"
        if request.method not in ("GET", "HEAD"):
            raise method_not_allowed(request.method.lower(), qualified)
        if is_watch(request.query):
            raise method_not_allowed("watch", qualified)
        rep = negotiate(request.headers.get("Accept", ""), is_list=True)
        wanted = _name_filter(request.query.get("fieldSelector", ""))
        selector = f"{RESOURCE_TYPE_LABEL}={RESOURCE_TYPE_NODES}"
        if request.query.get("labelSelector"):
            selector += "," + request.query["labelSelector"]
        flavors, version = await self.client.list_all(resources.RESOURCE_FLAVORS, label_selector=selector)
        items = flavor_list(flavors, aware=await self._aware(), api_version=SERVED.api_version)
        if wanted is not None:
            items = [i for i in items if i["metadata"]["name"] == wanted]
        doc = {
            "apiVersion": SERVED.api_version,
            "kind": f"{SERVED.kind}List",
            "metadata": {"resourceVersion": version},
            "items": items,
        }
        return web.json_response(render_list(rep, doc, COLUMNS, request.query.get("includeObject", "")))

    async def _aware(self) -> bool:
        stored = await self.client.get_or_none(resources.SECRETS, secret.SECRET_NAME, self.settings_namespace)
        text = secret.decode_values(stored or {}).get(INSTANCE_TYPE_AWARE_CPU_MANUFACTURER.name, "")
        try:
            return parse_bool(text) if text else False
        except ValueError:
            return False
