"""AdmissionReview v1 in and out: the request kube-apiserver sends, and the answer it accepts.

Why this module exists: every webhook shares the same envelope. A request is read into `Review` (a
malformed one is a `ReviewError` naming what is wrong, answered 400 and never a crash); a webhook answers
a `Verdict`: allowed, optionally with the mutated object, which jsonpatch turns here into the RFC 6902 JSON
patch kube-apiserver applies (or with the operations themselves, from a hook that knows what it
changes), or denied with a Kubernetes Status (a 422 with field causes reads in kubectl exactly like a
built-in kind's refusal, prefixed by kube-apiserver with the webhook's name).
Pure apart from the Status type: no I/O.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import jsonpatch

from gpustack_operator.api.json import JSONObj
from gpustack_operator.apiserver.status import StatusError

__all__ = ["API_VERSION", "Review", "ReviewError", "Verdict", "answer", "json_patch", "parse"]

API_VERSION: Final = "admission.k8s.io/v1"
KIND: Final = "AdmissionReview"
OPERATIONS: Final = ("CREATE", "UPDATE", "DELETE", "CONNECT")


class ReviewError(ValueError):
    """The body is not an AdmissionReview v1 request; the message says which part is wrong."""


@dataclass(frozen=True)
class Review:
    """The parts of `request` our webhooks read."""

    uid: str
    operation: str
    group: str
    version: str
    kind: str
    name: str
    namespace: str
    object: JSONObj | None
    old_object: JSONObj | None
    dry_run: bool = False
    username: str = ""


@dataclass(frozen=True)
class Verdict:
    """A webhook's answer: `allowed` with an optional mutated object, or denied with `status`."""

    allowed: bool
    mutated: JSONObj | None = None
    status: StatusError | None = None
    warnings: Sequence[str] = field(default_factory=tuple)
    patch: Sequence[JSONObj] | None = None
    """RFC 6902 operations a hook that knows what it changes gives instead of the `mutated` object."""

    @classmethod
    def allow(
        cls,
        mutated: JSONObj | None = None,
        warnings: Sequence[str] = (),
        patch: Sequence[JSONObj] | None = None,
    ) -> Verdict:
        return cls(True, mutated=mutated, warnings=tuple(warnings), patch=patch)

    @classmethod
    def deny(cls, status: StatusError, warnings: Sequence[str] = ()) -> Verdict:
        return cls(False, status=status, warnings=tuple(warnings))


def _text(doc: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> str:
    value = doc.get(key, "")
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ReviewError(f"{where}.{key} must be a string, not {type(value).__name__}")
    if required and not value:
        raise ReviewError(f"{where}.{key} is required")
    return value


def _object(doc: Mapping[str, Any], key: str) -> JSONObj | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ReviewError(f"request.{key} must be an object, not {type(value).__name__}")
    return value


def parse(body: bytes) -> Review:
    """Read an AdmissionReview v1 request; ReviewError when the body is not one."""
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ReviewError(f"the body is not JSON: {err}") from None
    if not isinstance(doc, dict):
        raise ReviewError("the body must be a JSON object")
    if doc.get("apiVersion") != API_VERSION or doc.get("kind") != KIND:
        raise ReviewError(
            f"expected apiVersion {API_VERSION} kind {KIND}, got "
            f"{doc.get('apiVersion')!r} {doc.get('kind')!r}"
        )
    request = doc.get("request")
    if not isinstance(request, dict):
        raise ReviewError("request must be an object")
    operation = _text(request, "operation", "request", required=True)
    if operation not in OPERATIONS:
        raise ReviewError(f"request.operation {operation!r} is not one of {', '.join(OPERATIONS)}")
    kind = request.get("kind")
    if not isinstance(kind, dict):
        raise ReviewError("request.kind must be an object")
    user = request.get("userInfo")
    dry_run = request.get("dryRun", False)
    if not isinstance(dry_run, bool | None):
        raise ReviewError("request.dryRun must be a boolean")
    return Review(
        uid=_text(request, "uid", "request", required=True),
        operation=operation,
        group=_text(kind, "group", "request.kind"),
        version=_text(kind, "version", "request.kind", required=True),
        kind=_text(kind, "kind", "request.kind", required=True),
        name=_text(request, "name", "request"),
        namespace=_text(request, "namespace", "request"),
        object=_object(request, "object"),
        old_object=_object(request, "oldObject"),
        dry_run=bool(dry_run),
        username=_text(user, "username", "request.userInfo") if isinstance(user, dict) else "",
    )


def json_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[JSONObj]:
    """RFC 6902 operations turning `old` into `new`, as jsonpatch finds them: objects key by key, arrays
    element by element (add/remove by index, a value that moved is one `move`), anything else replaced;
    1 and true, 1 and 1.0 differ (values are compared as JSON). kube-apiserver applies all of these."""
    ops: list[JSONObj] = jsonpatch.make_patch(dict(old), dict(new)).patch
    return ops


def answer(review: Review, verdict: Verdict) -> JSONObj:
    """The AdmissionReview response for `verdict`."""
    response: JSONObj = {"uid": review.uid, "allowed": verdict.allowed}
    ops: Sequence[JSONObj] = ()
    if verdict.allowed and verdict.patch is not None:
        ops = verdict.patch
    elif verdict.allowed and verdict.mutated is not None and review.object is not None:
        ops = json_patch(review.object, verdict.mutated)
    if ops:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(list(ops)).encode()).decode()
    if not verdict.allowed and verdict.status is not None:
        response["status"] = verdict.status.body()
    if verdict.warnings:
        response["warnings"] = list(verdict.warnings)
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}
