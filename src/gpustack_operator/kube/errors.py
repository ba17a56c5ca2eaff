"""Our error hierarchy for kube-apiserver answers, so callers never see HTTP or client-library types.

A reconciler or the sandbox asks "was it NotFound? a Conflict? worth retrying?" and gets the field causes
of an Invalid answer, without knowing how the request travelled.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Cause:
    """One field cause of a Kubernetes Status (`details.causes[]`)."""

    field: str
    reason: str
    message: str


@dataclass
class KubeError(Exception):
    """An API request failed; status is the HTTP code, reason the Status reason."""

    status: int
    reason: str
    message: str
    causes: list[Cause] = field(default_factory=list)
    retry_after: float | None = None
    transient = False

    def __str__(self) -> str:
        text = f"{self.status} {self.reason}: {self.message}"
        if self.causes:
            text += " (" + "; ".join(f"{c.field}: {c.message}" for c in self.causes) + ")"
        return text


class NotFound(KubeError):
    """The object (or its kind) does not exist."""


class AlreadyExists(KubeError):
    """Create found an object of that name."""


class Conflict(KubeError):
    """A resourceVersion precondition or a server-side apply field conflict failed."""


class Invalid(KubeError):
    """The object was rejected by validation or admission; see causes."""


class Forbidden(KubeError):
    """Authorization or admission refused the request."""


class Unauthorized(KubeError):
    """The credentials were not accepted."""


class Gone(KubeError):
    """The resourceVersion is too old (a watch must relist)."""


class BadRequest(KubeError):
    """The request itself was malformed."""


class TooManyRequests(KubeError):
    """Throttled by priority and fairness; honour retry_after."""

    transient = True


class Unavailable(KubeError):
    """The server (or an aggregated API / webhook behind it) could not answer now."""

    transient = True


class KubeConfigError(ValueError):
    """No usable kubeconfig or in-cluster service account: the message says which and where."""


_BY_STATUS: dict[int, type[KubeError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
    500: Unavailable,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
}


def from_response(status: int, body: bytes | str, retry_after: str | None = None) -> KubeError:
    """Build the matching error from an HTTP status and its (Status) body."""
    try:
        doc: dict[str, Any] = json.loads(body) if body else {}
    except (ValueError, TypeError):
        doc = {}
    if not isinstance(doc, dict):
        doc = {}
    reason = str(doc.get("reason") or "")
    message = str(doc.get("message") or (body.decode(errors="replace") if isinstance(body, bytes) else body))
    details = doc.get("details") or {}
    causes = [
        Cause(str(c.get("field", "")), str(c.get("reason", "")), str(c.get("message", "")))
        for c in details.get("causes") or []
        if isinstance(c, dict)
    ]
    cls: type[KubeError]
    if status == 409:
        cls = AlreadyExists if reason == "AlreadyExists" else Conflict
    else:
        cls = _BY_STATUS.get(status, Unavailable if status >= 500 else KubeError)
    delay: float | None = None
    if retry_after:
        try:
            delay = float(retry_after)
        except ValueError:
            delay = None
    elif details.get("retryAfterSeconds"):
        delay = float(details["retryAfterSeconds"])
    return cls(
        status=status, reason=reason or cls.__name__, message=message, causes=causes, retry_after=delay
    )
