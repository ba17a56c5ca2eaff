"""The Pod webhooks (contract §4.4): fold a sliced-GPU request into units, and refuse what cannot be served.

Why this module exists: a user asks for a slice by memory (`<base>.sliced.memory-percentage` or
`.memory-mib`), but Kueue's credits and the device plugin count `<base>.sliced.units`; the mutating hook
writes the units (in requests and limits, always recomputed, a client's own value ignored) and defaults the
compute share, before Kueue's own Pod webhook hashes the resources (our configuration's name sorts first).
A memory in MiB is divided by the card VRAM of the pool's InstanceType, found by the Pod's
`kueue.x-k8s.io/queue-name` label through the InstanceTypes' `schedule.gpustack.ai/queue-entrance` label,
never by reading the LocalQueue, which any user of the namespace may write. The checks refuse a Pod mixing
card modes, a sliced container without exactly one memory key or asking for more than one slice of a card
that is not NVIDIA's, and a second container asking for cards of a mode another container already asks for
(the device manager attributes one allocation per Pod, so that container's cards would be lost or given to
another Pod); the mutating hook runs them on the Pods it folds, the validating hook on the other accelerator
Pods (one round trip per Pod, see `card_request_condition`). The rules themselves are pure
(rules.slicing.pods); this module reads the Pod, finds the VRAM and shapes the refusals.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonpointer

from gpustack_operator.api import field
from gpustack_operator.api.field import FieldError
from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import KUEUE_QUEUE_NAME_LABEL
from gpustack_operator.api.quantity import InvalidQuantityError, Quantity
from gpustack_operator.apiserver.status import invalid
from gpustack_operator.apiserver.webhooks.lookup import Lookups
from gpustack_operator.apiserver.webhooks.review import Review, Verdict
from gpustack_operator.rules.capacity.credits import quantity_to_mib
from gpustack_operator.rules.cards import SliceUnitsError
from gpustack_operator.rules.environ import DEFAULT_ENVIRON, Environ
from gpustack_operator.rules.naming.resources import ResourceKind, acceleratable_bases, resource_name_for
from gpustack_operator.rules.slicing.pods import (
    mixed_modes_problem,
    needs_card_memory,
    repeated_card_requests,
    sliced_bases,
    sliced_defaults,
    sliced_problems,
)

__all__ = ["JOB", "POD", "PodHooks", "Where", "card_request_condition"]

_SECTIONS = ("requests", "limits")


class _RefusedError(Exception):
    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__(errors)
        self.errors = errors


@dataclass(frozen=True)
class Where:
    """Where the Pod spec sits in a reviewed object: the Pod's own, or a Job's Pod template (Kueue builds
    a Job's Workload, and so its charge, from the template, before any Pod exists)."""

    kind: str
    group: str
    spec: tuple[str, ...]

    @property
    def field(self) -> str:
        return ".".join(self.spec)

    @property
    def pointer(self) -> str:
        return "/" + "/".join(self.spec)

    def pod_spec(self, obj: Mapping[str, Any]) -> Any:
        found: Any = obj
        for key in self.spec:
            found = found.get(key) if isinstance(found, dict) else None
        return found


POD = Where("Pod", "", ("spec",))
JOB = Where("Job", "batch", ("spec", "template", "spec"))


def _containers(obj: Mapping[str, Any], where: Where = POD) -> list[tuple[int, str, Mapping[str, Any]]]:
    """(position, field path, container) of every workload container (malformed entries are skipped)."""
    spec = where.pod_spec(obj)
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list):
        return []
    return [(i, f"{where.field}.containers[{i}]", c) for i, c in enumerate(containers) if isinstance(c, dict)]


def _resources(container: Mapping[str, Any], path: str) -> dict[str, Quantity]:
    """The container's requests merged with its limits (limits win, as kube defaults requests from them)."""
    merged: dict[str, Quantity] = {}
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return merged
    errors = []
    for section in _SECTIONS:
        values = resources.get(section)
        if not isinstance(values, dict):
            continue
        for name, value in values.items():
            try:
                if isinstance(value, bool) or not isinstance(value, str | int):
                    raise InvalidQuantityError(f"{value!r} is not a quantity")
                merged[str(name)] = Quantity.parse(str(value))
            except (InvalidQuantityError, ValueError):
                errors.append(field.invalid(f"{path}.resources.{section}[{name}]", value, "not a quantity"))
    if errors:
        raise _RefusedError(errors)
    return merged


