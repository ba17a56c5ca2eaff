"""Device IDs the plugin advertises to the kubelet, and the card each one stands for (contract §8).

The kubelet counts and hands out opaque IDs; the allocator must turn the IDs of an Allocate call back into
physical cards. So an ID names its card: `<groupID>:<cardUUID>:<idx>`, idx zero-padded to four digits
below 1000. Each mode advertises its own pool per card: exclusive one ID (`:0000`), shared ten whose idx is
the share's first unit (0, 160000, ..., 1440000), sliced `maxSlices` tokens 0..n-1, and the internal
visibility resource 512 tokens. IDs are stable across restarts because the kubelet checkpoints them.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.rules.capacity.credits import SLICED_RESOURCE_MAX_SIZE
from gpustack_operator.rules.cards import SHARED_UNITS, SHARES_PER_CARD

SEPARATOR: Final = ":"
VISIBILITY_TOKENS: Final = SLICED_RESOURCE_MAX_SIZE
"""Visibility tokens per card: never a constraint, since a sidecar only mirrors its main container."""


class InvalidDeviceIDError(ValueError):
    """An ID the kubelet sent that this plugin never advertised."""


class DeviceID(NamedTuple):
    """The parts of a device ID."""

    group: str
    uuid: str
    idx: int

    def __str__(self) -> str:
        return format_id(self.group, self.uuid, self.idx)

    @property
    def card(self) -> tuple[str, str]:
        """(group ID, card UUID): the physical card this ID is a token of."""
        return self.group, self.uuid


def format_id(group: str, uuid: str, idx: int) -> str:
    """`<group>:<uuid>:<idx>` with idx zero-padded to four digits when below 1000."""
    if idx < 0:
        raise ValueError(f"device index must not be negative, got {idx}")
    return f"{group}{SEPARATOR}{uuid}{SEPARATOR}{idx:04d}"


def parse_id(device_id: str) -> DeviceID:
    """The parts of `<group>:<uuid>:<idx>`; the UUID may itself contain the separator."""
    group, sep, rest = device_id.partition(SEPARATOR)
    uuid, sep2, idx = rest.rpartition(SEPARATOR)
    if not (sep and sep2 and group and uuid and idx.isdigit()):
        raise InvalidDeviceIDError(f"unknown device {device_id!r}: want <groupID>:<uuid>:<index>")
    return DeviceID(group, uuid, int(idx))


def token_indexes(mode: DeviceAllocationMode, max_slices: int = 0) -> range:
    """The idx values one card advertises in `mode` (empty for a card that cannot be sliced)."""
    if mode is DeviceAllocationMode.EXCLUSIVE:
        return range(1)
    if mode is DeviceAllocationMode.SHARED:
        return range(0, SHARES_PER_CARD * SHARED_UNITS, SHARED_UNITS)
    if mode is DeviceAllocationMode.SLICED:
        return range(max(max_slices, 0))
    if mode is DeviceAllocationMode.VISIBILITY:
        return range(VISIBILITY_TOKENS)
    raise ValueError(f"no device IDs for mode {mode.label}")


def card_ids(mode: DeviceAllocationMode, group: str, uuid: str, max_slices: int = 0) -> list[str]:
    """Every ID one card advertises in `mode`."""
    return [format_id(group, uuid, idx) for idx in token_indexes(mode, max_slices)]


def valid_in(device: DeviceID, mode: DeviceAllocationMode, max_slices: int = 0) -> bool:
    """True when `device` is one of the tokens its card advertises in `mode`."""
    return device.idx in token_indexes(mode, max_slices)
