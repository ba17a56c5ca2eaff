"""NodeFeatureReconciler: the worker's NodeFeature `<node>-gpustack-worker`, which NFD turns into labels.

The scheduling chain keys every pool on labels only the worker can compute: the node-management mark
`gpustack.ai/managed` (an admin's `true`/`false` always wins; in manual mode nothing is added) and the
node's general (CPU) key with its CPU count (contract §5.3, §7.5). They travel through NFD like every other
node feature, so one NodeFeature per node, owned by the Node, is server-side applied whenever the labels
it should carry differ from what the cache shows (labels that no longer apply disappear with the apply).
The manual-management setting is read on every reconcile, and a settings change re-reads every node.
Labels are computed from what others wrote on the Node: a CPU vendor 63 characters long yields a key no
label may have, which NFD would drop without a word; such a label is left out of the NodeFeature and the
node gets a Warning Event `InvalidNodeLabels` (and a log line) naming it, once.
"""

from __future__ import annotations

from typing import Any, cast

from gpustack_operator.api.keys import WORKER_NODE_FEATURE_SUFFIX
from gpustack_operator.api.names import label_problem
from gpustack_operator.controllerkit.cache import Cache
from gpustack_operator.controllerkit.problems import ProblemReporter
from gpustack_operator.controllerkit.rbac import Rule
from gpustack_operator.controllerkit.reconciler import DONE, Result
from gpustack_operator.controllerkit.spec import ControllerSpec
from gpustack_operator.controllerkit.watches import for_, owns
from gpustack_operator.controllers.dependencies import PER_NODE_WORKERS, Dependencies
from gpustack_operator.controllers.pools import every
from gpustack_operator.controllers.settingsview import SettingsView
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import NODE_FEATURES, NODES
from gpustack_operator.rules.naming.labels import construct_node_capacity_labels
from gpustack_operator.rules.naming.nodes import Node
from gpustack_operator.rules.naming.objects import node_feature
from gpustack_operator.settings.catalog import NODE_MANAGEMENT_MANUAL

FIELD_MANAGER = "gpustack-worker"
INVALID_NODE_LABELS = "InvalidNodeLabels"
"""Reason of the Warning Event on a Node whose worker labels could not all be published."""


class NodeFeatureReconciler:
    def __init__(
        self,
        client: Client,
        cache: Cache,
        settings: SettingsView,
        namespace: str,
        problems: ProblemReporter | None = None,
    ) -> None:
        self.client, self.cache, self.settings, self.namespace = client, cache, settings, namespace
        self.features = owns(NODE_FEATURES, NODES)
        self.problems = problems or ProblemReporter(None)

    async def reconcile(self, key: str) -> Result:
        node = self.cache.get(NODES, key)
        if node is None:
            return DONE  # its NodeFeature is garbage-collected with it
        manual = self.settings.flag(NODE_MANAGEMENT_MANUAL)
        labels = self._valid(node, construct_node_capacity_labels(cast(Node, node), manual))
        desired = node_feature(node, WORKER_NODE_FEATURE_SUFFIX, self.namespace, labels)
        current = self.cache.get(self.features, f"{self.namespace}/{desired['metadata']['name']}")
        if current is not None and (current.get("spec") or {}).get("labels") == labels:
            owners = {ref.get("uid") for ref in current["metadata"].get("ownerReferences") or []}
            if node["metadata"].get("uid") in owners:
                return DONE
        await self.client.apply(NODE_FEATURES, desired, field_manager=FIELD_MANAGER)
        return DONE

    def _valid(self, node: dict[str, Any], labels: dict[str, str]) -> dict[str, str]:
        """The labels kube-apiserver accepts; the others are reported on the node and left out."""
        refused = {key: problem for key, value in labels.items() if (problem := label_problem({key: value}))}
        problem = None
        if refused:
            feature = f"{self.namespace}/{node['metadata'].get('name')}{WORKER_NODE_FEATURE_SUFFIX}"
            problem = (
                f"{'; '.join(refused.values())}: left out of NodeFeature {feature}, so the node offers no "
                "pool that needs it (check the labels NFD and the device manager put on the node)"
            )
        self.problems.report(NODES, node, INVALID_NODE_LABELS, problem)
        return {key: value for key, value in labels.items() if key not in refused}


def controller(deps: Dependencies) -> ControllerSpec:
    namespace = deps.environment.pod_namespace
    settings = deps.settings
    reconciler = NodeFeatureReconciler(deps.client, deps.cache, settings, namespace, deps.problems())
    return ControllerSpec(
        name="node-feature",
        reconciler=reconciler,
        primary=for_(NODES),
        watches=(reconciler.features, settings.changes(every(deps.cache, NODES))),
        rbac=(Rule.of(NODE_FEATURES, "get", "create", "patch", namespace=namespace),),  # ours, applied
        concurrency=PER_NODE_WORKERS,
    )
