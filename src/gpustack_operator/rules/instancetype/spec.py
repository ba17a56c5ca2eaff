"""The InstanceType admission rules (contract §4.1, §4.2): defaulting, create-time shape, update freeze.

Why this module exists: an InstanceType is the admin's handle on one hardware pool, and the pool is found
by labels. Defaulting stamps those labels (the pool's schedule labels and the queue-entrance label the Pod
webhook looks the type up by) so an admin never writes them by hand; validation refuses a type whose unit
sizes the Instance webhook could not fold, and freezes the spec once created, since re-pointing a live pool
would strand what runs on it. Pure: functions over the JSON objects kube-apiserver sends, no I/O; the HTTP
handlers (and the awareness setting they read) live in apiserver/webhooks/kinds.py, which keeps only the HTTP
adaptation.

Not done here: the §4.1 step that fills the device details (manufacturer, product, family, memory, cores,
the CPU detail when aware) from the pool's ResourceFlavors; the handler looks the flavors up and
rules.instancetype.descriptors fills from them. The `sliceable`/`feature` descriptor is not filled: the
flavor's note is a boolean, the spec field the Devices' AcceleratorsFeature, which no flavor carries.

Input is untrusted: the mutating webhook sees the object before the CRD schema checks it, so every reader
here tolerates a wrong type (it becomes a field error or is left alone) and nothing raises.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any, Final

from gpustack_operator.api.field import FieldError, forbidden, invalid, required
from gpustack_operator.api.json import JSONObj, as_mapping, as_str
from gpustack_operator.api.keys import GENERIC, QUEUE_ENTRANCE_LABEL
from gpustack_operator.rules.naming.pools import is_feature_key, pool_schedule_labels
from gpustack_operator.rules.naming.queues import format_local_queue_name

__all__ = [
    "MUTABLE_FIELDS",
    "default",
    "equal_ignoring_zero",
    "validate_create",
    "validate_update",
]


MUTABLE_FIELDS: Final = ("displayName", "description", "inactive")
"""The spec fields an admin may change after creation (§4.2)."""

IMMUTABLE: Final = "is immutable except displayName, description and inactive"
ACCELERATOR_GROUP_REQUIRED: Final = "must be specified when acceleratable is true"
SPECIFIED: Final = "must be specified"
INT32_MAX: Final = 2**31 - 1
_INTEGER: Final = re.compile(r"[+-]?[0-9]+")
_GI: Final = "Gi"


def _encodable(text: str) -> bool:
    """Text that is UTF-8 (a JSON string may still carry a lone surrogate escape, which is not)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def default(obj: Mapping[str, Any], *, aware: bool) -> JSONObj:
    """§4.1 on a copy of ``obj``: default generalGroup, then stamp the pool's labels.

    An accelerated type without an acceleratorGroup gets only the generalGroup default (validation refuses
    it). Otherwise stale `general.`/`acceleratable.feature.gpustack.ai/` labels that the pool no longer
    carries are removed, the pool schedule labels (grouped by ``aware``, the
    instance-type-aware-cpu-manufacturer setting) are merged in, and `schedule.gpustack.ai/queue-entrance`
    is set to the LocalQueue name of the type (left alone while the name is still unknown).
    """
    result: JSONObj = copy.deepcopy(dict(obj))
    spec = result.get("spec")
    if not isinstance(spec, dict):
        return result
    if spec.get("generalGroup") in (None, ""):
        spec["generalGroup"] = GENERIC
    acceleratable = spec.get("acceleratable") is True
    accelerator_group = as_str(spec.get("acceleratorGroup"))
    if acceleratable and not accelerator_group:
        return result
    if result.get("metadata") is None:
        result["metadata"] = {}
    metadata = result["metadata"]
    if not isinstance(metadata, dict):
        return result
    labels = metadata.get("labels")
    labels = dict(labels) if isinstance(labels, dict) else {}
    sched = pool_schedule_labels(
        acceleratable,
        aware,
        as_str(spec.get("generalGroup")),
        accelerator_group,
        as_str(spec.get("os")),
        as_str(spec.get("arch")),
    )
    labels = {k: v for k, v in labels.items() if not (is_feature_key(str(k)) and k not in sched)}
    labels.update(sched)
    name = as_str(metadata.get("name"))
    if name and _encodable(name):
        labels[QUEUE_ENTRANCE_LABEL] = format_local_queue_name(name)
    metadata["labels"] = labels
    return result


