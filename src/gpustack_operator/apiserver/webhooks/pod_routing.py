"""Which queued Pods kube-apiserver sends where: the Pod webhooks' matchConditions, and the sliced-Pod fold
as a MutatingAdmissionPolicy that kube-apiserver evaluates itself.

Why this module exists: every round trip to us is paid on the path users feel most, Pod creation
(tests/bench/bench_webhooks.py). A validating call overlaps Kueue's own; a mutating one runs in series with
Kueue's, and the patch it answers makes kube-apiserver decode and default the Pod again: on the bench the
cheapest patching no-op webhook alone cost a create 1.48-1.52x a create without it, over the goal of 1.5x.
So the CEL here (all of it generated from the names of the known accelerators) routes each Pod to at most
one call, and takes the fold of the common sliced request out of the webhook altogether:

* `FOLD_POLICY`, a MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, Kubernetes >= 1.36), folds a
  Pod in kube-apiserver when every sliced request in it asks for its memory as a whole percentage, 1 to
  100 (`<base>.sliced.memory-percentage: "25"`): units = percentage x `MEMORY_PERCENT_UNITS` (integers,
  exact), and `<base>.sliced.cores-percentage: "100"` where the container names none, in requests and
  limits (a server-side-apply merge by container name, so nothing else in the container changes).
  kube-apiserver runs policies before webhooks, so Kueue's Pod webhook hashes the folded Pod, as the
  contract wants of our mutating webhook.
* Every other sliced Pod (memory in MiB, which needs the VRAM of the pool's InstanceType; a fractional
  percentage, whose exact floor CEL's numbers do not promise; anything malformed) goes to the mutating
  webhook, which folds with the same Python rule and then checks the folded Pod.
* The validating webhook gets every other accelerator Pod, those the policy folded included: it recomputes
  the fold and refuses a Pod whose units or cores disagree with it (PodHooks.validate). The Python rule
  stays the one authority; a policy deleted, edited or wrong delays Pods with a clear refusal, and never
  lets a mis-charged one through.

Without the policy (`fold_by_policy=False`: an older cluster, or `--sliced-fold=webhook`) every sliced Pod
goes to the mutating webhook and the rest of the accelerator Pods to the validating one. A CPU-only Pod
goes nowhere. Each webhook's condition is a superset of what its hook acts on (a name that merely starts
with a base is sent and left alone); both hooks trust, as the fold always has (it is not reinvoked), that
no mutating webhook after ours adds accelerator requests.
"""

from __future__ import annotations

import json
from typing import Any, Final

from gpustack_operator.api.json import JSONObj
from gpustack_operator.rules.cards import DEFAULT_CORES_PERCENTAGE, MEMORY_PERCENT_UNITS
from gpustack_operator.rules.environ import DEFAULT_ENVIRON, Environ
from gpustack_operator.rules.naming.resources import ResourceKind, acceleratable_bases, resource_name_for

__all__ = [
    "FOLD_POLICY",
    "FOLD_POLICY_API_VERSION",
    "card_request_condition",
    "fold_policy",
    "fold_policy_binding",
]

FOLD_POLICY: Final = "gpustack-worker-fold"
"""The name of the MutatingAdmissionPolicy and of its binding."""
FOLD_POLICY_API_VERSION: Final = "admissionregistration.k8s.io/v1"

_SECTIONS = ("requests", "limits")
_WHOLE_PERCENTAGE = "^([1-9][0-9]?|100)$"
"""A quantity kube-apiserver wrote canonically as a whole number 1..100 (12.5 reads `12500m`)."""


def _q(text: str) -> str:
    """`text` as a CEL string literal (JSON's escapes are CEL's)."""
    return json.dumps(text)


def _bases(environ: Environ) -> list[str]:
    return sorted(acceleratable_bases(environ))


def _names(c: str, test: str) -> str:
    """CEL: container `c`'s requests or limits name a resource `k` for which `test` holds."""
    sections = " || ".join(
        f"(has({c}.resources.{s}) && {c}.resources.{s}.exists(k, {test}))" for s in _SECTIONS
    )
    return f"(has({c}.resources) && ({sections}))"


def _has(c: str, name: str) -> str:
    """CEL: container `c` names resource `name` in its requests or limits."""
    sections = " || ".join(f"(has({c}.resources.{s}) && {_q(name)} in {c}.resources.{s})" for s in _SECTIONS)
    return f"(has({c}.resources) && ({sections}))"


def _value(c: str, name: str) -> str:
    """CEL: resource `name` of container `c` as a string, the limit winning over the request (as in
    kube's defaulting and in the webhook's merge); only where `_has` holds."""
    limits, requests, key = f"{c}.resources.limits", f"{c}.resources.requests", _q(name)
    return f"string(has({limits}) && {key} in {limits} ? {limits}[{key}] : {requests}[{key}])"


