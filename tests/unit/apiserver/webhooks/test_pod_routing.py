"""The Pod routing's CEL as generated: each Pod goes to at most one of our webhooks, and the fold policy
takes exactly the sliced Pods the mutating webhook no longer gets. What kube-apiserver does with the CEL
(folding, calls counted per hook) is tested against the real one in
tests/integration/test_worker_webhooks.py."""

from __future__ import annotations

from gpustack_operator.apiserver.webhooks.kinds import QUEUED, worker_policies
from gpustack_operator.apiserver.webhooks.pod_routing import (
    FOLD_POLICY,
    card_request_condition,
    fold_policy,
)
from gpustack_operator.rules.cards import MEMORY_PERCENT_UNITS
from gpustack_operator.rules.naming.resources import acceleratable_bases


def test_without_the_policy_the_mutating_hook_gets_every_sliced_pod_and_the_validating_hook_the_rest() -> (
    None
):
    mutating = card_request_condition(True, False)["expression"]
    validating = card_request_condition(False, False)["expression"]
    assert validating.endswith(f"&& !({mutating})")
    assert "memory-percentage" not in mutating


def test_with_the_policy_the_webhooks_exclude_each_other_and_the_policy_takes_the_complement() -> None:
    mutating = card_request_condition(True, True)["expression"]
    validating = card_request_condition(False, True)["expression"]
    assert validating.endswith(f"&& !({mutating})")
    policy = fold_policy(QUEUED)
    conditions = [c["expression"] for c in policy["spec"]["matchConditions"]]
    # the policy: some slice, and every slice foldable; the mutating hook: some slice not foldable
    assert conditions[0] == card_request_condition(True, False)["expression"]
    assert conditions[1].startswith("object.spec.containers.all(c, ")
    assert mutating.startswith("object.spec.containers.exists(c, ")
    for base in acceleratable_bases():
        assert f'"{base}.sliced.memory-percentage"' in conditions[1]
        assert f'"{base}.sliced.memory-percentage"' in mutating


def test_the_policy_is_bound_selects_queued_pods_and_folds_in_card_units() -> None:
    policy, binding = worker_policies()
    assert (
        policy["metadata"]["name"]
        == binding["metadata"]["name"]
        == binding["spec"]["policyName"]
        == FOLD_POLICY
    )
    assert policy["spec"]["matchConstraints"]["objectSelector"] == QUEUED
    assert policy["spec"]["failurePolicy"] == "Fail"
    expression = policy["spec"]["mutations"][0]["applyConfiguration"]["expression"]
    assert f"* {MEMORY_PERCENT_UNITS})" in expression
    assert '"^([1-9][0-9]?|100)$"' in expression
