"""kube-apiserver answers become our own errors, with the field causes an admin needs."""

from __future__ import annotations

import json

import pytest

from gpustack_operator.kube import errors


def status(code: int, reason: str, **details: object) -> bytes:
    return json.dumps(
        {
            "kind": "Status",
            "status": "Failure",
            "code": code,
            "reason": reason,
            "message": f"{reason} happened",
            "details": details,
        }
    ).encode()


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        pytest.param(404, "NotFound", errors.NotFound, id="not-found"),
        pytest.param(409, "AlreadyExists", errors.AlreadyExists, id="create-collision"),
        pytest.param(409, "Conflict", errors.Conflict, id="stale-resource-version"),
        pytest.param(422, "Invalid", errors.Invalid, id="validation"),
        pytest.param(403, "Forbidden", errors.Forbidden, id="rbac-or-admission"),
        pytest.param(410, "Expired", errors.Gone, id="watch-expired"),
        pytest.param(429, "TooManyRequests", errors.TooManyRequests, id="throttled"),
        pytest.param(503, "ServiceUnavailable", errors.Unavailable, id="aggregated-api-down"),
        pytest.param(500, "InternalError", errors.Unavailable, id="webhook-timeout"),
    ],
)
def test_status_codes_map_to_our_hierarchy(code: int, reason: str, cls: type[errors.KubeError]) -> None:
    err = errors.from_response(code, status(code, reason))
    assert type(err) is cls
    assert err.reason == reason
    assert err.transient is (cls in (errors.TooManyRequests, errors.Unavailable))


def test_invalid_keeps_field_causes_for_the_user() -> None:
    body = status(
        422,
        "Invalid",
        causes=[{"field": "spec.os", "reason": "FieldValueRequired", "message": "Required value"}],
    )
    err = errors.from_response(422, body)
    assert err.causes == [errors.Cause("spec.os", "FieldValueRequired", "Required value")]
    assert "spec.os: Required value" in str(err)


def test_retry_after_comes_from_header_or_details() -> None:
    assert errors.from_response(429, status(429, "TooManyRequests"), "3").retry_after == 3.0
    assert errors.from_response(429, status(429, "TooManyRequests", retryAfterSeconds=7)).retry_after == 7.0


def test_non_json_body_still_gives_a_readable_error() -> None:
    err = errors.from_response(502, b"<html>bad gateway</html>")
    assert isinstance(err, errors.Unavailable)
    assert "bad gateway" in err.message
