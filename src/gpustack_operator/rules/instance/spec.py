"""The Instance admission rules (contract §4.3, Era B): resource defaults from the type's unit, and checks.

Why this module exists: a user asks for an Instance by InstanceType and, usually, a number of cards (or a
VRAM percentage of one card); the type's unit spec says how much CPU, RAM and local storage go with each
card (or, for a CPU-only type, with each core). Defaulting folds that in so the Pod the reconciler builds
asks Kueue for a consistent bundle; validation refuses a request that exceeds the unit bundle or what
one instance can get now, and freezes a running instance. Pure: functions over the JSON objects
kube-apiserver sends and the InstanceType the caller looked up (None when there is none); no I/O.

Input is untrusted (the mutating webhook runs before the CRD schema): a wrong type becomes a field error
or is left alone, and nothing raises. Quantities are JSON strings or numbers, exact (api.quantity).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

from gpustack_operator.api.field import ErrorType, FieldError, forbidden, invalid, required
from gpustack_operator.api.json import JSONObj, as_mapping
from gpustack_operator.api.quantity import Quantity, percent_of, to_quantity
from gpustack_operator.api.types.instance import InstancePhase
from gpustack_operator.rules.instance.resources import instance_type_sliceable
from gpustack_operator.rules.instancetype.spec import equal_ignoring_zero
from gpustack_operator.settings.catalog import INSTANCE_PRIVILEGED_ALLOWED

__all__ = [
    "DEFAULT_IMAGE_PULL_POLICY",
    "DEFAULT_LOCAL_STORAGE",
    "DEFAULT_VOLUME_MOUNT",
    "RUNNING_IMMUTABLE",
    "default",
    "validate_create",
    "validate_privileges",
    "validate_update",
]


DEFAULT_IMAGE_PULL_POLICY: Final = "IfNotPresent"
DEFAULT_VOLUME_MOUNT: Final = "/workspace"
DEFAULT_LOCAL_STORAGE: Final = Quantity.parse("15Gi")
KUBE_SYSTEM: Final = "kube-system"
MEMORY_PERCENTAGE: Final = "acceleratorSlicedMemoryPercentage"
CORES_PERCENTAGE: Final = "acceleratorSlicedCoresPercentage"
RUNNING_IMMUTABLE: Final = (
    "type",
    "image",
    "imagePullPolicy",
    "command",
    "privileged",
    "ports",
    "env",
    "volumeMount",
    "imagePullSecret",
    "resources",
    "sshPublicKey",
)
"""The spec fields frozen while the instance runs (``spec.stop`` false); ``volume`` is frozen always."""
RESOURCES: Final = "spec.resources"


def _percentage(value: object) -> int:
    """A percentage field; anything but an integer reads as unset (validation reports it)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _is_zero(value: object) -> bool:
    """Unset: absent, empty or a zero quantity (text that is not a quantity is set, and refused later)."""
    if value is None or value == "":
        return True
    quantity = to_quantity(value)
    return quantity is not None and quantity.is_zero()


@dataclass(frozen=True)
class _Type:
    """What the rules read from an InstanceType; a field that does not parse is None (no fold, no cap)."""

    name: str
    acceleratable: bool
    sliceable: bool
    unit_cpu: Quantity | None
    unit_ram: Quantity | None
    local_storage: Quantity | None
    accelerator_once_max: Quantity
    cpu_once_max: Quantity


def _once_max(status: Mapping[str, Any], view: str) -> Quantity:
    """``status.<view>.onceMaxRequest``; absent (not yet observed) reads as 0, as in Go."""
    return to_quantity(as_mapping(status.get(view)).get("onceMaxRequest")) or Quantity(0)


def _type(instance_type: Mapping[str, Any]) -> _Type:
    spec, status = as_mapping(instance_type.get("spec")), as_mapping(instance_type.get("status"))
    units = as_mapping(spec.get("unitResources"))
    name = as_mapping(instance_type.get("metadata")).get("name")
    return _Type(
        name=name if isinstance(name, str) else "",
        acceleratable=spec.get("acceleratable") is True,
        sliceable=instance_type_sliceable(instance_type),
        unit_cpu=to_quantity(units.get("cpu")),
        unit_ram=to_quantity(units.get("ram")),
        local_storage=to_quantity(spec.get("localStorage")),
        accelerator_once_max=_once_max(status, "accelerator"),
        cpu_once_max=_once_max(status, "cpu"),
    )


