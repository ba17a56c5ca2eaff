"""Recorded DCMI answers: a stand-in for libdcmi.so whose functions are C callables with DCMI's prototypes.

Each NPU's values are what DCMI and npu-smi report on the named products (an Atlas 800T A2 with
910B2/910B3 NPUs: 64 GiB HBM, 24/20 AI cores; an Atlas 300I Duo: two 310P3 chips and an MCU per card, DDR
instead of HBM). The stand-in answers through ctypes' real marshalling (``clib.recorded_function``), so
our structure layouts, pointer passing and return-code checks run as they do against the library.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from gpustack_operator.device_manager.detector import clib, dcmi
from tests.unit.device_manager.recorded import SysfsDevice

OK = 0
INNER_ERROR = -8005
NOT_SUPPORT = dcmi.ERROR_NOT_SUPPORT
DEVICE_NOT_EXIST = -8008
BUSES = [0xC1, 0x01, 0x41, 0x81, 0xC2, 0x02, 0x42, 0x82]
"""The Atlas 800T A2's NPU buses, in logic-ID order."""


@dataclass(frozen=True)
class RecordedNpu:
    """One device of a card as DCMI answers it; ``errors`` maps a function to the code it returns."""

    card: int
    device: int
    chip_name: bytes
    aicores: int
    logic_id: int
    physical_id: int
    bus: tuple[int, int, int, int]
    """(domain, bus, device, function)."""
    die: tuple[int, ...]
    hbm_mib: int = 65536
    hbm_used_mib: int = 3383
    ddr_mib: int = 0
    ddr_available_mib: int = 0
    health: int = 0
    ecc_enabled: int = 1
    double_bit_errors: int = 0
    unit_type: int = dcmi.UNIT_TYPE_NPU
    chip_type: bytes = b"Ascend"
    errors: dict[str, int] = field(default_factory=dict)


def npu_910b(logic: int, chip: bytes = b"910B2", aicores: int = 24, **changes: Any) -> RecordedNpu:
    """One NPU of an Atlas 800T A2: a card per NPU, logic ID = physical ID = card ID."""
    bus = (0, BUSES[logic], 0, 0)
    die = (0x8C1A2B3D + logic, 0x4E5F6071, 0x12345678, 0x9ABCDEF0, 0x0)
    values: dict[str, Any] = {
        "card": logic,
        "device": 0,
        "chip_name": chip,
        "aicores": aicores,
        "logic_id": logic,
        "physical_id": logic,
        "bus": bus,
        "die": die,
    }
    values.update(changes)
    return RecordedNpu(**values)


