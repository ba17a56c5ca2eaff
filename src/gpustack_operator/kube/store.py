"""The informer's in-memory cache: objects by key, plus named secondary indexes.

Reconcilers read the cluster from here instead of asking kube-apiserver on every pass ("pods on node X",
"Devices of pool Y"). An index maps a value to the keys of the objects that produce it, never to copies of
the objects, so a cached object costs one dict no matter how many indexes list it. Only the informer writes
to a Store; everybody else reads, and must treat the returned dicts as read-only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from gpustack_operator.api.json import JSONObj

__all__ = ["IndexFunc", "Store", "object_key"]

log = logging.getLogger(__name__)

IndexFunc = Callable[[JSONObj], list[str]]


def object_key(obj: JSONObj) -> str:
    """The cache key of an object: "namespace/name" when namespaced, "name" when cluster-scoped."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))


class Store:
    """Objects keyed by `object_key`, with indexes that stay current as objects come and go."""

    def __init__(self) -> None:
        self._objects: dict[str, JSONObj] = {}
        self._index_funcs: dict[str, IndexFunc] = {}
        # index name -> value -> keys (a dict used as an ordered set)
        self._indexes: dict[str, dict[str, dict[str, None]]] = {}
        # index name -> key -> the values that key was filed under (to unfile it later)
        self._filed: dict[str, dict[str, list[str]]] = {}

    # ---- reading ---------------------------------------------------------------------------------------
    def get(self, key: str) -> JSONObj | None:
        return self._objects.get(key)

    def keys(self) -> list[str]:
        return list(self._objects)

    def by_index(self, index: str, value: str) -> list[JSONObj]:
        """Objects whose index function returned `value`; KeyError for an index never added."""
        return [self._objects[key] for key in self.index_keys(index, value)]

    def index_keys(self, index: str, value: str) -> list[str]:
        """Keys of the objects whose index function returned `value`."""
        try:
            by_value = self._indexes[index]
        except KeyError:
            raise KeyError(f"no index named {index!r} (known: {sorted(self._indexes)})") from None
        return list(by_value.get(value, ()))

    def index_values(self, index: str) -> list[str]:
        """Every value that at least one object is filed under in `index`."""
        return list(self._indexes[index])

    def __len__(self) -> int:
        return len(self._objects)

    def __contains__(self, key: object) -> bool:
        return key in self._objects

    # ---- writing (the informer only) -----------------------------------------------------------------------
    def add_index(self, name: str, fn: IndexFunc) -> None:
        """Register an index function and file every object already cached under it."""
        if name in self._index_funcs:
            raise ValueError(f"an index named {name!r} already exists")
        self._index_funcs[name] = fn
        self._indexes[name] = {}
        self._filed[name] = {}
        for key, obj in self._objects.items():
            self._file(name, key, obj)

    def put(self, key: str, obj: JSONObj) -> JSONObj | None:
        """Insert or replace the object at key; returns the previous one."""
        old = self._objects.get(key)
        self._objects[key] = obj
        for name in self._index_funcs:
            if old is not None:
                self._unfile(name, key)
            self._file(name, key, obj)
        return old

    def pop(self, key: str) -> JSONObj | None:
        """Remove and return the object at key (None when absent)."""
        old = self._objects.pop(key, None)
        if old is not None:
            for name in self._index_funcs:
                self._unfile(name, key)
        return old

    def _file(self, name: str, key: str, obj: JSONObj) -> None:
        try:
            values = self._index_funcs[name](obj)
        except Exception:
            # A malformed object must not break the cache for every other object.
            log.exception("index %s failed on %s; not indexed", name, key)
            return
        if not values:
            return
        by_value = self._indexes[name]
        for value in values:
            by_value.setdefault(value, {})[key] = None
        self._filed[name][key] = values

    def _unfile(self, name: str, key: str) -> None:
        values = self._filed[name].pop(key, None)
        if not values:
            return
        by_value = self._indexes[name]
        for value in values:
            keys = by_value.get(value)
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del by_value[value]

    # Last, so that `list[...]` in the annotations above still means the builtin.
    def list(self) -> list[JSONObj]:
        return list(self._objects.values())
