"""The Prepare phase of the worker: what must exist in the cluster before anything reconciles.

Every replica runs it at every start, so each step is idempotent and safe against a racing replica: the
system namespace is created if missing; our CRDs are server-side applied (so an upgrade updates them) and
awaited until Established, because an informer on a CRD that is not Established fails; the
`gpustack-settings` Secret is created, or backfilled with the keys it lacks, never overwriting a value an
admin set (settings.secret computes the patch; a concurrent writer makes it conflict and we re-read);
the `gpustack-cpu-info` NodeFeatureRule is server-side applied, so NFD annotates every node with its CPU
details and labels the nodes without an accelerator (rules.naming.cpuinforule). NFD must be installed
first: without its CRDs the step fails with that instruction. The `gpustack-node-devices` AdmissionCheck
is server-side applied after that (Kueue's CRDs are installed at run time, so the chart cannot ship it);
the body carries no finalizers, so Kueue's own stays Kueue's, and the node-devices controllers keep it
Active. Kueue must be installed first, likewise (worker.prerequisites waits for both and says so). With
`--owner-cluster-role` (the chart passes its worker ClusterRole), the APIServices and webhook configurations
carry an ownerReference to that ClusterRole, so `helm uninstall`, which deletes the ClusterRole, has the
garbage collector delete them too, instead of leaving an APIService that breaks discovery and webhooks that
fail closed, pointing at nothing. The NodeFeatureRule and the AdmissionCheck are left unowned on purpose:
the ClusterQueues the worker made (which outlive it, holding Kueue's quota bookkeeping) name the check, and
Kueue's finalizer would keep a deleted check Terminating while they do; the rule only labels nodes. The
APIServices of the aggregated API follow the CRDs
(apiserver.aggregated, wired by worker.aggregation); the spec's other steps (webhook configurations,
applications) join here, in order.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

from gpustack_operator.api.crds import custom_resource_definitions
from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import NODE_DEVICES_ADMISSION_CHECK, NODE_DEVICES_CONTROLLER_NAME
from gpustack_operator.controllerkit.rbac import SYSTEM, Rule
from gpustack_operator.kube import definitions, errors, resources
from gpustack_operator.kube.client import Client
from gpustack_operator.rules.naming.cpuinforule import cpu_info_rule
from gpustack_operator.rules.naming.manufacturers import manufacturers
from gpustack_operator.settings import secret
from gpustack_operator.settings.environment import Environment

__all__ = [
    "PrepareError",
    "initialize_settings",
    "install_admission_check",
    "install_crds",
    "install_node_feature_rule",
    "owner_references",
    "prepare",
]

log = logging.getLogger(__name__)

RBAC: tuple[Rule, ...] = (
    Rule.of(resources.NAMESPACES, "create"),  # the system namespace
    Rule.of(resources.CRDS, "get", "create", "patch"),  # kube.definitions: apply, then wait Established
    Rule.of(resources.SECRETS, "get", "create", "patch", namespace=SYSTEM),  # the settings Secret
    Rule.of(resources.NODE_FEATURE_RULES, "create", "patch"),  # server-side apply (create when missing)
    Rule.of(resources.ADMISSION_CHECKS, "create", "patch"),
    Rule.of(resources.CLUSTER_ROLES, "get"),  # owner_references: the chart's ClusterRole, by name
)
"""The API verbs Prepare calls with the worker's ServiceAccount (install.rbac renders them)."""


class PrepareError(RuntimeError):
    """A Prepare step could not complete; the worker exits and Kubernetes restarts it."""


