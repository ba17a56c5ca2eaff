"""`instancetypeflavors.worker.gpustack.ai/v1`: list-only, computed on every LIST (contract §3.2).

Reads Kueue's node ResourceFlavors (the caller's label selector joins ours) and the
`instance-type-aware-cpu-manufacturer` setting straight from the API server, never from a cache, as the
Go original's uncached reader does. Only `list` exists: a GET of one name is 404 (no such route) and
`watch` is 405, as kube's generic server answers an unimplemented verb. A field selector may pin
`metadata.name`; any other field is kube's 400.

The items (`flavor_list`, a pure function of the flavors read): each flavor of managed nodes (label
`resource.gpustack.ai/type=nodes`) carries notes (`note.gpustack.ai/<k>` annotations); a flavor being
deleted is skipped. A CPU flavor shows its CPU identity when the `instance-type-aware-cpu-manufacturer`
setting is on and collapses to `generic` otherwise; an accelerated flavor shows its accelerator and, when
aware, its CPU key. Each pool appears once, named as their pool (`gpustack--<aKey>`,
`gpustack--<gKey>--<aKey>`, `gpustack--generic`, `gpustack--<gKey>`), sorted by manufacturer, product,
memory (as quantities where both parse), CPU key, accelerator key.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from aiohttp import web

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import (
    CATEGORY,
    GENERIC,
    KIND_INSTANCE_TYPE_FLAVOR,
    NOTE_ACCELERATABLE,
    NOTE_ACCELERATOR_GROUP,
    NOTE_CORES,
    NOTE_FAMILY,
    NOTE_GENERAL_GROUP,
    NOTE_MANUFACTURER,
    NOTE_MEMORY,
    NOTE_PREFIX,
    NOTE_PRODUCT,
    NOTE_SLICEABLE,
    PLURAL_INSTANCE_TYPE_FLAVORS,
    RESOURCE_TYPE_LABEL,
    RESOURCE_TYPE_NODES,
    V1,
    WORKER_GROUP,
)
from gpustack_operator.api.quantity import InvalidQuantityError, parse_quantity
from gpustack_operator.apiserver.discovery import ServedResource
from gpustack_operator.apiserver.negotiation import negotiate
from gpustack_operator.apiserver.registry.generic.representation import render_list
from gpustack_operator.apiserver.requestinfo import is_watch
from gpustack_operator.apiserver.served import Backends, Resource
from gpustack_operator.apiserver.status import bad_request, method_not_allowed
from gpustack_operator.apiserver.table import Column
from gpustack_operator.controllerkit.rbac import SYSTEM, Rule
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.rules.naming.flavors import pool_name
from gpustack_operator.settings import secret
from gpustack_operator.settings.catalog import INSTANCE_TYPE_AWARE_CPU_MANUFACTURER

__all__ = ["COLUMNS", "RESOURCE", "SCHEMA", "SERVED", "FlavorList", "flavor_list"]


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


def _notes(flavor: JSONObj) -> dict[str, str]:
    annotations = (flavor.get("metadata") or {}).get("annotations") or {}
    return {k[len(NOTE_PREFIX) :]: str(v) for k, v in annotations.items() if k.startswith(NOTE_PREFIX)}


def _flavor_spec(flavor: JSONObj, aware: bool) -> JSONObj | None:
    if (flavor.get("metadata") or {}).get("deletionTimestamp"):
        return None
    notes = _notes(flavor)
    identity = {k: notes.get(k, "") for k in (NOTE_MANUFACTURER, NOTE_PRODUCT, NOTE_FAMILY)}
    spec: JSONObj
    if notes.get(NOTE_ACCELERATABLE) != "true":
        if aware:
            spec = {"generalGroup": notes.get(NOTE_GENERAL_GROUP, ""), "acceleratable": False, **identity}
        else:
            spec = {"generalGroup": GENERIC, "acceleratable": False, NOTE_MANUFACTURER: GENERIC}
    else:
        spec = {
            "acceleratorGroup": notes.get(NOTE_ACCELERATOR_GROUP, ""),
            "acceleratable": True,
            **identity,
            "memory": notes.get(NOTE_MEMORY, ""),
            "cores": notes.get(NOTE_CORES, ""),
            "sliceable": notes.get(NOTE_SLICEABLE) == "true",
        }
        if aware:
            spec["generalGroup"] = notes.get(NOTE_GENERAL_GROUP, "")
    spec = {k: v for k, v in spec.items() if v != "" or k == "acceleratable"}
    if not spec.get("generalGroup") and not spec.get("acceleratorGroup"):
        return None
    return spec


def _compare_memory(a: str, b: str) -> int:
    try:
        qa, qb = parse_quantity(a), parse_quantity(b)
    except InvalidQuantityError:
        return (a > b) - (a < b)
    return (qb < qa) - (qa < qb)


def _compare(a: JSONObj, b: JSONObj) -> int:
    sa, sb = a["spec"], b["spec"]
    for key in ("manufacturer", "product"):
        x, y = str(sa.get(key, "")), str(sb.get(key, ""))
        if x != y:
            return (x > y) - (x < y)
    if (memory := _compare_memory(str(sa.get("memory", "")), str(sb.get("memory", "")))) != 0:
        return memory
    for key in ("generalGroup", "acceleratorGroup"):
        x, y = str(sa.get(key, "")), str(sb.get(key, ""))
        if x != y:
            return (x > y) - (x < y)
    return 0


def flavor_list(resource_flavors: Iterable[JSONObj], *, aware: bool, api_version: str) -> list[JSONObj]:
    """The InstanceTypeFlavors of these ResourceFlavors, de-duplicated and sorted."""
    seen: dict[str, JSONObj] = {}
    for flavor in resource_flavors:
        spec = _flavor_spec(flavor, aware)
        if spec is None:
            continue
        name = pool_name(aware, spec.get("generalGroup", ""), spec.get("acceleratorGroup", ""))
        seen.setdefault(
            name,
            {
                "apiVersion": api_version,
                "kind": "InstanceTypeFlavor",
                "metadata": {"name": name},
                "spec": spec,
            },
        )
    return sorted(seen.values(), key=functools.cmp_to_key(_compare))


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
        return secret.setting_flag(stored, INSTANCE_TYPE_AWARE_CPU_MANUFACTURER)


def _storage(backends: Backends) -> FlavorList:
    return FlavorList(backends.client, backends.namespace)


RBAC: tuple[Rule, ...] = (
    Rule.of(resources.RESOURCE_FLAVORS, "list"),
    Rule.of(resources.SECRETS, "get", namespace=SYSTEM),  # the settings Secret
)
RESOURCE = Resource(SERVED, SCHEMA, _storage, COLUMNS, rbac=RBAC)
