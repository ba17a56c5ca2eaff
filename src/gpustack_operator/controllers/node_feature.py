"""NodeFeatureReconciler: the worker's NodeFeature `<node>-gpustack-worker`, which NFD turns into labels.

The scheduling chain keys every pool on labels only the worker can compute: the node-management mark
`gpustack.ai/managed` (an admin's `true`/`false` always wins; in manual mode nothing is added) and the
node's general (CPU) key with its CPU count (contract §5.3, §7.5). They travel through NFD like every other
node feature, so one NodeFeature per node, owned by the Node, is server-side applied whenever the labels
it should carry differ from what the cache shows (labels that no longer apply disappear with the apply).
The manual-management setting is read on every reconcile, and a settings change re-reads every node.
"""

from __future__ import annotations

from typing import Any, cast

from gpustack_operator.api.keys import WORKER_NODE_FEATURE_SUFFIX
from gpustack_operator.controllers.cache import Cache
from gpustack_operator.controllers.rbac import Rule
from gpustack_operator.controllers.reconciler import DONE, Result
from gpustack_operator.controllers.settingsview import SettingsView
from gpustack_operator.controllers.spec import ControllerSpec, Dependencies
from gpustack_operator.controllers.watches import Watch, for_, owns
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import NODE_FEATURES, NODES
from gpustack_operator.nodefeature.labels import construct_node_capacity_labels
from gpustack_operator.nodefeature.nodes import Node
from gpustack_operator.nodefeature.objects import node_feature
from gpustack_operator.settings.catalog import NODE_MANAGEMENT_MANUAL

FIELD_MANAGER = "gpustack-worker"


def every_node(cache: Cache) -> Any:
    """A key function: whatever changed, every cached node (for settings that affect all of them)."""

    def keys(_: dict[str, Any]) -> list[str]:
        return sorted(str(n["metadata"]["name"]) for n in cache.list(NODES))

    return keys


def settings_changes(settings: SettingsView, cache: Cache) -> Watch:
    """The settings Secret, mapped to every node: a changed setting takes effect on the next reconcile."""
    base = settings.watch
    return Watch(
        base.resource, every_node(cache), namespace=base.namespace, field_selector=base.field_selector
    )


class NodeFeatureReconciler:
    def __init__(self, client: Client, cache: Cache, settings: SettingsView, namespace: str) -> None:
        self.client, self.cache, self.settings, self.namespace = client, cache, settings, namespace
        self.features = owns(NODE_FEATURES, NODES)

    async def reconcile(self, key: str) -> Result:
        node = self.cache.get(NODES, key)
        if node is None:
            return DONE  # its NodeFeature is garbage-collected with it
        manual = self.settings.flag(NODE_MANAGEMENT_MANUAL)
        labels = construct_node_capacity_labels(cast(Node, node), manual)
        desired = node_feature(node, WORKER_NODE_FEATURE_SUFFIX, self.namespace, labels)
        current = self.cache.get(self.features, f"{self.namespace}/{desired['metadata']['name']}")
        if current is not None and (current.get("spec") or {}).get("labels") == labels:
            owners = {ref.get("uid") for ref in current["metadata"].get("ownerReferences") or []}
            if node["metadata"].get("uid") in owners:
                return DONE
        await self.client.apply(NODE_FEATURES, desired, field_manager=FIELD_MANAGER)
        return DONE


def controller(deps: Dependencies) -> ControllerSpec:
    namespace = deps.environment.pod_namespace
    settings = SettingsView(deps.cache, namespace)
    reconciler = NodeFeatureReconciler(deps.client, deps.cache, settings, namespace)
    return ControllerSpec(
        name="node-feature",
        reconciler=reconciler,
        primary=for_(NODES),
        watches=(reconciler.features, settings_changes(settings, deps.cache)),
        rbac=(Rule.of(NODE_FEATURES, "get", "create", "patch"),),
    )
