"""The manager's shared cache as reconcilers see it: read-only lookups by kind (or watch), key and index.

Why this module exists: a reconciler that builds its own informer, even with the same selectors, opens a
second watch, holds a second copy of every object and can disagree with the events that triggered it. Every
read therefore goes through the one `Cache` the manager fills: each watch a controller declares (including
`reads(...)` for kinds it only reads) registers the shared informer behind it, and the indexes declared on
a ControllerSpec live in those informers' stores. Objects returned are the cached dicts themselves: never
mutate them (copy first, or build a patch).

A read names a kind (`Resource`) when one informer caches it, or the `Watch` when several do (different
selectors); asking for a kind no controller watches is a bug and raises `NotCachedError` naming the fix.
The manager talks to informers only through the `InformerSource` and `SharedInformer` protocols, which
kube.informer.InformerFactory and the unit tests' scripted fakes both satisfy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, Unpack

from gpustack_operator.api.json import JSONObj
from gpustack_operator.controllerkit.watches import InformerKey, Watch
from gpustack_operator.kube.client import Selectors
from gpustack_operator.kube.informer import EventHandler
from gpustack_operator.kube.resources import Resource
from gpustack_operator.kube.store import IndexFunc, Store
from gpustack_operator.runtime import Supervisor

__all__ = ["Cache", "InformerSource", "NotCachedError", "SharedInformer", "Source"]

Source = Resource | Watch
"""What a read names: a kind (when one informer caches it) or the exact watch."""


class SharedInformer(Protocol):
    """What the manager and its controllers use of an informer."""

    @property
    def name(self) -> str: ...

    @property
    def relists(self) -> int: ...

    @property
    def store(self) -> Store: ...

    def add_handler(self, handler: EventHandler) -> None: ...

    def add_indexer(self, name: str, fn: IndexFunc) -> None: ...


class InformerSource(Protocol):
    """Makes (or shares) one informer per kind and selectors, starts them and waits for their first list."""

    @property
    def informers(self) -> Sequence[SharedInformer]: ...

    def informer(
        self, resource: Resource, *, namespace: str | None = None, **selectors: Unpack[Selectors]
    ) -> SharedInformer: ...

    def start(self, supervisor: Supervisor) -> None: ...

    async def wait_for_sync(self) -> None: ...


class NotCachedError(LookupError):
    """The read names a kind or watch no registered controller declared (or, by kind, several)."""


def _describe(key: InformerKey) -> str:
    resource, namespace, labels, fields = key
    scope = [f"{k}={v}" for k, v in (("namespace", namespace), ("labels", labels), ("fields", fields)) if v]
    return f"{resource.kind}[{','.join(scope)}]" if scope else resource.kind


class Cache:
    """Read-only view of every informer the manager's controllers watch (see the module docstring)."""

    def __init__(self) -> None:
        self._informers: dict[InformerKey, SharedInformer] = {}

    def register(self, watch: Watch, informer: SharedInformer) -> None:
        """Called by the manager for each watch of a controller it adds; reconcilers never call it."""
        self._informers.setdefault(watch.informer_key, informer)

    def get(self, source: Source, key: str) -> JSONObj | None:
        """The cached object at key ("namespace/name" or "name"), or None when it does not exist."""
        return self._store(source).get(key)

    def by_index(self, source: Source, index: str, value: str) -> list[JSONObj]:
        """Cached objects the named index files under `value` (KeyError for an index nobody declared)."""
        return self._store(source).by_index(index, value)

    def _store(self, source: Source) -> Store:
        if isinstance(source, Watch):
            informer = self._informers.get(source.informer_key)
            if informer is None:
                raise NotCachedError(
                    f"no controller watches {_describe(source.informer_key)}; declare that watch "
                    "(or reads(...)) on the ControllerSpec of the reconciler that reads it"
                )
            return informer.store
        found = [(key, inf) for key, inf in self._informers.items() if key[0] == source]
        if len(found) == 1:
            return found[0][1].store
        if not found:
            raise NotCachedError(
                f"no controller watches {source.kind}; declare reads({source.kind}) (or a watch of it) on "
                "the ControllerSpec of the reconciler that reads it"
            )
        names = ", ".join(sorted(_describe(key) for key, _ in found))
        raise NotCachedError(f"{source.kind} is cached by several informers ({names}); pass the Watch")

    # Last, so that `list[...]` in the annotations above still means the builtin.
    def list(self, source: Source) -> list[JSONObj]:
        """Every cached object of the kind (or watch), in no particular order."""
        return self._store(source).list()
