"""An upstream refusal passed on through the aggregated API keeps the reason kubectl prints."""

from __future__ import annotations

import json

from gpustack_operator.apiserver.status import from_kube_error
from gpustack_operator.kube.errors import from_response


def passed_on(code: int, reason: str) -> str:
    body = json.dumps({"kind": "Status", "status": "Failure", "reason": reason, "message": "m", "code": code})
    return from_kube_error(from_response(code, body)).reason


def test_already_exists_stays_already_exists_and_a_conflict_a_conflict() -> None:
    assert passed_on(409, "AlreadyExists") == "AlreadyExists"  # kubectl: Error from server (AlreadyExists)
    assert passed_on(409, "Conflict") == "Conflict"
    assert passed_on(409, "") == "Conflict"


def test_a_reasonless_refusal_gets_the_reason_of_its_code_not_our_class_name() -> None:
    assert passed_on(410, "") == "Expired"
    assert passed_on(503, "") == "ServiceUnavailable"
    assert passed_on(404, "") == "NotFound"
    assert passed_on(410, "Expired") == "Expired"