def _sliced(c: str, base: str) -> str:
    return _names(c, f"k.startsWith({_q(base + ResourceKind.SLICED.value)})")


def _foldable(c: str, base: str) -> str:
    """CEL: the policy can fold container `c`'s slice of `base`: its memory is a whole percentage."""
    percentage = resource_name_for(base, ResourceKind.SLICED_MEMORY_PERCENTAGE)
    return f"({_has(c, percentage)} && {_value(c, percentage)}.matches({_q(_WHOLE_PERCENTAGE)}))"


def _webhook_folds(environ: Environ) -> str:
    """CEL: some container's slice is one only the webhook can fold (or refuse)."""
    pairs = " || ".join(f"({_sliced('c', b)} && !{_foldable('c', b)})" for b in _bases(environ))
    return f"object.spec.containers.exists(c, {pairs})"


def _any_sliced(environ: Environ) -> str:
    tests = " || ".join(f"k.startsWith({_q(b + ResourceKind.SLICED.value)})" for b in _bases(environ))
    return f"object.spec.containers.exists(c, {_names('c', tests)})"


def _any_accelerator(environ: Environ) -> str:
    tests = " || ".join(f"k == {_q(b)} || k.startsWith({_q(b + '.')})" for b in _bases(environ))
    return f"object.spec.containers.exists(c, {_names('c', tests)})"


def card_request_condition(
    mutating: bool, fold_by_policy: bool, environ: Environ = DEFAULT_ENVIRON
) -> JSONObj:
    """A Pod webhook's matchCondition (the module docstring says who gets what)."""
    to_mutating = _webhook_folds(environ) if fold_by_policy else _any_sliced(environ)
    if mutating:
        name = "asks-for-slices-only-the-webhook-folds" if fold_by_policy else "asks-for-sliced-accelerators"
        return {"name": name, "expression": to_mutating}
    name = (
        "asks-for-accelerators-folded-or-unsliced"
        if fold_by_policy
        else "asks-for-whole-or-shared-accelerators"
    )
    return {"name": name, "expression": f"{_any_accelerator(environ)} && !({to_mutating})"}


def _fold(environ: Environ) -> str:
    """CEL: the apply configuration setting, in every container with a whole memory percentage of some
    base, that base's units (and its default cores where the container names none)."""
    entries = []
    for base in _bases(environ):
        percentage = resource_name_for(base, ResourceKind.SLICED_MEMORY_PERCENTAGE)
        units = resource_name_for(base, ResourceKind.SLICED_UNITS)
        cores = resource_name_for(base, ResourceKind.SLICED_CORES_PERCENTAGE)
        folded = f"[{_q(units)}, string(int({_value('c', percentage)}) * {MEMORY_PERCENT_UNITS})]"
        default = f"[{_q(cores)}, {_q(str(DEFAULT_CORES_PERCENTAGE))}]"
        entries.append(
            f"({_foldable('c', base)} ? [{folded}] + ({_has('c', cores)} ? [] : [{default}]) : [])"
        )
    values = f"({' + '.join(entries)}).transformMapEntry(i, e, {{e[0]: e[1]}})"
    resources = f"Object.spec.containers.resources{{requests: {values}, limits: {values}}}"
    anywhere = " || ".join(_foldable("c", b) for b in _bases(environ))
    containers = (
        f"object.spec.containers.filter(c, {anywhere})"
        f".map(c, Object.spec.containers{{name: c.name, resources: {resources}}})"
    )
    return f"Object{{spec: Object.spec{{containers: {containers}}}}}"


def fold_policy(object_selector: dict[str, Any], environ: Environ = DEFAULT_ENVIRON) -> JSONObj:
    """The MutatingAdmissionPolicy folding the Pods (CREATE, selected by `object_selector`) whose every
    slice asks for a whole memory percentage."""
    every_slice_foldable = " && ".join(
        f"(!{_sliced('c', b)} || {_foldable('c', b)})" for b in _bases(environ)
    )
    return {
        "apiVersion": FOLD_POLICY_API_VERSION,
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": FOLD_POLICY},
        "spec": {
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    }
                ],
                "objectSelector": object_selector,
                "matchPolicy": "Equivalent",
            },
            "matchConditions": [
                {"name": "asks-for-sliced-accelerators", "expression": _any_sliced(environ)},
                {
                    "name": "every-slice-by-whole-memory-percentage",
                    "expression": f"object.spec.containers.all(c, {every_slice_foldable})",
                },
            ],
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "mutations": [
                {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": _fold(environ)}}
            ],
        },
    }


def fold_policy_binding() -> JSONObj:
    """The binding that puts `FOLD_POLICY` in force (for everything the policy itself matches)."""
    return {
        "apiVersion": FOLD_POLICY_API_VERSION,
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": FOLD_POLICY},
        "spec": {"policyName": FOLD_POLICY},
    }