def _sliced(resources: Mapping[str, Any], kind: _Type) -> bool:
    """The request takes a VRAM percentage of one card rather than whole cards."""
    wanted = (
        _percentage(resources.get(MEMORY_PERCENTAGE)) > 0 or _percentage(resources.get(CORES_PERCENTAGE)) > 0
    )
    return kind.sliceable and wanted


def _fold(resources: dict[str, Any], kind: _Type, *, overcommit: bool) -> None:
    """§4.3: derive cpu/ram from the unit and the units asked for (in place)."""

    def fill(key: str, unit: Quantity | None, times: Callable[[Quantity], Quantity]) -> None:
        if unit is not None and (overcommit or _is_zero(resources.get(key))):
            resources[key] = str(times(unit))

    if not kind.acceleratable:
        if _is_zero(resources.get("cpu")):
            resources["cpu"] = "1"
        cpu = to_quantity(resources["cpu"])
        if cpu is not None:
            fill("ram", kind.unit_ram, lambda unit: unit * cpu.exact)
        return
    if resources.get("accelerator") is None:
        resources["accelerator"] = "1"
    if _sliced(resources, kind):
        if _is_zero(resources["accelerator"]):
            resources["accelerator"] = "1"
        memory = _percentage(resources.get(MEMORY_PERCENTAGE))
        cores = _percentage(resources.get(CORES_PERCENTAGE))
        if memory == 0:
            memory = resources[MEMORY_PERCENTAGE] = cores
        elif cores == 0:
            resources[CORES_PERCENTAGE] = memory
        fill("cpu", kind.unit_cpu, lambda unit: percent_of(unit, memory))
        fill("ram", kind.unit_ram, lambda unit: percent_of(unit, memory))
        return
    cards = to_quantity(resources["accelerator"])
    if cards is not None:
        count = cards.exact if cards > 0 else Fraction(1)
        fill("cpu", kind.unit_cpu, lambda unit: unit * count)
        fill("ram", kind.unit_ram, lambda unit: unit * count)


def default(obj: Mapping[str, Any], instance_type: Mapping[str, Any] | None, *, overcommit: bool) -> JSONObj:
    """§4.3 Default on a copy of ``obj``; ``instance_type`` is the InstanceType named by spec.type.

    Always: imagePullPolicy `IfNotPresent`, volumeMount `/workspace`, resources `{}`. Then, unless the
    instance is stopped or its type is unknown: cpu/ram folded from the type's unit (recomputed each time
    when ``overcommit``, the instance-general-resources-overcommit setting, else only when unset), and
    localStorage defaulted to 15Gi or the type's localStorage when that is smaller.
    """
    result: JSONObj = copy.deepcopy(dict(obj))
    if result.get("spec") is None:
        result["spec"] = {}
    spec = result["spec"]
    if not isinstance(spec, dict):
        return result
    for key, value in (("imagePullPolicy", DEFAULT_IMAGE_PULL_POLICY), ("volumeMount", DEFAULT_VOLUME_MOUNT)):
        if spec.get(key) in (None, ""):
            spec[key] = value
    if spec.get("resources") is None:
        spec["resources"] = {}
    resources = spec["resources"]
    if spec.get("type") in (None, "") or spec.get("stop") is True or instance_type is None:
        return result
    if not isinstance(resources, dict):
        return result
    kind = _type(instance_type)
    _fold(resources, kind, overcommit=overcommit)
    if _is_zero(resources.get("localStorage")):
        storage = DEFAULT_LOCAL_STORAGE
        if kind.local_storage is not None and kind.local_storage < storage:
            storage = kind.local_storage
        resources["localStorage"] = str(storage)
    return result


