"""NodeFlavorReconciler: one Kueue ResourceFlavor per flavor name the managed nodes offer (contract §7.9).

Why this module exists: Kueue admits work against ResourceFlavors, and the pool's queue finds its
flavors by label, so every hardware group among the managed nodes (`gpustack--<gKey>[--<aKey>]-<os>-
<arch>-<n>{c,d}`) needs one flavor whose labels carry the pool identity and capacity (nodes x count) and
whose spec pins workloads onto exactly those nodes. The key is the flavor name: a node event enqueues the
names the node offered before and after it (the watch maps old and new), so a node that leaves a flavor,
changes count or loses its managed mark re-reconciles the flavor it left, which is deleted once no node
contributes. After a flavor is in place, and while `instance-type-derived-from-node` is on, the pool's
InstanceType is created if it does not exist (never updated). Everything is read from the shared cache;
a write happens only when the cache differs from the desired object.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final, cast

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import (
    DERIVED_FROM_NODE_LABEL,
    NODE_FLAVOR_INDEX,
    RESOURCE_TYPE_LABEL,
    RESOURCE_TYPE_NODES,
)
from gpustack_operator.api.types import kueue
from gpustack_operator.controllerkit.cache import Cache
from gpustack_operator.controllerkit.predicates import (
    annotations_changed,
    any_of,
    generation_changed,
    labels_changed,
)
from gpustack_operator.controllerkit.rbac import Rule
from gpustack_operator.controllerkit.reconciler import DONE, Result
from gpustack_operator.controllerkit.spec import ControllerSpec, Index
from gpustack_operator.controllerkit.watches import for_, mapped
from gpustack_operator.controllers.dependencies import Dependencies
from gpustack_operator.controllers.node_flavor_contributions import (
    contribution_changed,
    node_flavor_index,
    node_flavor_names,
    node_flavors,
)
from gpustack_operator.controllers.node_flavor_objects import (
    derived_instance_type,
    flavor_patch,
    resource_flavor,
)
from gpustack_operator.controllers.settingsview import SettingsView
from gpustack_operator.kube import errors
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import INSTANCE_TYPES, NODES, RESOURCE_FLAVORS, Resource
from gpustack_operator.rules.naming.flavors import NodeFlavor
from gpustack_operator.settings.catalog import (
    INSTANCE_TYPE_AWARE_CPU_MANUFACTURER,
    INSTANCE_TYPE_DERIVED_FROM_NODE,
    INSTANCE_TYPE_MIXED_ON_NODE,
)

__all__ = ["FIELD_MANAGER", "NodeFlavorReconciler", "controller"]

log = logging.getLogger(__name__)

FIELD_MANAGER = "gpustack-node-flavor"

NODE_FLAVOR: Final = NODE_FLAVOR_INDEX
"""`nodes.schedule.gpustack.ai/flavor` (contract §5.4): the ResourceFlavors a managed node contributes to."""
NODES_BY_FLAVOR = Index(NODES, NODE_FLAVOR, node_flavor_index)


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def is_node_flavor(obj: Mapping[str, Any]) -> bool:
    """A ResourceFlavor this controller owns (`resource.gpustack.ai/type=nodes`)."""
    return _labels(obj).get(RESOURCE_TYPE_LABEL) == RESOURCE_TYPE_NODES


def every_flavor(cache: Cache) -> Callable[[JSONObj], list[str]]:
    """A key function naming every flavor: the node flavors that exist and every one a node offers.

    For changes that touch all flavors at once (a setting, a derived InstanceType deleted).
    """

    def keys(_: JSONObj) -> list[str]:
        existing = {str(rf["metadata"]["name"]) for rf in cache.list(RESOURCE_FLAVORS) if is_node_flavor(rf)}
        offered = {name for node in cache.list(NODES) for name in node_flavor_names(node)}
        return sorted(existing | offered)

    return keys


def derived_type_deleted(old: JSONObj | None, new: JSONObj | None) -> bool:
    """Predicate: a derived InstanceType went away, so the flavor that authored it authors it again."""
    return new is None and old is not None and _labels(old).get(DERIVED_FROM_NODE_LABEL) == "true"


class NodeFlavorReconciler:
    def __init__(self, client: Client, cache: Cache, settings: SettingsView) -> None:
        self.client, self.cache, self.settings = client, cache, settings

    async def reconcile(self, key: str) -> Result:
        current = self.cache.get(RESOURCE_FLAVORS, key)
        if current is not None and current["metadata"].get("deletionTimestamp"):
            return DONE  # Kueue holds it until no queue uses it; its delete event brings the key back
        contributors = self._contributors(key, self.settings.flag(INSTANCE_TYPE_MIXED_ON_NODE))
        if not contributors:
            await self._retire(key, current)
            return DONE
        aware = self.settings.flag(INSTANCE_TYPE_AWARE_CPU_MANUFACTURER)
        flavor = contributors[0]  # every contributor to one name shares its identity
        await self._sync(current, resource_flavor(flavor, len(contributors), aware))
        if self.settings.flag(INSTANCE_TYPE_DERIVED_FROM_NODE):
            await self._author_instance_type(flavor, aware)
        return DONE

    def _contributors(self, name: str, mixed_on_node: bool) -> list[NodeFlavor]:
        """The flavor as each managed node offering it sees it, in node-name order."""
        nodes = self.cache.by_index(NODES, NODE_FLAVOR, name)
        nodes.sort(key=lambda node: str(node["metadata"].get("name")))
        return [f for node in nodes for f in node_flavors(node, mixed_on_node) if f.name == name]

    async def _retire(self, name: str, current: JSONObj | None) -> None:
        if current is None or not is_node_flavor(current):
            return  # gone already, or somebody else's flavor
        await self.client.delete(RESOURCE_FLAVORS, name)
        log.info("resourceflavor=%s deleted: no managed node contributes to it", name)

    async def _sync(self, current: JSONObj | None, desired: kueue.ResourceFlavor) -> None:
        name, labels = desired["metadata"]["name"], desired["metadata"]["labels"]
        if current is None:
            try:
                await self._create(RESOURCE_FLAVORS, desired)
            except errors.AlreadyExists:
                return  # the cache is behind; the flavor's add event reconciles it again
            log.info("resourceflavor=%s created (%s)", name, _capacity(labels))
            return
        patch = flavor_patch(current, desired)
        if patch is None:
            return
        await self.client.patch(RESOURCE_FLAVORS, name, patch, field_manager=FIELD_MANAGER)
        log.info("resourceflavor=%s updated (%s): %s", name, _capacity(labels), sorted(_fields(patch)))

    async def _create(self, resource: Resource, obj: Mapping[str, Any]) -> None:
        await self.client.create(resource, cast(JSONObj, obj), field_manager=FIELD_MANAGER)

    async def _author_instance_type(self, flavor: NodeFlavor, aware: bool) -> None:
        instance_type = derived_instance_type(flavor, aware)
        name = instance_type["metadata"]["name"]
        if self.cache.get(INSTANCE_TYPES, name) is not None:
            return  # create-only: an existing type, whoever made it, is left as it is
        try:
            await self._create(INSTANCE_TYPES, instance_type)
        except errors.AlreadyExists:
            return
        log.info("instancetype=%s derived from resourceflavor=%s", name, flavor.name)


def _capacity(labels: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k.endswith((".count", ".capacity")))


def _fields(patch: Mapping[str, Any]) -> list[str]:
    return [f"{part}.{field}" for part, fields in patch.items() for field in fields]


def controller(deps: Dependencies) -> ControllerSpec:
    settings = deps.settings
    all_flavors = every_flavor(deps.cache)
    return ControllerSpec(
        name="node-flavor",
        reconciler=NodeFlavorReconciler(deps.client, deps.cache, settings),
        primary=for_(
            RESOURCE_FLAVORS,
            any_of(generation_changed, labels_changed, annotations_changed),
            throttle=deps.throttle,
        ),
        watches=(
            mapped(NODES, node_flavor_names, contribution_changed, throttle=deps.throttle),
            settings.changes(all_flavors),
            mapped(INSTANCE_TYPES, all_flavors, derived_type_deleted),
        ),
        indexes=(NODES_BY_FLAVOR,),
        rbac=(Rule.of(RESOURCE_FLAVORS, "create", "patch", "delete"), Rule.of(INSTANCE_TYPES, "create")),
    )
