"""`meta.k8s.io/v1` Table output: the columns kubectl prints, computed here as kube's convertors do.

kubectl prints cells verbatim, so ages are rendered here (`duration.HumanDuration`'s steps), and a
column with priority > 0 only shows with `-o wide` (the Go original puts Age there). `rows[].object`
follows `includeObject` (Metadata by default, Object for `--sort-by`, None); the list's resourceVersion
and continue token are copied, because `kubectl get -w` and paging read them from the Table.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpustack_operator.api.json import JSONObj
from gpustack_operator.apiserver.status import bad_request

__all__ = ["NAME", "Column", "human_duration", "partial_metadata", "printer_column", "table"]


@dataclass(frozen=True)
class Column:
    """One column: its definition and how an object's cell is computed."""

    name: str
    cell: Callable[[JSONObj], Any]
    type: str = "string"
    format: str = ""
    description: str = ""
    priority: int = 0

    def definition(self) -> JSONObj:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


def human_duration(seconds: float) -> str:
    """kube's HumanDuration: 45s, 5m3s, 42m, 5h4m, 30h, 3d4h, 120d, 3y20d, 9y."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes, hours, days = s // 60, s // 3600, s // 86400
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    years = days // 365
    if hours < 24 * 365 * 8:
        return f"{years}y{days % 365}d" if days % 365 else f"{years}y"
    return f"{years}y"


def age(obj: JSONObj, now: dt.datetime | None = None) -> str:
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    if not stamp:
        return "<unknown>"
    created = dt.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    return human_duration(((now or dt.datetime.now(dt.UTC)) - created).total_seconds())


NAME = Column(
    "Name",
    lambda obj: str((obj.get("metadata") or {}).get("name", "")),
    format="name",
    description="Name must be unique within a namespace.",
)
"""The first column of every kind, as kube's own Tables start."""


_STEP = re.compile(
    r"""\.(?P<key>[A-Za-z0-9_-]+)|\[(?P<index>\d+)\]|(?P<all>\[\*\])"""
    r"""|\[\?\(@\.(?P<field>[A-Za-z0-9_-]+)==(?P<quote>["'])(?P<value>.*?)(?P=quote)\)\]"""
)


def _steps(json_path: str) -> list[re.Match[str]]:
    """The steps of a CRD column's JSONPath: ``.key``, ``[n]``, ``[*]`` and ``[?(@.key=="value")]``."""
    steps, at = [], 0
    while at < len(json_path):
        step = _STEP.match(json_path, at)
        if step is None:
            raise ValueError(f"unsupported printer column JSONPath {json_path!r} at {at}")
        steps.append(step)
        at = step.end()
    return steps


def _follow(obj: Any, steps: Sequence[re.Match[str]]) -> list[Any]:
    """Every value the steps reach (kube's CRD table shows the first)."""
    values = [obj]
    for step in steps:
        reached: list[Any] = []
        for value in values:
            if step["key"] is not None:
                if isinstance(value, dict) and step["key"] in value:
                    reached.append(value[step["key"]])
            elif isinstance(value, list):
                if step["index"] is not None:
                    reached.extend(value[int(step["index"]) : int(step["index"]) + 1])
                elif step["all"] is not None:
                    reached.extend(value)
                else:
                    reached.extend(
                        item
                        for item in value
                        if isinstance(item, dict) and str(item.get(step["field"])) == step["value"]
                    )
        values = reached
    return values


def printer_column(spec: JSONObj) -> Column:
    """A Column from a CRD `additionalPrinterColumns` entry, so the v1 Table of a kind shows what
    `kubectl get` shows for its CRD: a missing field is `<none>`, a date is an age, and of several values
    (a `[*]` or a filter) the first, as kube-apiserver's CRD table convertor shows."""
    json_path = str(spec["jsonPath"])
    steps = _steps(json_path)
    kind = str(spec.get("type", "string"))

    def cell(obj: JSONObj) -> Any:
        found = _follow(obj, steps)
        value = found[0] if found else None
        if kind == "date":
            created = json_path == ".metadata.creationTimestamp"
            return age(obj) if created else str(value or "<unknown>")
        if value is None:
            return "<none>"
        return str(value).lower() if isinstance(value, bool) else value

    return Column(
        str(spec["name"]),
        cell,
        type=kind,
        description=str(spec.get("description", "")),
        priority=int(spec.get("priority", 0)),
    )


def partial_metadata(obj: JSONObj) -> JSONObj:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata") or {},
    }


def _row_object(obj: JSONObj, include: str) -> JSONObj | None:
    if include in ("", "Metadata"):
        return partial_metadata(obj)
    if include == "Object":
        return obj
    if include == "None":
        return None
    raise bad_request(f"unrecognized includeObject value: {include!r}")


def table(
    columns: Sequence[Column],
    objects: Sequence[JSONObj],
    *,
    list_meta: JSONObj | None = None,
    include_object: str = "",
    headers: bool = True,
) -> JSONObj:
    """A Table of `objects`; `headers=False` leaves the column definitions out (later watch events)."""
    rows = []
    for obj in objects:
        row: JSONObj = {"cells": [c.cell(obj) for c in columns]}
        embedded = _row_object(obj, include_object)
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)
    meta = {
        k: v
        for k, v in (list_meta or {}).items()
        if k in ("resourceVersion", "continue", "remainingItemCount")
    }
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": [c.definition() for c in columns] if headers else [],
        "rows": rows,
    }
