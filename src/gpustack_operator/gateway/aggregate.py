"""`aggregated=true`: the InstanceTypes of many clusters folded into AggregatedInstanceTypes (pure).

Members are grouped by their normalised hardware spec: the spec without what does not describe hardware
(`inactive`, `displayName`, `description`). Per group:
- `remaining` and `capacity` of each view are summed over the active members only (not `inactive`, phase
  Active): an idle pool elsewhere is no capacity here;
- the largest one-shot request is taken whole from the member that wins the main dimension (the
  accelerator view for accelerated types, cpu otherwise): every view's `onceMaxRequest`, with `detail` and
  `entrance`, is that member's, never assembled from separate per-view maxima that no single pool offers;
- `tiers` group the active members by their main `onceMaxRequest` (largest first), each with its members,
  the request taken whole from its first member, and its remaining summed;
- `members` lists every member (active or not) with cluster, name, phase and its views.
Every field of InstanceTypeStatus has a rule in STATUS_RULES, and tests/unit/gateway fails when one is
added without one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Literal

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.quantity import InvalidQuantityError, Quantity

__all__ = ["NOT_HARDWARE", "RESOURCE_FIELDS", "STATUS_RULES", "VIEWS", "aggregate"]

VIEWS = ("accelerator", "acceleratorShared", "acceleratorSliced", "cpu")
"""The capacity views of an InstanceType's status (InstanceTypeResource each)."""
RESOURCE_FIELDS: dict[str, Literal["winner", "sum"]] = {
    "onceMaxRequest": "winner",
    "remaining": "sum",
    "capacity": "sum",
}
"""How each field of a view is folded."""
STATUS_RULES: dict[str, Literal["view", "winner", "phase"]] = {
    "phase": "phase",
    "phaseMessage": "phase",
    "accelerator": "view",
    "acceleratorShared": "view",
    "acceleratorSliced": "view",
    "cpu": "view",
    "entrance": "winner",
    "detail": "winner",
}
"""How each field of InstanceTypeStatus is mirrored in the aggregate."""
NOT_HARDWARE = ("inactive", "displayName", "description")

Member = tuple[str, JSONObj]
"""(cluster, InstanceType)."""


def hardware_key(spec: JSONObj) -> str:
    return json.dumps({k: v for k, v in spec.items() if k not in NOT_HARDWARE}, sort_keys=True)


def _quantity(view: Any, field: str) -> Quantity:
    text = view.get(field) if isinstance(view, dict) else None
    try:
        return Quantity.parse(str(text)) if text not in (None, "") else Quantity(0)
    except InvalidQuantityError:
        return Quantity(0)


def _status(obj: JSONObj) -> JSONObj:
    return obj.get("status") or {}


def _active(obj: JSONObj) -> bool:
    return not (obj.get("spec") or {}).get("inactive") and _status(obj).get("phase") == "Active"


def _main(obj: JSONObj) -> str:
    return "accelerator" if (obj.get("spec") or {}).get("acceleratable") else "cpu"


def _rank(member: Member) -> tuple[Quantity, Quantity, str, str]:
    """Larger main onceMaxRequest wins, then larger main remaining; then cluster and name, for stability."""
    cluster, obj = member
    view = _status(obj).get(_main(obj))
    return (_quantity(view, "onceMaxRequest"), _quantity(view, "remaining"), cluster, _name(obj))


def _name(obj: JSONObj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _winner(members: list[Member]) -> Member:
    best = max(_rank(m)[:2] for m in members)
    return min((m for m in members if _rank(m)[:2] == best), key=lambda m: _rank(m)[2:])


def _views(winner: JSONObj, active: list[Member]) -> JSONObj:
    out: JSONObj = {}
    for view in VIEWS:
        present = [obj for _, obj in active if view in _status(obj)]
        if view not in _status(winner) and not present:
            continue
        folded: JSONObj = {}
        for field, rule in RESOURCE_FIELDS.items():
            if rule == "winner":
                value = (_status(winner).get(view) or {}).get(field)
                if value is not None:
                    folded[field] = value
            else:
                total = sum((_quantity(_status(o).get(view), field) for o in present), Quantity(0))
                folded[field] = str(total)
        out[view] = folded
    return out


def _phase(members: list[Member], active: list[Member]) -> tuple[str, str]:
    if active:
        return "Active", f"{len(active)} of {len(members)} members active"
    phases = sorted({str(_status(o).get("phase") or "") for _, o in members} - {""})
    return (phases[0] if len(phases) == 1 else "Inactive"), f"none of {len(members)} members active"


def _member(cluster: str, obj: JSONObj) -> JSONObj:
    status = _status(obj)
    entry: JSONObj = {
        "cluster": cluster,
        "name": _name(obj),
        "phase": status.get("phase", ""),
        "active": _active(obj),
    }
    for field in ("phaseMessage", "entrance", *VIEWS):
        if field in status:
            entry[field] = status[field]
    return entry


def _tiers(active: list[Member]) -> list[JSONObj]:
    groups: dict[Quantity, list[Member]] = {}
    for member in active:
        groups.setdefault(_rank(member)[0], []).append(member)
    tiers = []
    for once in sorted(groups, reverse=True):
        members = sorted(groups[once], key=lambda m: (m[0], _name(m[1])))
        winner = _winner(members)[1]
        tiers.append(
            {
                "onceMaxRequest": str(once),
                "members": [{"cluster": c, "name": _name(o)} for c, o in members],
                **_views(winner, members),
            }
        )
    return tiers


def fold(members: list[Member]) -> JSONObj:
    """One AggregatedInstanceType from members sharing a hardware spec."""
    active = [m for m in members if _active(m[1])]
    winner_cluster, winner = _winner(active or members)
    status: JSONObj = {}
    phase, message = _phase(members, active)
    for field, rule in STATUS_RULES.items():
        if rule == "phase":
            status[field] = phase if field == "phase" else message
        elif rule == "winner" and field in _status(winner):
            status[field] = _status(winner)[field]
    status.update(_views(winner, active))
    status["winner"] = {"cluster": winner_cluster, "name": _name(winner)}
    status["tiers"] = _tiers(active)
    status["members"] = [_member(c, o) for c, o in sorted(members, key=lambda m: (m[0], _name(m[1])))]
    spec = {k: v for k, v in (winner.get("spec") or {}).items() if k != "inactive"}
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "AggregatedInstanceType",
        "metadata": {"name": _name(winner)},
        "spec": spec,
        "status": status,
    }


def aggregate(members: Iterable[Member]) -> list[JSONObj]:
    """Every group of `members` (cluster, InstanceType) folded, ordered by name."""
    groups: dict[str, list[Member]] = {}
    for cluster, obj in members:
        groups.setdefault(hardware_key(obj.get("spec") or {}), []).append((cluster, obj))
    folded = [fold(group) for group in groups.values()]
    return sorted(folded, key=lambda o: (o["metadata"]["name"], hardware_key(o["spec"])))