ATLAS_800T_A2 = [npu_910b(i) for i in range(8)]
A2_PCI = [  # its bus as sysfs shows it
    SysfsDevice(f"0000:{bus:02x}:00.0", "19e5", "d802", "120001", str(i // 4), "0-95", f"0000:{bus - 1:02x}")
    for i, bus in enumerate(BUSES)
]


def toolkit(root: Path, cann: str = "8.0.RC3") -> Path:
    """A host root with the CANN toolkit's version.info where the default install puts it."""
    info = root / "usr/local/Ascend/ascend-toolkit/latest/runtime/version.info"
    info.parent.mkdir(parents=True)
    info.write_text(f"Version={cann}\nversion_dir=8.0.RC3\n")
    return root


DUO_310P3 = [
    RecordedNpu(
        0,
        0,
        b"310P3",
        8,
        0,
        0,
        (0, 0x01, 0, 0),
        (0x31, 1, 2, 3, 0),
        hbm_mib=0,
        ddr_mib=44280 // 2,
        ddr_available_mib=20000,
    ),
    RecordedNpu(
        0,
        1,
        b"310P3",
        8,
        1,
        1,
        (0, 0x02, 0, 0),
        (0x31, 1, 2, 4, 0),
        hbm_mib=0,
        ddr_mib=44280 // 2,
        ddr_available_mib=20000,
    ),
    RecordedNpu(0, 2, b"", 0, 99, 99, (0, 0, 0, 0), (0, 0, 0, 0, 0), unit_type=1),
]
"""An Atlas 300I Duo: two 310P3 chips (DDR, no HBM) and the card's MCU as device 2."""


def _fill(pointer: Any, **values: Any) -> int:
    """Write ``values`` into the structure ``pointer`` points at; DCMI's success code."""
    for name, value in values.items():
        setattr(pointer.contents, name, value)
    return OK


def record_dcmi(
    npus: Sequence[RecordedNpu],
    *,
    driver: bytes = b"24.1.rc3",
    init: int = OK,
    card_count: int | None = None,
    missing: Sequence[str] = (),
) -> Any:
    """A recorded library answering for ``npus`` (``missing``: functions it does not export)."""
    cards = sorted({npu.card for npu in npus})
    by_id = {(npu.card, npu.device): npu for npu in npus}

    def on(name: str, answer: Callable[..., int]) -> Callable[..., int]:
        """``answer`` for the NPU addressed by the first two arguments, or its recorded error code."""

        def call(card: int, device: int, *rest: Any) -> int:
            npu = by_id.get((card, device))
            if npu is None:
                return DEVICE_NOT_EXIST
            code = npu.errors.get(name, OK)
            return code if code != OK else answer(npu, *rest)

        return call

    def card_list(count: Any, out: Any, length: int) -> int:
        count[0] = len(cards) if card_count is None else card_count
        for i, card in enumerate(cards[:length]):
            out[i] = card
        return OK

    def device_num(card: int, out: Any) -> int:
        out[0] = len([npu for npu in npus if npu.card == card])
        return OK

    def hbm(npu: RecordedNpu, out: Any) -> int:
        if not npu.hbm_mib:
            return NOT_SUPPORT
        _fill(out, memory_size=npu.hbm_mib, memory_usage=npu.hbm_used_mib, freq=1600, temp=38)
        return OK

    def ecc(npu: RecordedNpu, memory_type: int, out: Any) -> int:
        _fill(out, enable_flag=npu.ecc_enabled, double_bit_error_cnt=npu.double_bit_errors)
        return OK

    def logic_id(out: Any, card: int, device: int) -> int:
        return on("dcmi_get_device_logic_id", lambda npu: _put(out, npu.logic_id))(card, device)

    def phy_id(logic: int, out: Any) -> int:
        found = [npu for npu in npus if npu.logic_id == logic]
        return _put(out, found[0].physical_id) if found else DEVICE_NOT_EXIST

    def driver_version(out: Any, length: int) -> int:
        ctypes.memmove(out, driver + b"\0", min(length, len(driver) + 1))
        return OK

    answers: dict[str, Callable[..., int]] = {
        "dcmi_init": lambda: init,
        "dcmi_get_card_list": card_list,
        "dcmi_get_device_num_in_card": device_num,
        "dcmi_get_device_type": on("dcmi_get_device_type", lambda npu, out: _put(out, npu.unit_type)),
        "dcmi_get_device_chip_info": on(
            "dcmi_get_device_chip_info",
            lambda npu, out: _fill(
                out, chip_type=npu.chip_type, chip_name=npu.chip_name, aicore_cnt=npu.aicores
            ),
        ),
        "dcmi_get_device_hbm_info": on("dcmi_get_device_hbm_info", hbm),
        "dcmi_get_device_memory_info_v3": on(
            "dcmi_get_device_memory_info_v3",
            lambda npu, out: _fill(out, memory_size=npu.ddr_mib, memory_available=npu.ddr_available_mib),
        ),
        "dcmi_get_device_health": on("dcmi_get_device_health", lambda npu, out: _put(out, npu.health)),
        "dcmi_get_device_ecc_info": on("dcmi_get_device_ecc_info", ecc),
        "dcmi_get_device_logic_id": logic_id,
        "dcmi_get_device_phyid_from_logicid": phy_id,
        "dcmi_get_device_die_v2": on(
            "dcmi_get_device_die_v2",
            lambda npu, kind, out: _fill(out, soc_die=(ctypes.c_uint * 5)(*npu.die)),
        ),
        "dcmi_get_device_pcie_info_v2": on(
            "dcmi_get_device_pcie_info_v2",
            lambda npu, out: _fill(
                out,
                domain=npu.bus[0],
                bdf_busid=npu.bus[1],
                bdf_deviceid=npu.bus[2],
                bdf_funcid=npu.bus[3],
            ),
        ),
        "dcmi_get_driver_version": driver_version,
        "dcmi_get_device_utilization_rate": on(
            "dcmi_get_device_utilization_rate", lambda npu, kind, out: _put(out, 37)
        ),
        "dcmi_get_device_temperature": on("dcmi_get_device_temperature", lambda npu, out: _put(out, 41)),
    }
    return SimpleNamespace(
        **{
            name: clib.recorded_function(dcmi.PROTOTYPES[name], answer)
            for name, answer in answers.items()
            if name not in missing
        }
    )


def opener(handle: Any) -> Callable[[], dcmi.Dcmi]:
    """What the Ascend detector calls to open DCMI, over ``handle`` instead of libdcmi.so."""
    return lambda: dcmi.Dcmi.open(handle)


def _put(pointer: Any, value: int) -> int:
    pointer[0] = value
    return OK
