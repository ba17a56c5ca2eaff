"""What loading one vendor's detection adds to the device manager's memory, step by step, per vendor.

Each vendor in a fresh interpreter: VmRSS after importing the device manager's modules (what `serve` has
loaded before it detects), then after each step detection of that vendor's cards takes: `import ctypes`
(every binding needs it), udev's product names read from its database (the PCI scan does on a real `/sys`),
the vendor's binding module (our ctypes bindings for every vendor: `nvml` for NVIDIA), and, for NVIDIA only,
NVML opened and initialised from the stand-in library (`standin_nvml`) and its 8 cards detected through
``HardwareBackend``, then after 1,000 detections more (the resident set grows with the first detections and
levels off). The other vendors' libraries are not opened: there is no stand-in for them, so their row stops
at the import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

BINDINGS = {
    "nvidia": "gpustack_operator.device_manager.detector.nvml",
    "ascend": "gpustack_operator.device_manager.detector.dcmi",
    "cambricon": "gpustack_operator.device_manager.detector.cndev",
    "hygon": "gpustack_operator.device_manager.detector.rsmi",
    "metax": "gpustack_operator.device_manager.detector.mxsml",
    "iluvatar": "gpustack_operator.device_manager.detector.ixml",
    "mthreads": "gpustack_operator.device_manager.detector.mtml",
}
"""The module each vendor's detector imports on first finding its cards (amdsmi is not installed here)."""

STEPS = ("device manager modules", "+ ctypes", "+ udev names", "+ binding module")

REPEATS = 1000

CHILD = (
    f"REPEATS = {REPEATS}\n"
    + r"""
import importlib, json, os, sys
from pathlib import Path

def rss():
    lines = open("/proc/self/status").read().splitlines()
    fields = {line.split(":")[0]: line.split()[1] for line in lines if line.endswith(" kB")}
    return [int(fields["VmRSS"]) / 1024, int(fields["RssAnon"]) / 1024]

steps = []
import gpustack_operator.device_manager.detector.pci as pci
import gpustack_operator.device_manager.command
import gpustack_operator.kube.incluster
steps.append(rss())
import ctypes
steps.append(rss())
pci.udev_model_names(sorted(os.listdir('/sys/bus/pci/devices')))
steps.append(rss())
importlib.import_module(sys.argv[1])
steps.append(rss())
if sys.argv[2]:
    from gpustack_operator.device_manager.detector.hardware import HardwareBackend
    backend = HardwareBackend(["nvidia"], require_library=True, pci_check=False, sysfs=Path(sys.argv[2]))
    cards = backend.detect()
    assert cards and not any(card.detail_missing for card in cards), cards
    steps.append(rss() + [len(cards)])
    for _ in range(REPEATS):
        backend.detect()
    steps.append(rss())
print(json.dumps(steps))
"""
)


def measure(
    vendor: str, sysfs: Path | None = None, lib_dir: Path | None = None, library: str = "NVML stand-in"
) -> list[tuple[str, float, float]]:
    """(step, VmRSS MB, anonymous MB) for ``vendor``, each step cumulative; with ``sysfs`` (NVIDIA only)
    a last step detecting the cards on that bus through NVML (``lib_dir`` on `LD_LIBRARY_PATH`: the
    stand-in; None: whatever NVML the node has, as tests/gpu runs it)."""
    env = dict(os.environ)
    if lib_dir is not None:
        env["LD_LIBRARY_PATH"] = str(lib_dir)
    argv = [sys.executable, "-c", CHILD, BINDINGS[vendor], str(sysfs or "")]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, env=env)
    steps = json.loads(out.stdout)
    names = list(STEPS)
    if sysfs is not None:
        names += [f"+ {library} opened, {steps[-2][2]} cards detected", f"+ {REPEATS:,} detections more"]
    return [(name, step[0], step[1]) for name, step in zip(names, steps, strict=True)]


def measure_all(lib_dir: Path, sysfs: Path) -> Mapping[str, list[tuple[str, float, float]]]:
    """Every vendor; NVIDIA's through to detection on ``sysfs`` with the stand-in in ``lib_dir``."""
    return {vendor: measure(vendor, *((sysfs, lib_dir) if vendor == "nvidia" else ())) for vendor in BINDINGS}


def report(costs: Mapping[str, list[tuple[str, float, float]]]) -> None:
    """One line per vendor: the first step's RSS, then what each further step added (MB)."""
    print("\nimport and open cost per vendor, fresh interpreter each (MB VmRSS; anonymous in brackets)")
    for vendor, steps in costs.items():
        first, *rest = steps
        parts = [f"{first[0]} {first[1]:.1f} ({first[2]:.1f})"]
        previous = first
        for step in rest:
            parts.append(f"{step[0]} {step[1] - previous[1]:+.2f} ({step[2] - previous[2]:+.2f})")
            previous = step
        print(f"  {vendor:<10} " + ", ".join(parts) + f" = {steps[-1][1]:.1f} MB")