class _Requests:
    """validateResourceRequests over one ``spec.resources`` mapping, collecting field errors."""

    def __init__(self, resources: Mapping[str, Any], kind: _Type) -> None:
        self.resources, self.kind = resources, kind
        self.errors: list[FieldError] = []

    def refuse(self, key: str, detail: str) -> None:
        value = self.resources.get(key)
        self.errors.append(invalid(f"{RESOURCES}.{key}", 0 if value is None else value, detail))

    def amount(self, key: str) -> Quantity | None:
        """The quantity at ``key`` (absent reads as 0); None, with an error, when it is not a quantity or
        is negative."""
        value = self.resources.get(key)
        if value is None or value == "":
            return Quantity(0)
        quantity = to_quantity(value)
        if quantity is None:
            self.refuse(key, "must be a quantity, e.g. 2, 500m or 16Gi")
        elif quantity < 0:
            self.refuse(key, "must be greater than or equal to 0")
        else:
            return quantity
        return None

    def percentage(self, key: str) -> int | None:
        value = self.resources.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool):
            self.refuse(key, "must be an integer")
            return None
        return value

    def at_most(self, key: str, amount: Quantity | None, cap: Quantity | None, why: str) -> None:
        if amount is not None and cap is not None and amount > cap:
            self.refuse(key, f"must be less than or equal to {cap} ({why})")

    def check(self) -> list[FieldError]:
        kind = self.kind
        cards, cpu, ram, storage = (self.amount(k) for k in ("accelerator", "cpu", "ram", "localStorage"))
        memory, cores = self.percentage(MEMORY_PERCENTAGE), self.percentage(CORES_PERCENTAGE)
        if kind.sliceable and ((memory or 0) > 0 or (cores or 0) > 0):
            for key, percent in ((MEMORY_PERCENTAGE, memory), (CORES_PERCENTAGE, cores)):
                if percent is not None and not 0 <= percent <= 100:
                    self.refuse(key, "must be between 0 and 100, inclusive")
            if cards is not None and cards != 1:
                self.refuse("accelerator", f"must be 1 when {MEMORY_PERCENTAGE} or {CORES_PERCENTAGE} is set")
        elif kind.acceleratable and cards is not None:
            if cards.exact.denominator != 1:
                self.refuse("accelerator", "must be a whole number of accelerators")
            else:
                why = f"status.accelerator.onceMaxRequest of InstanceType {kind.name!r}"
                self.at_most("accelerator", cards, kind.accelerator_once_max, why)
        elif not kind.acceleratable and cards:
            self.refuse("accelerator", f"must be 0: InstanceType {kind.name!r} has no accelerators")
        if not kind.acceleratable:
            self.at_most(
                "cpu", cpu, kind.cpu_once_max, f"status.cpu.onceMaxRequest of InstanceType {kind.name!r}"
            )
        self._unit_caps(cards, cpu, ram, storage)
        return self.errors

    def _unit_caps(
        self, cards: Quantity | None, cpu: Quantity | None, ram: Quantity | None, storage: Quantity | None
    ) -> None:
        kind = self.kind
        counted = cards if kind.acceleratable else cpu
        count = counted.exact if counted is not None and counted > 1 else Fraction(1)
        shown = f"{Quantity(count)}"
        if kind.acceleratable and kind.unit_cpu is not None:
            self.at_most("cpu", cpu, kind.unit_cpu * count, f"unitResources.cpu {kind.unit_cpu} × {shown}")
        if kind.unit_ram is not None:
            self.at_most("ram", ram, kind.unit_ram * count, f"unitResources.ram {kind.unit_ram} × {shown}")
        self.at_most(
            "localStorage", storage, kind.local_storage, f"localStorage of InstanceType {kind.name!r}"
        )


def _resource_errors(spec: Mapping[str, Any], instance_type: Mapping[str, Any]) -> list[FieldError]:
    resources = spec.get("resources")
    if resources is not None and not isinstance(resources, Mapping):
        return [invalid(RESOURCES, resources, "must be an object")]
    return _Requests(as_mapping(resources), _type(instance_type)).check()


def _volume_errors(volume: object) -> list[FieldError]:
    """Exactly one of ephemeral (capacity > 0) or persistent (a named claim)."""
    path = "spec.volume"
    one = "exactly one of ephemeral or persistent must be specified"
    if volume is not None and not isinstance(volume, Mapping):
        return [invalid(path, volume, "must be an object")]
    volume = as_mapping(volume)
    ephemeral, persistent = volume.get("ephemeral"), volume.get("persistent")
    if ephemeral is None and persistent is None:
        return [required(path, one)]
    if ephemeral is not None and persistent is not None:
        return [forbidden(path, one)]
    if ephemeral is not None:
        capacity = as_mapping(ephemeral).get("capacity")
        if capacity is None or capacity == "":
            return [required(f"{path}.ephemeral.capacity", "must be specified")]
        quantity = to_quantity(capacity)
        if quantity is None or quantity <= 0:
            return [invalid(f"{path}.ephemeral.capacity", capacity, "must be greater than 0")]
        return []
    name = as_mapping(persistent).get("name")
    if not isinstance(name, str) or not name:
        return [required(f"{path}.persistent.name", "must name the claim of the persistent volume")]
    return []


