"""What the Pod webhook decides about a container's accelerator resources (contract §4.4), as pure rules.

A sliced request names its memory as a percentage or in MiB; Kueue and the device plugin only understand
``<base>.sliced.units``. The webhook folds one into the other, defaults the compute share and refuses pods
that mix card modes. The webhook does the I/O (finding the InstanceType's per-card VRAM); the rules are here.
Each container is given as one mapping of resource name to quantity (its requests and limits merged).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from gpustack_operator.api.quantity import Quantity
from gpustack_operator.rules.cards import DEFAULT_CORES_PERCENTAGE as DEFAULT_CORES
from gpustack_operator.rules.cards import Mode, card_mode_label, slice_units
from gpustack_operator.rules.environ import DEFAULT_ENVIRON, Environ
from gpustack_operator.rules.naming.resources import (
    CARD_MODE_KINDS,
    ResourceKind,
    acceleratable_bases,
    card_mode,
    resource_name_for,
    split_acceleratable_resource_name,
)

DEFAULT_CORES_PERCENTAGE: Final = Quantity(DEFAULT_CORES)
"""Compute share a slice gets when it names none (the card model's default)."""
MULTI_SLICE_MANUFACTURER: Final = "nvidia"
"""The one manufacturer whose allocator serves several slices co-located in one container (HAMi-core)."""

ContainerResources = Mapping[str, Quantity]
"""One container's resources: requests merged with limits."""


def sliced_bases(resources: Iterable[str], environ: Environ = DEFAULT_ENVIRON) -> list[str]:
    """Known bases that a container names any `<base>.sliced*` resource of, sorted."""
    splits = (split_acceleratable_resource_name(name, environ) for name in resources)
    return sorted({split[0] for split in splits if split is not None and split[1].is_sliced})


def pod_card_modes(containers: Iterable[Iterable[str]], environ: Environ = DEFAULT_ENVIRON) -> set[Mode]:
    """Every card mode the pod's containers request."""
    modes: set[Mode] = set()
    for names in containers:
        for name in names:
            split = split_acceleratable_resource_name(name, environ)
            mode = None if split is None else card_mode(split[1])
            if mode is not None:
                modes.add(mode)
    return modes


def mixed_modes_problem(
    containers: Iterable[Iterable[str]], environ: Environ = DEFAULT_ENVIRON
) -> str | None:
    """A message when the pod uses more than one card mode, else None."""
    modes = pod_card_modes(containers, environ)
    if len(modes) <= 1:
        return None
    listed = ", ".join(sorted(card_mode_label(mode) for mode in modes))
    return f"a pod may use only one of exclusive, shared and sliced accelerators; it uses {listed}"


def repeated_card_requests(
    containers: Sequence[Iterable[str]], environ: Environ = DEFAULT_ENVIRON
) -> list[tuple[int, int, str]]:
    """(container, earlier container, resource) for every container asking for cards of a base and mode
    an earlier container of the same pod already asks for.

    The device manager attributes one card allocation per Pod (it identifies the Pod of an Allocate call,
    and a Pod already holding a reservation is skipped), so a second container's cards would go to another
    Pod or fail; such a pod is refused instead. The SSH sidecar's visibility resource is not a card request.
    """
    first: dict[tuple[str, Mode], int] = {}
    repeats: list[tuple[int, int, str]] = []
    for index, names in enumerate(containers):
        asked: dict[tuple[str, Mode], str] = {}
        for name in names:
            split = split_acceleratable_resource_name(name, environ)
            mode = None if split is None else card_mode(split[1])
            if split is not None and mode is not None:
                asked.setdefault((split[0], mode), resource_name_for(split[0], CARD_MODE_KINDS[mode]))
        for key, resource in asked.items():
            if key in first:
                repeats.append((index, first[key], resource))
            else:
                first[key] = index
    return repeats


def _get(resources: ContainerResources, base: str, kind: ResourceKind) -> Quantity | None:
    return resources.get(resource_name_for(base, kind))


def needs_card_memory(resources: ContainerResources, base: str) -> bool:
    """True when the units come from memory-mib, so the caller must look up the card's VRAM."""
    percentage = _get(resources, base, ResourceKind.SLICED_MEMORY_PERCENTAGE)
    mib = _get(resources, base, ResourceKind.SLICED_MEMORY_MIB)
    return not (percentage is not None and percentage > 0) and mib is not None and mib > 0


def sliced_defaults(
    resources: ContainerResources, base: str, card_memory_mib: int | None
) -> dict[str, Quantity]:
    """Resources to set (in requests and limits) on a sliced container; raises SliceUnitsError.

    The cores-percentage defaults to 100 when absent; the units are always recomputed (a client's own
    value is ignored) unless no memory key is set, which validation then rejects.
    """
    defaults: dict[str, Quantity] = {}
    cores = resource_name_for(base, ResourceKind.SLICED_CORES_PERCENTAGE)
    if cores not in resources:
        defaults[cores] = DEFAULT_CORES_PERCENTAGE
    units = slice_units(
        _get(resources, base, ResourceKind.SLICED_MEMORY_PERCENTAGE),
        _get(resources, base, ResourceKind.SLICED_MEMORY_MIB),
        card_memory_mib,
    )
    if units is not None:
        defaults[resource_name_for(base, ResourceKind.SLICED_UNITS)] = Quantity(units)
    return defaults


def _in_percent_range(value: Quantity) -> bool:
    return 0 < value <= 100


def sliced_problems(
    resources: ContainerResources, base: str, environ: Environ = DEFAULT_ENVIRON
) -> list[str]:
    """Why a sliced container is invalid (empty when valid).

    Beyond the contract's rules: more than one slice in a container only for NVIDIA cards. The other
    vendors' allocators give a container one slice per physical card, so two slices of one card would be
    charged twice and served once (the architecture's tracked follow-up, done here).
    """
    problems: list[str] = []
    sliced = resource_name_for(base, ResourceKind.SLICED)
    if sliced not in resources:
        problems.append(f"{sliced} must be requested with any sliced resource")
    slices = resources.get(sliced)
    maker = acceleratable_bases(environ).get(base)
    if slices is not None and slices > Quantity(1) and maker != MULTI_SLICE_MANUFACTURER:
        problems.append(
            f"{sliced} must be 1, not {slices}: only {MULTI_SLICE_MANUFACTURER} cards serve more than one "
            f"slice in one container ({maker} gives it one slice per card); ask for a larger slice instead"
        )
    percentage = _get(resources, base, ResourceKind.SLICED_MEMORY_PERCENTAGE)
    mib = _get(resources, base, ResourceKind.SLICED_MEMORY_MIB)
    if (percentage is None) == (mib is None):
        problems.append(
            f"exactly one of {base}.sliced.memory-percentage and {base}.sliced.memory-mib is required"
        )
    if percentage is not None and not _in_percent_range(percentage):
        problems.append(f"{base}.sliced.memory-percentage must be in (0, 100], not {percentage}")
    if mib is not None and mib <= 0:
        problems.append(f"{base}.sliced.memory-mib must be positive, not {mib}")
    cores = _get(resources, base, ResourceKind.SLICED_CORES_PERCENTAGE)
    if cores is not None and not _in_percent_range(cores):
        problems.append(f"{base}.sliced.cores-percentage must be in (0, 100], not {cores}")
    return problems
