"""May this user do this: kube-apiserver's delegating authorization (guide §4.4).

`system:masters` and the probe paths are allowed without a call (the availability probe stays cheap and
never depends on the API server); everything else is a SubjectAccessReview, whose answer is cached for
10 s whether allowed or denied. A denial is kube's 403 text (`User "alice" cannot list resource
"instancetypes" in API group "worker.gpustack.ai" at the cluster scope`); a review that cannot be made
is a 500, as in Go, never an allow.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from gpustack_operator.api.json import JSONObj
from gpustack_operator.apiserver.authn import User
from gpustack_operator.apiserver.requestinfo import RequestInfo
from gpustack_operator.apiserver.status import StatusError, forbidden

__all__ = ["ALWAYS_ALLOW_GROUPS", "ALWAYS_ALLOW_PATHS", "Authorizer", "access_review"]

ALWAYS_ALLOW_GROUPS = frozenset({"system:masters"})
ALWAYS_ALLOW_PATHS = frozenset({"/healthz", "/readyz", "/livez"})
CACHE_TTL = 10.0

Reviewer = Callable[[JSONObj], Awaitable[JSONObj]]
"""Posts a SubjectAccessReview and returns the API server's answer."""


def access_review(user: User, info: RequestInfo) -> JSONObj:
    """The SubjectAccessReview body for `user` doing `info`."""
    spec: JSONObj = {"user": user.name, "groups": list(user.groups)}
    if user.uid:
        spec["uid"] = user.uid
    if user.extra:
        spec["extra"] = {k: list(v) for k, v in user.extra.items()}
    if info.is_resource:
        spec["resourceAttributes"] = {
            "namespace": info.namespace,
            "verb": info.verb,
            "group": info.group,
            "version": info.version,
            "resource": info.resource,
            "subresource": info.subresource,
            "name": info.name,
        }
    else:
        spec["nonResourceAttributes"] = {"path": info.path, "verb": info.verb}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


def _why(user: User, info: RequestInfo) -> str:
    if not info.is_resource:
        return f'User "{user.name}" cannot {info.verb} path "{info.path}"'
    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    where = f'in the namespace "{info.namespace}"' if info.namespace else "at the cluster scope"
    return f'User "{user.name}" cannot {info.verb} resource "{resource}" in API group "{info.group}" {where}'


def _key(user: User, info: RequestInfo) -> tuple[object, ...]:
    extra = tuple(sorted((k, tuple(v)) for k, v in user.extra.items()))
    return (user.name, user.uid, user.groups, extra, info)


class Authorizer:
    """Allows or raises a 403 Status; remembers each answer for CACHE_TTL seconds."""

    def __init__(self, review: Reviewer, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._review = review
        self._clock = clock
        self._cache: dict[tuple[object, ...], tuple[float, bool, str]] = {}
        self.reviews_sent = 0

    async def authorize(self, user: User, info: RequestInfo) -> None:
        if ALWAYS_ALLOW_GROUPS.intersection(user.groups):
            return
        if not info.is_resource and info.path in ALWAYS_ALLOW_PATHS:
            return
        allowed, reason = await self._decide(user, info)
        if not allowed:
            why = _why(user, info) + (f": {reason}" if reason else "")
            raise forbidden(info.resource, info.group, info.name, why)

    async def _decide(self, user: User, info: RequestInfo) -> tuple[bool, str]:
        now = self._clock()
        key = _key(user, info)
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            return cached[1], cached[2]
        self.reviews_sent += 1
        try:
            answer = await self._review(access_review(user, info))
        except StatusError:
            raise
        except Exception as e:
            raise StatusError(
                500,
                "InternalError",
                f"an error on the server (authorization failed: {e}) "
                "has prevented the request from succeeding",
            ) from e
        status = answer.get("status") or {}
        allowed = bool(status.get("allowed")) and not status.get("denied")
        reason = str(status.get("reason") or "")
        self._cache[key] = (now + CACHE_TTL, allowed, reason)
        if len(self._cache) > 4096:
            self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
        return allowed, reason
