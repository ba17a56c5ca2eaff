"""The worker's wiring of the aggregated API: what the served table and the webhooks read, built from the
worker's own client and informers.

What is served, and how it is registered and kept registered, is apiserver's (apiserver/catalog.py is the
table, apiserver/aggregated.py the server and its keepers); here the worker only hands it the API client,
the system namespace, the shared InstanceType informer (v1 GET, LIST and WATCH read it; it keeps
managedFields, which a plain GET and a watch serve on), the webhooks' lookups over the informers the
controllers share, and the admission check's what-if for `instancetypes/fit`.
"""

from __future__ import annotations

from gpustack_operator.api.keys import SETTINGS_SECRET
from gpustack_operator.apiserver import aggregated, catalog, delegation
from gpustack_operator.apiserver.aggregated import AggregatedAPI, AggregationOptions
from gpustack_operator.apiserver.catalog import CATALOG
from gpustack_operator.apiserver.served import Backends, Fitter
from gpustack_operator.apiserver.webhooks import lookup
from gpustack_operator.apiserver.webhooks.kinds import worker_webhooks
from gpustack_operator.apiserver.webhooks.lookup import Lookups
from gpustack_operator.apiserver.webhooks.server import ReviewObserver, WebhookRoutes
from gpustack_operator.controllerkit.rbac import SYSTEM, BuiltInRole, Rule
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.informer import Informer, InformerFactory
from gpustack_operator.settings.environment import Environment

__all__ = ["BUILT_IN_ROLES", "RBAC", "aggregated_api", "rbac_parts"]

RBAC: tuple[Rule, ...] = (
    Rule.of(resources.INSTANCE_TYPES, "list", "watch"),
    Rule.of(resources.SECRETS, "list", "watch", namespace=SYSTEM),  # the settings Secret, by name
    Rule.of(resources.RESOURCE_FLAVORS, "list", "watch"),  # an InstanceType's pool flavors (§4.1)
    Rule.of(resources.DEVICES, "list", "watch"),  # its card's exact VRAM (§4.1)
)
"""The informers `_lookups` asks for (shared with the controllers that watch the same)."""
BUILT_IN_ROLES: tuple[BuiltInRole, ...] = delegation.BUILT_IN_ROLES


def rbac_parts() -> dict[str, tuple[Rule, ...]]:
    """The aggregated API's and the webhooks' API verbs, by the module (or served resource) calling them."""
    return {
        __name__: RBAC,
        aggregated.__name__: aggregated.RBAC,
        lookup.__name__: lookup.RBAC,
        **{f"{catalog.__name__} {name}": rules for name, rules in CATALOG.rbac.items()},
    }


def _lookups(client: Client, informers: InformerFactory, environment: Environment) -> Lookups:
    """The webhooks' reads, from the informers the controllers share (every InstanceType, every
    ResourceFlavor and every Devices; the settings Secret, selected as controllers.settingsview selects
    it)."""
    namespace = environment.pod_namespace
    return Lookups(
        client,
        namespace,
        instance_types=informers.informer(resources.INSTANCE_TYPES),
        settings=informers.informer(
            resources.SECRETS, namespace=namespace, field_selector=f"metadata.name={SETTINGS_SECRET}"
        ),
        resource_flavors=informers.informer(resources.RESOURCE_FLAVORS),
        devices=informers.informer(resources.DEVICES),
    )


def aggregated_api(
    client: Client,
    informers: InformerFactory,
    options: AggregationOptions,
    environment: Environment,
    observe_review: ReviewObserver | None = None,
    fit: Fitter | None = None,
) -> AggregatedAPI:
    """The aggregated API of `CATALOG` over `client` and the worker's informers, with the webhooks unless
    `options` turn them off; `fit` answers `instancetypes/fit` (the admission check's what-if)."""
    lookups = _lookups(client, informers, environment)
    types = lookups.instance_types_cache
    caches = {}
    if isinstance(types, Informer):
        types.keep_managed_fields = True
        caches[resources.INSTANCE_TYPES] = types
    webhooks = (
        WebhookRoutes(worker_webhooks(lookups, environment.pod_namespace), observe_review)
        if options.webhooks
        else None
    )
    backends = Backends(client, environment.pod_namespace, caches, fit)
    return AggregatedAPI(CATALOG, backends, options, environment, webhooks)
