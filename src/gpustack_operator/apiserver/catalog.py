"""The one table of what the aggregated API serves: `worker.gpustack.ai/v1` and (Settings) `gpustack.ai/v1`.

Adding a resource is one entry here (its module in registry/ defines the entry): the routes, discovery,
both OpenAPI documents and the APIServices are derived from this table (served.py), so they cannot
disagree. The order is the order of discovery's resource list and of the Swagger document.
"""

from __future__ import annotations

from gpustack_operator.apiserver.registry import (
    companions,
    devices,
    instances,
    instancetypeflavors,
    instancetypes,
    settings,
)
from gpustack_operator.apiserver.served import ServedAPI

__all__ = ["CATALOG"]

CATALOG = ServedAPI(
    (
        instancetypes.RESOURCE,
        instancetypeflavors.RESOURCE,
        devices.RESOURCE,
        instances.RESOURCE,
        *companions.RESOURCES,
        settings.RESOURCE,
    )
)