def _memory_key(container: Mapping[str, Any], path: str, base: str, by_mib: bool) -> tuple[str, object]:
    """(field path, value) of the memory key a slice of `base` is sized by (the percentage, unless the
    units come from MiB), in the section whose value counts (limits over requests), for refusals."""
    kind = ResourceKind.SLICED_MEMORY_MIB if by_mib else ResourceKind.SLICED_MEMORY_PERCENTAGE
    name = resource_name_for(base, kind)
    resources = container.get("resources") or {}
    for section in reversed(_SECTIONS):  # the later section wins in `_resources`' merge
        values = resources.get(section) if isinstance(resources, dict) else None
        if isinstance(values, dict) and name in values:
            return f"{path}.resources.{section}[{name}]", values[name]
    return f"{path}.resources", name


def _set_resources(
    index: int, container: Mapping[str, Any], values: Mapping[str, str], where: Where = POD
) -> list[JSONObj]:
    """JSON patch operations setting `values` in the requests and limits of container `index`.

    The fold knows what it sets, so it says so: diffing the whole Pod (jsonpatch) cost 0.25 ms per review,
    the largest part of the webhook's CPU. One `add` per value (it replaces a value present, RFC 6902), or
    of the whole section or `resources` where the container has none."""
    at = f"{where.pointer}/containers/{index}/resources"
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return [{"op": "add", "path": at, "value": {section: dict(values) for section in _SECTIONS}}]
    patch: list[JSONObj] = []
    for section in _SECTIONS:
        if not isinstance(resources.get(section), dict):
            patch.append({"op": "add", "path": f"{at}/{section}", "value": dict(values)})
            continue
        for name, value in values.items():
            patch.append({"op": "add", "path": f"{at}/{section}/{jsonpointer.escape(name)}", "value": value})
    return patch


def _names_test(bases: list[str], sliced: bool) -> str:
    """CEL over a resource name `k`: one of the bases' sliced resources, or (not `sliced`) any of theirs."""
    return " || ".join(
        f"k.startsWith({json.dumps(b + '.sliced')})"
        if sliced
        else f"k == {json.dumps(b)} || k.startsWith({json.dumps(b + '.')})"
        for b in bases
    )


def _any_container_names(bases: list[str], sliced: bool, where: Where) -> str:
    sections = " || ".join(
        f"(has(c.resources.{section}) && c.resources.{section}.exists(k, {_names_test(bases, sliced)}))"
        for section in _SECTIONS
    )
    return f"object.{where.field}.containers.exists(c, has(c.resources) && ({sections}))"


def card_request_condition(mutating: bool, environ: Environ = DEFAULT_ENVIRON, where: Where = POD) -> JSONObj:
    """A Pod webhook's matchCondition (CEL, evaluated in kube-apiserver before it calls us).

    Mutating: a container's requests or limits name a sliced resource of a known accelerator
    (`<base>.sliced…`); the hook folds and then checks the whole Pod. Validating: they name an accelerator
    resource (`<base>` or `<base>.…`) and none is sliced, whose Pods the mutating hook has checked already.
    So a queued CPU-only Pod makes no round trip to us and any accelerator Pod exactly one (two round trips
    cost a sliced Pod create 1.9x a create without them, one 1.2x: tests/bench/bench_webhooks.py). Each test
    is a superset of what its hook acts on: a name that merely starts with a base is sent and left alone.
    Both hooks trust, as the fold always has (it is not reinvoked), that no mutating webhook after ours adds
    accelerator requests."""
    bases = sorted(acceleratable_bases(environ))
    sliced = _any_container_names(bases, True, where)
    if mutating:
        return {"name": "asks-for-sliced-accelerators", "expression": sliced}
    expression = f"{_any_container_names(bases, False, where)} && !({sliced})"
    return {"name": "asks-for-whole-or-shared-accelerators", "expression": expression}


def _refusal(review: Review, errors: list[FieldError], where: Where = POD) -> Verdict:
    name = review.name or str(((review.object or {}).get("metadata") or {}).get("generateName") or "")
    return Verdict.deny(invalid(where.kind, where.group, name, errors))