def _type_errors(
    spec: Mapping[str, Any], instance_type: Mapping[str, Any] | None, *, runs: bool
) -> list[FieldError]:
    """A type is named; for an instance that is to run it must exist and the requests must fit it."""
    name = spec.get("type")
    if name is None or name == "":
        return [required("spec.type", "must be specified")]
    if not isinstance(name, str):
        return [invalid("spec.type", name, "must be a string")]
    if not runs:
        return []
    if instance_type is None:
        return [FieldError(ErrorType.NOT_FOUND, "spec.type", "no InstanceType has this name", name)]
    return _resource_errors(spec, instance_type)


def validate_create(
    obj: Mapping[str, Any], instance_type: Mapping[str, Any] | None, *, system_namespace: str
) -> list[FieldError]:
    """§4.3 create: not in a reserved namespace (the system namespace, kube-system); a type; a type that
    exists and requests that fit it unless created stopped (starting re-checks both); a valid volume."""
    errors: list[FieldError] = []
    namespace = as_mapping(obj.get("metadata")).get("namespace")
    if isinstance(namespace, str) and namespace in (system_namespace, KUBE_SYSTEM):
        errors.append(forbidden("metadata.namespace", f"{namespace} is reserved for the system"))
    spec = obj.get("spec")
    if spec is None:
        return [*errors, required("spec", "must be specified")]
    if not isinstance(spec, Mapping):
        return [*errors, invalid("spec", spec, "must be an object")]
    errors.extend(_type_errors(spec, instance_type, runs=spec.get("stop") is not True))
    errors.extend(_volume_errors(spec.get("volume")))
    return errors


def validate_update(
    old: Mapping[str, Any], new: Mapping[str, Any], instance_type: Mapping[str, Any] | None
) -> list[FieldError]:
    """§4.3 update: a running instance is frozen but for its name, description and stop; the volume is
    frozen always; it starts (stop true → false) only from phase Stopped, with a type that exists and
    requests that fit it; it cannot be stopped while Starting."""
    old_spec, new_spec = as_mapping(old.get("spec")), as_mapping(new.get("spec"))
    phase = as_mapping(old.get("status")).get("phase")
    was_running, runs = old_spec.get("stop") is not True, new_spec.get("stop") is not True
    errors: list[FieldError] = []
    if was_running:
        for key in RUNNING_IMMUTABLE:
            if not equal_ignoring_zero(old_spec.get(key), new_spec.get(key)):
                errors.append(
                    forbidden(f"spec.{key}", "may not be changed while the instance runs; stop it first")
                )
    if not equal_ignoring_zero(old_spec.get("volume"), new_spec.get("volume")):
        errors.append(forbidden("spec.volume", "is immutable"))
    if not was_running and runs:
        if phase != InstancePhase.STOPPED:
            shown = phase if isinstance(phase, str) and phase else "unknown"
            errors.append(
                forbidden("spec.stop", f"an instance starts only from phase Stopped; it is {shown}")
            )
        errors.extend(_type_errors(new_spec, instance_type, runs=True))
    if was_running and not runs and phase == InstancePhase.STARTING:
        errors.append(forbidden("spec.stop", "an instance cannot be stopped while it is Starting"))
    return errors


def validate_privileges(
    old: Mapping[str, Any] | None, new: Mapping[str, Any], *, privileged_allowed: bool
) -> list[FieldError]:
    """The ``instance-privileged-allowed`` gate (false by default): an Instance may not take privileged
    mode, at creation or by a later change, unless the setting allows it. One that already has it keeps
    it: turning the setting off never blocks an update or a restart of an Instance that was privileged.
    """
    if privileged_allowed or as_mapping(new.get("spec")).get("privileged") is not True:
        return []
    if old is not None and as_mapping(old.get("spec")).get("privileged") is True:
        return []
    setting = INSTANCE_PRIVILEGED_ALLOWED.name
    return [forbidden("spec.privileged", f'privileged mode is not allowed: enable the "{setting}" setting')]
