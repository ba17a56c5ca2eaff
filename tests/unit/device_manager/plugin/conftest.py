"""A recording handler: the allocator as the resource servers see it, without pods."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from gpustack_operator.device_manager.plugin.handler import (
    AllocationRefusedError,
    ContainerResponse,
    Mount,
    ResourceSpec,
)


class RecordingHandler:
    """Allocate echoes the IDs into env (refusing any ID containing "held"); prefers reversed order."""

    def __init__(self) -> None:
        self.allocations: list[tuple[str, list[str]]] = []

    async def allocate(self, resource: ResourceSpec, device_ids: Sequence[str]) -> ContainerResponse:
        if any("held" in device for device in device_ids):
            raise AllocationRefusedError(f"card of {device_ids[0]} is held Exclusive by ns/other")
        self.allocations.append((resource.name, list(device_ids)))
        return ContainerResponse(
            envs={"IDS": ",".join(device_ids)}, mounts=[Mount("/c", "/h", read_only=True)]
        )

    def preferred(
        self, resource: ResourceSpec, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str]:
        return [*must_include, *reversed([d for d in available if d not in must_include])][:size]


@pytest.fixture
def handler() -> RecordingHandler:
    return RecordingHandler()