def _string_field(spec: Mapping[str, Any], key: str, path: str, errors: list[FieldError]) -> str:
    """The string at ``key``; absent or empty appends Required, a non-string appends Invalid."""
    value = spec.get(key)
    if value is None or value == "":
        errors.append(required(path, SPECIFIED))
        return ""
    if not isinstance(value, str):
        errors.append(invalid(path, value, "must be a string"))
        return ""
    return value


def _positive_int32(text: str) -> bool:
    """What Go's strconv.ParseInt(text, 10, 32) accepts, and > 0."""
    if _INTEGER.fullmatch(text) is None or text.startswith("-"):
        return False
    digits = text.lstrip("+").lstrip("0")
    return 0 < len(digits) <= len(str(INT32_MAX)) and int(digits) <= INT32_MAX


def _append(errors: list[FieldError], error: FieldError | None) -> None:
    if error is not None:
        errors.append(error)


def _check_unit_cpu(text: str, acceleratable: bool, path: str) -> FieldError | None:
    if not acceleratable:
        return None if text == "1" else invalid(path, text, "must be 1 for a type without accelerators")
    if _positive_int32(text):
        return None
    return invalid(path, text, "must be a positive integer number of cores, without a unit")


def _check_gibibytes(text: str, path: str) -> FieldError | None:
    if text.endswith(_GI) and _positive_int32(text[: -len(_GI)]):
        return None
    return invalid(path, text, "must be a positive whole number of Gi, e.g. 16Gi")


def validate_create(obj: Mapping[str, Any]) -> list[FieldError]:
    """§4.2 create rules: the pool identity and the unit triple are complete and well formed.

    Independent of any setting. acceleratorGroup is required only for an accelerated type; os, arch,
    unitResources.cpu/.ram and localStorage always. The unit CPU is a positive integer for an accelerated
    type and exactly `1` for a CPU-only one; unit RAM and local storage are `<positive int>Gi`.
    """
    spec = obj.get("spec")
    if spec is None:
        return [required("spec", SPECIFIED)]
    if not isinstance(spec, Mapping):
        return [invalid("spec", spec, "must be an object")]
    errors: list[FieldError] = []
    acceleratable = spec.get("acceleratable")
    if acceleratable is not None and not isinstance(acceleratable, bool):
        errors.append(invalid("spec.acceleratable", acceleratable, "must be a boolean"))
    acceleratable = acceleratable is True
    if acceleratable and spec.get("acceleratorGroup") in (None, ""):
        errors.append(required("spec.acceleratorGroup", ACCELERATOR_GROUP_REQUIRED))
    elif acceleratable:
        _string_field(spec, "acceleratorGroup", "spec.acceleratorGroup", errors)
    _string_field(spec, "os", "spec.os", errors)
    _string_field(spec, "arch", "spec.arch", errors)
    units = spec.get("unitResources")
    if units is not None and not isinstance(units, Mapping):
        errors.append(invalid("spec.unitResources", units, "must be an object"))
        units = None
    units = as_mapping(units)
    unit_cpu = _string_field(units, "cpu", "spec.unitResources.cpu", errors)
    if unit_cpu:
        _append(errors, _check_unit_cpu(unit_cpu, acceleratable, "spec.unitResources.cpu"))
    sizes = ((units, "ram", "spec.unitResources.ram"), (spec, "localStorage", "spec.localStorage"))
    for source, key, path in sizes:
        text = _string_field(source, key, path, errors)
        if text:
            _append(errors, _check_gibibytes(text, path))
    return errors


def _zero(value: object) -> bool:
    return value is None or value is False or value in ("", 0, {}, [])


def _pruned(value: object) -> object:
    if isinstance(value, Mapping):
        kept = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if not _zero(v)}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def equal_ignoring_zero(a: object, b: object) -> bool:
    """JSON equality where an omitted field equals its zero value (``""``, false, 0, null, {}, []).

    Go compares the decoded structs, in which an omitted field and an explicit zero are the same value;
    comparing the raw JSON would call `kubectl apply` of an unchanged manifest a change.
    """
    return _pruned(a) == _pruned(b)


def _frozen(spec: object) -> object:
    if isinstance(spec, Mapping):
        return {k: v for k, v in spec.items() if k not in MUTABLE_FIELDS}
    return spec


def validate_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """§4.2 update: the spec may change only in displayName, description and inactive.

    The create-time shape checks are deliberately not re-run, so a type stored before a rule was
    tightened can still be renamed or taken out of service.
    """
    if equal_ignoring_zero(_frozen(old.get("spec")), _frozen(new.get("spec"))):
        return []
    return [forbidden("spec", IMMUTABLE)]
