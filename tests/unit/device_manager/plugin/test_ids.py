"""Device IDs name their card and follow the contract's format and per-mode pools (§8)."""

from __future__ import annotations

import pytest

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.plugin import ids

EXCLUSIVE, SHARED, SLICED, VISIBILITY = (
    DeviceAllocationMode.EXCLUSIVE,
    DeviceAllocationMode.SHARED,
    DeviceAllocationMode.SLICED,
    DeviceAllocationMode.VISIBILITY,
)


@pytest.mark.parametrize(
    ("idx", "text"),
    [(0, "g:GPU-1:0000"), (7, "g:GPU-1:0007"), (999, "g:GPU-1:0999"), (1000, "g:GPU-1:1000"),
     (160000, "g:GPU-1:160000"), (1440000, "g:GPU-1:1440000")],
    ids=["zero", "small", "last-padded", "first-unpadded", "second-share", "last-share"],
)  # fmt: skip
def test_index_is_zero_padded_to_four_digits_below_1000(idx: int, text: str) -> None:
    assert ids.format_id("g", "GPU-1", idx) == text
    assert ids.parse_id(text) == ids.DeviceID("g", "GPU-1", idx)


def test_parse_keeps_a_uuid_that_contains_the_separator() -> None:
    parsed = ids.parse_id("h100:MIG-GPU-1:3:0:0002")
    assert parsed.card == ("h100", "MIG-GPU-1:3:0")
    assert parsed.idx == 2
    assert str(parsed) == "h100:MIG-GPU-1:3:0:0002"


@pytest.mark.parametrize(
    "text", ["", "GPU-1", "g:GPU-1", "g::0001", ":GPU-1:0001", "g:GPU-1:x", "g:GPU-1:-1"],
    ids=["empty", "bare-uuid", "no-index", "no-uuid", "no-group", "letters", "negative"],
)  # fmt: skip
def test_malformed_ids_are_refused_with_the_id_in_the_message(text: str) -> None:
    with pytest.raises(ids.InvalidDeviceIDError, match="unknown device"):
        ids.parse_id(text)


@pytest.mark.parametrize(
    ("mode", "max_slices", "expected"),
    [
        (EXCLUSIVE, 128, ["h:U:0000"]),
        (SHARED, 128, [f"h:U:{i * 160000:04d}" for i in range(10)]),
        (SLICED, 4, ["h:U:0000", "h:U:0001", "h:U:0002", "h:U:0003"]),
        (SLICED, 0, []),
    ],
    ids=["exclusive-one-id", "shared-ten-shares", "sliced-max-slices", "unsliceable-card"],
)
def test_each_mode_advertises_its_pool_per_card(
    mode: DeviceAllocationMode, max_slices: int, expected: list[str]
) -> None:
    assert ids.card_ids(mode, "h", "U", max_slices) == expected


def test_visibility_pool_is_512_tokens_and_shared_pool_starts_at_each_share() -> None:
    assert len(ids.card_ids(VISIBILITY, "h", "U")) == 512
    assert ids.card_ids(SHARED, "h", "U")[1] == "h:U:160000"


@pytest.mark.parametrize(
    ("text", "mode", "valid"),
    [("h:U:0000", EXCLUSIVE, True), ("h:U:0001", EXCLUSIVE, False), ("h:U:160000", SHARED, True),
     ("h:U:0001", SHARED, False), ("h:U:0127", SLICED, True), ("h:U:0128", SLICED, False)],
    ids=["exclusive", "exclusive-bad-idx", "share", "not-a-share-start", "last-slice", "past-last-slice"],
)  # fmt: skip
def test_an_id_is_valid_only_within_its_modes_pool(
    text: str, mode: DeviceAllocationMode, valid: bool
) -> None:
    assert ids.valid_in(ids.parse_id(text), mode, max_slices=128) is valid


def test_h100_ids_fit_the_kubelets_63_character_limit() -> None:
    device = ids.format_id("h100-80gb-hbm3", "GPU-a74e3449-2add-5744-9d59-92076d5e7e4f", 1440000)
    assert len(device) <= 63
