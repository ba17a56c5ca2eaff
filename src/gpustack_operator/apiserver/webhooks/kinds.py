"""The InstanceType and Instance webhooks, and the list of every webhook the worker serves.

Why this module exists: the rules of contract §4.1–4.3 are pure functions over the object
(rules.instancetype.spec and rules.instance.spec); a hook adds what they need from the cluster (a setting, the
Instance's InstanceType, both cache-first through `Lookups`) and turns their field errors into the 422 Status
kubectl prints as `<Kind>.<group> "<name>" is invalid: …`. `worker_webhooks` is the one list that both the
routes and the configurations Prepare applies are built from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpustack_operator.api.field import FieldError
from gpustack_operator.api.keys import KUEUE_QUEUE_NAME_LABEL
from gpustack_operator.apiserver.status import invalid
from gpustack_operator.apiserver.webhooks.lookup import Lookups
from gpustack_operator.apiserver.webhooks.pod import JOB, PodHooks, card_request_condition
from gpustack_operator.apiserver.webhooks.review import Review, Verdict
from gpustack_operator.apiserver.webhooks.server import Rule, Webhook
from gpustack_operator.kube import resources
from gpustack_operator.kube.resources import Resource
from gpustack_operator.rules.instance import spec as instance
from gpustack_operator.rules.instancetype import descriptors
from gpustack_operator.rules.instancetype import spec as instancetype
from gpustack_operator.settings.catalog import (
    INSTANCE_GENERAL_RESOURCES_OVERCOMMIT,
    INSTANCE_PRIVILEGED_ALLOWED,
    INSTANCE_TYPE_AWARE_CPU_MANUFACTURER,
)

__all__ = ["InstanceHooks", "InstanceTypeHooks", "worker_webhooks"]

CREATE_UPDATE = ("CREATE", "UPDATE")
POD_NAME_PREFIX = "gpustack-worker"


def _verdict(res: Resource, review: Review, errors: list[FieldError]) -> Verdict:
    if not errors:
        return Verdict.allow()
    return Verdict.deny(invalid(res.kind, res.group, review.name, errors))


def _spec(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    spec = (obj or {}).get("spec")
    return spec if isinstance(spec, dict) else {}


class InstanceTypeHooks:
    """§4.1 defaults (labels the pool and its queue entrance; on create, the device details from the
    pool's ResourceFlavors, rules.instancetype.descriptors) and §4.2 checks (complete on create, frozen
    on update but for displayName, description and inactive).

    The details are filled on CREATE only: the spec is frozen afterwards, so an UPDATE keeps what the
    stored type has (a manifest that omits a defaulted detail does not read as changing it) and never
    reads the flavors again (a flavor that changed since would make the update a refused change).
    """

    def __init__(self, lookups: Lookups) -> None:
        self.lookups = lookups

    async def mutate(self, review: Review) -> Verdict:
        if review.object is None:
            return Verdict.allow()
        aware = await self.lookups.flag(INSTANCE_TYPE_AWARE_CPU_MANUFACTURER)
        obj = instancetype.default(review.object, aware=aware)
        if review.operation == "UPDATE":
            if review.old_object is not None:
                obj = descriptors.carry_over(review.old_object, obj)
            return Verdict.allow(obj)
        selector = descriptors.flavor_selector(obj, aware=aware)
        flavors = await self.lookups.resource_flavors(selector) if selector else []
        cards = descriptors.devices_selector(obj)
        devices = await self.lookups.devices(cards) if cards and flavors else []
        return Verdict.allow(descriptors.enrich(obj, flavors, aware=aware, devices=devices))

    async def validate(self, review: Review) -> Verdict:
        obj, old = review.object or {}, review.old_object
        if review.operation == "UPDATE" and old is not None:
            return _verdict(resources.INSTANCE_TYPES, review, instancetype.validate_update(old, obj))
        return _verdict(resources.INSTANCE_TYPES, review, instancetype.validate_create(obj))


class InstanceHooks:
    """§4.3 defaults (resources folded from the type's units) and checks (type, volume, caps; what may
    change while running; start only from Stopped), and the Era C settings gate: privileged mode only
    where ``instance-privileged-allowed`` is true (the refusal names the setting)."""

    def __init__(self, lookups: Lookups, system_namespace: str) -> None:
        self.lookups = lookups
        self.system_namespace = system_namespace

    async def _type_of(self, obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
        name = _spec(obj).get("type")
        if not isinstance(name, str) or not name:
            return None
        return await self.lookups.instance_type(name)

    async def mutate(self, review: Review) -> Verdict:
        if review.object is None:
            return Verdict.allow()
        spec = _spec(review.object)
        # Resources are folded when an Instance is created or started, never under a running one (a
        # changed overcommit setting would otherwise rewrite them, and the update be refused as a change).
        running = review.operation == "UPDATE" and not _spec(review.old_object).get("stop")
        needs_type = bool(spec.get("type")) and not spec.get("stop") and not running
        instance_type = await self._type_of(review.object) if needs_type else None
        overcommit = await self.lookups.flag(INSTANCE_GENERAL_RESOURCES_OVERCOMMIT)
        return Verdict.allow(instance.default(review.object, instance_type, overcommit=overcommit))

    async def validate(self, review: Review) -> Verdict:
        obj, old = review.object or {}, review.old_object
        instance_type = await self._type_of(obj)
        if review.operation == "UPDATE" and old is not None:
            errors = instance.validate_update(old, obj, instance_type)
        else:
            errors = instance.validate_create(obj, instance_type, system_namespace=self.system_namespace)
        if _spec(obj).get("privileged") is True:  # the setting is read only when it can matter
            allowed = await self.lookups.flag(INSTANCE_PRIVILEGED_ALLOWED)
            errors = [*errors, *instance.validate_privileges(old, obj, privileged_allowed=allowed)]
        return _verdict(resources.INSTANCES, review, errors)


def _rule(res: Resource, operations: tuple[str, ...]) -> Rule:
    scope = "Namespaced" if res.namespaced else "Cluster"
    return Rule(res.group, res.version, res.plural, res.kind, scope, operations)


def worker_webhooks(lookups: Lookups, system_namespace: str) -> list[Webhook]:
    """Every webhook the worker serves (contract §4's table, Era B)."""
    types = InstanceTypeHooks(lookups)
    instances = InstanceHooks(lookups, system_namespace)
    pods = PodHooks(lookups)
    queued = {"matchExpressions": [{"key": KUEUE_QUEUE_NAME_LABEL, "operator": "Exists"}]}
    pod_rule = _rule(resources.PODS, ("CREATE",))
    return [
        Webhook(_rule(resources.INSTANCE_TYPES, CREATE_UPDATE), True, types.mutate),
        Webhook(_rule(resources.INSTANCE_TYPES, CREATE_UPDATE), False, types.validate),
        Webhook(_rule(resources.INSTANCES, CREATE_UPDATE), True, instances.mutate),
        Webhook(_rule(resources.INSTANCES, CREATE_UPDATE), False, instances.validate),
        *(
            Webhook(pod_rule, mutating, hook, POD_NAME_PREFIX, queued, (card_request_condition(mutating),))
            for mutating, hook in ((True, pods.mutate), (False, pods.validate))
        ),
        # A queued Job's Workload (and so Kueue's and the check's charge) is built from its Pod template:
        # the template is folded as a Pod is, before Kueue's Job webhook and controller see it.
        Webhook(
            _rule(resources.JOBS, ("CREATE",)),
            True,
            pods.mutate_job,
            POD_NAME_PREFIX,
            queued,
            (card_request_condition(True, where=JOB),),
        ),
    ]