class PodHooks:
    """The mutating and validating Pod hooks (CREATE only; the configuration selects labelled Pods)."""

    def __init__(self, lookups: Lookups, environ: Environ = DEFAULT_ENVIRON) -> None:
        self.lookups = lookups
        self.environ = environ

    async def mutate(self, review: Review) -> Verdict:
        """The fold, then the checks on the folded Pod: kube-apiserver calls only this hook for a sliced
        Pod (see `card_request_condition`), so it refuses what the validating hook would."""
        return await self._mutate(review, POD)

    async def mutate_job(self, review: Review) -> Verdict:
        """The same for a Job's Pod template (the Job's queue label names the pool for a MiB slice)."""
        return await self._mutate(review, JOB)

    async def _mutate(self, review: Review, where: Where) -> Verdict:
        pod = review.object
        if pod is None:
            return Verdict.allow()
        patch: list[JSONObj] = []
        folded_pod: list[tuple[str, dict[str, Quantity]]] = []
        try:
            for index, path, container in _containers(pod, where):
                resources = _resources(container, path)
                folded: dict[str, str] = {}
                for base in sliced_bases(resources, self.environ):
                    by_mib = needs_card_memory(resources, base)
                    memory = _memory_key(container, path, base, by_mib)
                    card = await self._card_memory(pod, memory, base) if by_mib else None
                    try:
                        defaults = sliced_defaults(resources, base, card)
                    except SliceUnitsError as err:
                        raise _RefusedError([field.invalid(*memory, str(err))]) from None
                    folded.update({name: str(q) for name, q in defaults.items()})
                    resources.update(defaults)
                if folded:
                    patch += _set_resources(index, container, folded, where)
                folded_pod.append((path, resources))
        except _RefusedError as refused:
            return _refusal(review, refused.errors, where)
        errors = self._problems(folded_pod, where)
        if errors:
            return _refusal(review, errors, where)
        return Verdict.allow(patch=patch) if patch else Verdict.allow()

    async def _card_memory(self, pod: Mapping[str, Any], memory: tuple[str, object], base: str) -> int | None:
        """The per-card VRAM (MiB) of the InstanceType the Pod queues for; refuses when it is not one type,
        naming the `memory` key (field path, value) that needed it."""
        labels = (pod.get("metadata") or {}).get("labels") or {}
        queue = labels.get(KUEUE_QUEUE_NAME_LABEL) if isinstance(labels, dict) else None
        if not isinstance(queue, str) or not queue:
            raise _RefusedError(
                [
                    field.required(
                        f"metadata.labels[{KUEUE_QUEUE_NAME_LABEL}]",
                        f"{base}.sliced.memory-mib needs the queue of an InstanceType",
                    )
                ]
            )
        types = await self.lookups.instance_types_at_entrance(queue)
        if len(types) != 1:
            found = "no InstanceType" if not types else f"{len(types)} InstanceTypes"
            raise _RefusedError(
                [field.invalid(*memory, f"the card's VRAM is unknown: {found} enter through queue {queue!r}")]
            )
        spec = (types[0].get("spec") or {}).get("memory")
        try:
            mib = quantity_to_mib(Quantity.parse(str(spec))) if spec is not None else 0
        except (InvalidQuantityError, ValueError):
            mib = 0
        if mib <= 0:
            name = (types[0].get("metadata") or {}).get("name")
            raise _RefusedError(
                [field.invalid(*memory, f"InstanceType {name!r} gives no card memory (spec.memory {spec!r})")]
            )
        return mib

    async def validate(self, review: Review) -> Verdict:
        pod = review.object
        if pod is None:
            return Verdict.allow()
        errors: list[FieldError] = []
        containers: list[tuple[str, dict[str, Quantity]]] = []
        for _, path, container in _containers(pod):
            try:
                containers.append((path, _resources(container, path)))
            except _RefusedError as refused:
                errors += refused.errors
                containers.append((path, {}))
        errors += self._problems(containers)
        return _refusal(review, errors) if errors else Verdict.allow()

    def _problems(
        self, containers: list[tuple[str, dict[str, Quantity]]], where: Where = POD
    ) -> list[FieldError]:
        """What is wrong with a Pod whose containers (field path, requests merged with limits) are these."""
        errors: list[FieldError] = []
        for path, resources in containers:
            for base in sliced_bases(resources, self.environ):
                errors += [
                    FieldError(field.ErrorType.INVALID, f"{path}.resources", problem)
                    for problem in sliced_problems(resources, base, self.environ)
                ]
        names = [list(resources) for _, resources in containers]
        mixed = mixed_modes_problem(names, self.environ)
        if mixed:
            errors.append(field.forbidden(f"{where.field}.containers", mixed))
        for index, earlier, resource in repeated_card_requests(names, self.environ):
            errors.append(
                field.forbidden(
                    f"{containers[index][0]}.resources",
                    f"{resource} is already requested by {containers[earlier][0]}; the cards of a Pod must "
                    "be requested by one container (others may share them with "
                    "device.gpustack.ai/<manufacturer>.visibility)",
                )
            )
        return errors
