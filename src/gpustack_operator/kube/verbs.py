"""The few object verbs that small API users (leader election, the event recorder) depend on.

They take this protocol rather than the whole Client, so a unit test can hand them an in-memory fake;
`kube.client.Client` satisfies it.
"""

from __future__ import annotations

from typing import Any, Protocol

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube.resources import Resource


class ObjectVerbs(Protocol):
    """get-or-none, create and patch of one object."""

    async def get_or_none(self, res: Resource, name: str, namespace: str | None = None) -> JSONObj | None: ...

    async def create(
        self, res: Resource, obj: JSONObj, namespace: str | None = None, dry_run: bool = False
    ) -> JSONObj: ...

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        content_type: str = ...,
        subresource: str | None = None,
    ) -> JSONObj: ...