async def prepare(
    client: Client,
    environment: Environment,
    settings: Mapping[str, str],
    *,
    crd_timeout: float,
    install_apiservices: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """The Prepare phase: system namespace, CRDs (Established), APIServices (when the worker serves the
    aggregated API), settings Secret, NFD's CPU-info rule, the admission check."""
    namespace = environment.pod_namespace
    try:
        await client.create(resources.NAMESPACES, {"metadata": {"name": namespace}})
        log.info("Prepare: created system namespace %s", namespace)
    except errors.AlreadyExists:
        log.info("Prepare: system namespace %s exists", namespace)
    await install_crds(client, timeout=crd_timeout)
    if install_apiservices is not None:
        await install_apiservices()
    await initialize_settings(client, namespace, settings)
    await install_node_feature_rule(client)
    await install_admission_check(client)


async def owner_references(client: Client, cluster_role: str | None) -> list[JSONObj]:
    """The ownerReferences naming `cluster_role` (empty when None); PrepareError when it does not exist."""
    if cluster_role is None:
        return []
    role = await client.get_or_none(resources.CLUSTER_ROLES, cluster_role)
    if role is None:
        raise PrepareError(
            f"ClusterRole {cluster_role} (--owner-cluster-role) does not exist: the chart creates it; "
            "outside the chart leave the flag out"
        )
    meta = role["metadata"]
    ref = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": meta["name"]}
    log.info("Prepare: cluster-scoped objects will be owned by ClusterRole %s", cluster_role)
    return [{**ref, "uid": meta["uid"]}]


async def install_crds(client: Client, *, timeout: float) -> None:
    """Server-side apply every CRD we own, then wait until each is Established."""
    try:
        await definitions.apply_and_wait(client, custom_resource_definitions(), timeout=timeout)
    except definitions.NotEstablishedError as e:
        raise PrepareError(str(e)) from None


async def initialize_settings(
    client: Client, namespace: str, values: Mapping[str, str], *, attempts: int = 5
) -> None:
    """Create the settings Secret, or add the keys it lacks; a racing replica makes us re-read and retry."""
    where = f"{namespace}/{secret.SECRET_NAME}"
    for _ in range(attempts):
        current = await client.get_or_none(resources.SECRETS, secret.SECRET_NAME, namespace)
        try:
            if current is None:
                await client.create(resources.SECRETS, secret.new_secret(values, namespace=namespace))
                log.info("Prepare: created settings Secret %s with %s keys", where, len(values))
                return
            patch = secret.backfill_patch(current, values)
            if patch is None:
                log.info("Prepare: settings Secret %s has every key", where)
                return
            await client.patch(resources.SECRETS, secret.SECRET_NAME, patch, namespace=namespace)
            log.info(
                "Prepare: settings Secret %s backfilled %s", where, ", ".join(sorted(patch.get("data", {})))
            )
            return
        except (errors.AlreadyExists, errors.Conflict) as e:
            log.info("Prepare: settings Secret %s changed meanwhile (%s); retrying", where, e.reason)
    raise PrepareError(f"settings Secret {where} kept changing; gave up after {attempts} attempts")


async def install_node_feature_rule(client: Client) -> None:
    """Server-side apply the `gpustack-cpu-info` NodeFeatureRule for every known manufacturer's vendor ID."""
    rule = cpu_info_rule(m.pci_vendor_id for m in manufacturers().values())
    try:
        await client.apply(resources.NODE_FEATURE_RULES, rule)
    except errors.NotFound as e:
        raise PrepareError(
            f"cannot apply NodeFeatureRule {rule['metadata']['name']}: NFD's CRDs are not installed "
            "(nodefeaturerules.nfd.k8s-sigs.io); install Node Feature Discovery first"
        ) from e
    log.info("Prepare: applied NodeFeatureRule %s", rule["metadata"]["name"])


async def install_admission_check(client: Client) -> None:
    """Server-side apply the `gpustack-node-devices` AdmissionCheck (no finalizers: those are Kueue's)."""
    check = {
        "metadata": {"name": NODE_DEVICES_ADMISSION_CHECK},
        "spec": {"controllerName": NODE_DEVICES_CONTROLLER_NAME},
    }
    try:
        await client.apply(resources.ADMISSION_CHECKS, check)
    except errors.NotFound as e:
        raise PrepareError(
            f"cannot apply AdmissionCheck {NODE_DEVICES_ADMISSION_CHECK}: Kueue's CRDs are not installed "
            "(admissionchecks.kueue.x-k8s.io); install Kueue first"
        ) from e
    log.info("Prepare: applied AdmissionCheck %s", NODE_DEVICES_ADMISSION_CHECK)
