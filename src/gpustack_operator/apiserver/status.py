"""Kubernetes `Status` errors, shaped as kube-apiserver writes them, for every failure we answer.

client-go shows a user our reason and message only when the body is a `Status` with
`Content-Type: application/json`; anything else becomes a generic text per HTTP code. So every refusal
raises StatusError, and the middleware here turns it (and aiohttp's own 404/405, and any bug) into one.
A bug answers 500 InternalError with no traceback; the traceback goes to the log.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence

from aiohttp import web

from gpustack_operator.api.field import FieldError, aggregate
from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube.errors import KubeError

__all__ = [
    "StatusError",
    "bad_request",
    "error_middleware",
    "forbidden",
    "from_kube_error",
    "invalid",
    "method_not_allowed",
    "not_acceptable",
    "not_found",
    "status_response",
    "unauthorized",
    "unsupported_media_type",
]

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
_KUBE_REASONS = frozenset(_REASONS.values()) | {"AlreadyExists"}
"""Reasons kube-apiserver itself writes (metav1.StatusReason) that our errors may carry."""


class StatusError(Exception):
    """A request refused with a Kubernetes Status: HTTP `code`, `reason`, `message`, optional `details`."""

    def __init__(self, code: int, reason: str, message: str, details: JSONObj | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def body(self) -> JSONObj:
        doc: JSONObj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details:
            doc["details"] = self.details
        doc["code"] = self.code
        return doc


def status_response(err: StatusError) -> web.Response:
    return web.Response(
        status=err.code, body=json.dumps(err.body()).encode(), content_type="application/json"
    )


def _details(name: str, group: str, kind: str) -> JSONObj:
    return {k: v for k, v in (("name", name), ("group", group), ("kind", kind)) if v}


def not_found(resource: str = "", group: str = "", name: str = "") -> StatusError:
    """`<resource>.<group> "<name>" not found`, or kube's text for an unknown path."""
    if not resource:
        return StatusError(404, "NotFound", "the server could not find the requested resource")
    qualified = f"{resource}.{group}" if group else resource
    return StatusError(404, "NotFound", f'{qualified} "{name}" not found', _details(name, group, resource))


def unauthorized() -> StatusError:
    return StatusError(401, "Unauthorized", "Unauthorized")


def forbidden(resource: str, group: str, name: str, why: str) -> StatusError:
    """kube's format: `<res>.<group> "<name>" is forbidden: <why>` (name and resource as available)."""
    if not resource:
        message = f"forbidden: {why}"
    else:
        qualified = f"{resource}.{group}" if group else resource
        message = f'{qualified} "{name}" is forbidden: {why}' if name else f"{qualified} is forbidden: {why}"
    return StatusError(403, "Forbidden", message, _details(name, group, resource) or None)


def method_not_allowed(verb: str, kind: str) -> StatusError:
    return StatusError(
        405, "MethodNotAllowed", f'{verb} is not supported on resources of kind "{kind}"', {"kind": kind}
    )


def not_acceptable(accepted: Iterable[str]) -> StatusError:
    return StatusError(
        406, "NotAcceptable", "only the following media types are accepted: " + ", ".join(accepted)
    )


def unsupported_media_type(accepted: Iterable[str]) -> StatusError:
    return StatusError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )


def invalid(kind: str, group: str, name: str, errors: Sequence[FieldError]) -> StatusError:
    """422 Invalid: `<Kind>.<group> "<name>" is invalid: <errors>`, one cause per field error."""
    qualified = f"{kind}.{group}" if group else kind
    message = f"{qualified} {json.dumps(name)} is invalid"
    if errors:
        message += f": {aggregate(errors)}"
    details = {**_details(name, group, kind), "causes": [e.cause() for e in errors]}
    return StatusError(422, "Invalid", message, details)


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def from_kube_error(err: KubeError) -> StatusError:
    """The upstream's refusal, passed on with its code, reason, message and causes."""
    code = err.status or 503
    details: JSONObj | None = None
    if err.causes:
        details = {
            "causes": [{"reason": c.reason, "message": c.message, "field": c.field} for c in err.causes]
        }
    if err.retry_after is not None:
        details = {**(details or {}), "retryAfterSeconds": int(err.retry_after)}
    # The client names a reason-less error after its class; most class names are Kubernetes reasons too
    # (AlreadyExists is the one a 409 must keep), the others (Gone, Unavailable) give way to the code's.
    named_by_client = err.reason in ("", type(err).__name__) and err.reason not in _KUBE_REASONS
    reason = _REASONS.get(code, "") if named_by_client else err.reason
    return StatusError(code, reason or "Unknown", err.message, details)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every refusal as a Status: ours, aiohttp's routing errors, upstream errors, and bugs (500)."""
    try:
        return await handler(request)
    except StatusError as e:
        return status_response(e)
    except KubeError as e:
        return status_response(from_kube_error(e))
    except web.HTTPException as e:
        if e.status < 400:
            raise
        if e.status == 404:
            return status_response(not_found())
        if e.status == 405:
            return status_response(
                StatusError(
                    405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
                )
            )
        reason = _REASONS.get(e.status, "Unknown")
        return status_response(StatusError(e.status, reason, e.reason or reason))
    except Exception:
        log.exception("Request %s %s failed", request.method, request.path)
        return status_response(
            StatusError(
                500, "InternalError", "an error on the server has prevented the request from succeeding"
            )
        )
