"""A synced informer cache holding given objects, as the webhooks' Lookups read one (by name)."""

from __future__ import annotations

from typing import Any

from gpustack_operator.kube.store import Store


class Synced:
    def __init__(self, *objs: dict[str, Any]) -> None:
        self.store = Store()
        for obj in objs:
            self.store.put(obj["metadata"]["name"], obj)

    def has_synced(self) -> bool:
        return True
