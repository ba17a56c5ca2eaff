"""Moore Threads GPUs through MTML (`libmtml.so` from the MT GPU driver, through our binding ``mtml``).

Without MTML a Moore Threads node reports VRAM 0, so its `.sliced.*` capacities are zero and slicing is
unreachable, and a broken card stays healthy. MTML gives per card: the name (`MTT S4000`, the product the
group ID comes from), VRAM in MiB, MUSA cores, the UUID, the MTML index (our index, and the number
MTHREADS_VISIBLE_DEVICES uses) and the PCI address; per node the driver version. MTML does not say the
MUSA toolkit's version: the runtime version stays empty.

A card is unhealthy when its VRAM reports volatile uncorrected ECC errors or when its ECC query fails (a
card the library can no longer read); a driver that does not offer the query leaves it healthy. Moore
Threads cards are logically sliceable (16 slices, compute partitioned, from the manufacturer table).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from gpustack_operator.device_manager.detector.native import BindingDetector

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpustack_operator.device_manager.detector.mtml import Mtml

MANUFACTURER: Final = "mthreads"
LIBRARY: Final = "MTML"


def _open_mtml() -> Mtml:
    from gpustack_operator.device_manager.detector.mtml import Mtml

    return Mtml.open()


class MthreadsDetector(BindingDetector["Mtml"]):
    manufacturer = MANUFACTURER
    label = LIBRARY


def detector(open_library: Callable[[], Mtml] = _open_mtml) -> MthreadsDetector:
    """The mthreads detector: MTML, loaded when the bus first shows a Moore Threads card."""
    return MthreadsDetector(open_library)
