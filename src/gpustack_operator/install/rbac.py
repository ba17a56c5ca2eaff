"""The chart's RBAC, generated from what the worker and the device manager declare they call.

(Being built: the declarations are summed up into files/rbac/worker.yaml and files/rbac/device-manager.yaml.)
"""

from __future__ import annotations

__all__ = ["rbac_files"]


def rbac_files() -> dict[str, str]:
    """Chart-relative path -> generated text of each RBAC rules file."""
    return {}
