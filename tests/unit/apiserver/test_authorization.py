"""What the aggregated API allows, through SubjectAccessReviews (guide §4.4), and the 403 a user reads."""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_operator.apiserver import requestinfo
from gpustack_operator.apiserver.authn import User
from gpustack_operator.apiserver.authz import Authorizer, access_review
from gpustack_operator.apiserver.status import StatusError

ALICE = User("alice", groups=("dev", "system:authenticated"))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def reviewer(answers: list[dict[str, Any]], seen: list[dict[str, Any]]) -> Any:
    async def review(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        return answers.pop(0)

    return review


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        pytest.param("GET", "/apis/worker.gpustack.ai/v1/instancetypes", {}, ("list", "", "", ""), id="list"),
        pytest.param(
            "GET",
            "/apis/worker.gpustack.ai/v1/instancetypes",
            {"watch": "true", "fieldSelector": "metadata.name=a100"},
            ("watch", "", "", "a100"),
            id="watch lifts the name from a metadata.name selector",
        ),
        pytest.param(
            "GET",
            "/apis/worker.gpustack.ai/v1/instancetypes",
            {"watch": ""},
            ("watch", "", "", ""),
            id="an empty watch value is a watch, as kube reads it",
        ),
        pytest.param(
            "GET",
            "/apis/worker.gpustack.ai/v1/instancetypes",
            {"watch": "False"},
            ("list", "", "", ""),
            id="watch=false is a list",
        ),
        pytest.param(
            "GET", "/apis/worker.gpustack.ai/v1/instancetypes/a100", {}, ("get", "", "", "a100"), id="get"
        ),
        pytest.param(
            "PUT",
            "/apis/worker.gpustack.ai/v1/instancetypes/a100/status",
            {},
            ("update", "status", "", "a100"),
            id="status update",
        ),
        pytest.param(
            "POST",
            "/apis/worker.gpustack.ai/v1/namespaces/team-a/instances",
            {},
            ("create", "", "team-a", ""),
            id="namespaced create",
        ),
        pytest.param(
            "DELETE",
            "/apis/worker.gpustack.ai/v1/namespaces/team-a/instances",
            {},
            ("deletecollection", "", "team-a", ""),
            id="deletecollection",
        ),
        pytest.param(
            "PATCH",
            "/apis/gpustack.ai/v1/namespaces/gpustack-system/settings/foo",
            {},
            ("patch", "", "gpustack-system", "foo"),
            id="settings patch",
        ),
    ],
)
def test_request_attributes_match_kube_request_info(
    method: str, path: str, query: dict[str, str], expected: tuple[str, str, str, str]
) -> None:
    info = requestinfo.parse(method, path, query)
    assert info.is_resource
    assert (info.verb, info.subresource, info.namespace, info.name) == expected


def test_discovery_is_a_non_resource_review_on_its_path() -> None:
    info = requestinfo.parse("GET", "/apis/worker.gpustack.ai/v1", {})
    assert access_review(ALICE, info)["spec"]["nonResourceAttributes"] == {
        "path": "/apis/worker.gpustack.ai/v1",
        "verb": "get",
    }


async def test_denied_user_reads_kube_forbidden_message_and_the_answer_is_cached() -> None:
    seen: list[dict[str, Any]] = []
    clock = Clock()
    authz = Authorizer(
        reviewer([{"status": {"allowed": False}}, {"status": {"allowed": True}}], seen), clock=clock
    )
    info = requestinfo.parse("GET", "/apis/worker.gpustack.ai/v1/instancetypes/a100", {})
    for _ in range(2):
        with pytest.raises(StatusError) as denied:
            await authz.authorize(ALICE, info)
    assert len(seen) == 1
    err = denied.value
    assert (err.code, err.reason) == (403, "Forbidden")
    assert err.message == (
        'instancetypes.worker.gpustack.ai "a100" is forbidden: User "alice" cannot get resource '
        '"instancetypes" in API group "worker.gpustack.ai" at the cluster scope'
    )
    assert err.details == {"name": "a100", "group": "worker.gpustack.ai", "kind": "instancetypes"}
    clock.now = 11.0
    await authz.authorize(ALICE, info)  # the cached denial expired; the new answer allows
    assert len(seen) == 2


async def test_namespaced_denial_names_the_namespace() -> None:
    authz = Authorizer(reviewer([{"status": {"allowed": False, "reason": "no RBAC"}}], []))
    info = requestinfo.parse("GET", "/apis/worker.gpustack.ai/v1/namespaces/team-a/instances", {})
    with pytest.raises(StatusError) as denied:
        await authz.authorize(ALICE, info)
    assert denied.value.message.endswith(
        'in API group "worker.gpustack.ai" in the namespace "team-a": no RBAC'
    )


async def test_masters_and_probe_paths_need_no_review() -> None:
    seen: list[dict[str, Any]] = []
    authz = Authorizer(reviewer([], seen))
    admin = User("admin", groups=("system:masters",))
    await authz.authorize(admin, requestinfo.parse("DELETE", "/apis/worker.gpustack.ai/v1/instancetypes", {}))
    await authz.authorize(ALICE, requestinfo.parse("GET", "/healthz", {}))
    assert seen == []


async def test_a_review_that_cannot_be_made_is_a_500_never_an_allow() -> None:
    async def broken(body: dict[str, Any]) -> dict[str, Any]:
        raise ConnectionError("apiserver down")

    authz = Authorizer(broken)
    with pytest.raises(StatusError) as failed:
        await authz.authorize(
            ALICE, requestinfo.parse("GET", "/apis/worker.gpustack.ai/v1/instancetypes", {})
        )
    assert (failed.value.code, failed.value.reason) == (500, "InternalError")
