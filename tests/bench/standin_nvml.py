"""A stand-in `libnvidia-ml.so.1` and a fake PCI bus: a benchmark loads real NVIDIA detection without a GPU.

`device-manager serve --backend auto` on a node of 8 H100s scans `/sys/bus/pci/devices`, finds NVIDIA's
cards, imports our NVML binding (`detector/nvml.py`, ctypes) and dlopens `libnvidia-ml.so.1`. To measure
that path's memory here, this module writes a sysfs tree with the cards (the unit tests' ``build_sysfs``)
and compiles, with the system's gcc, a small C library exporting every NVML function our
``detector/nvidia.py`` reaches through our binding, answering for the same cards the sandbox's simulated
backend gives the node (same UUIDs, bus IDs, product and VRAM), so the kubelet stand-in, the ledger and the
Pods on the node see the same cards whichever backend runs. The binding finds it through `LD_LIBRARY_PATH`
(it loads the soname `libnvidia-ml.so.1`).

What it is not: the real library. NVIDIA's `libnvidia-ml.so` is about 2 MB of code and on `nvmlInit` opens
the driver's device nodes and allocates its own state; the stand-in is a few kilobytes and allocates
nothing (it counts the detections it answered in the file `$NVML_STANDIN_CALLS`, when set). The Python
side (the binding, ctypes, the detector's calls and objects) is measured as it is.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from tests.unit.device_manager.recorded import SysfsDevice, build_sysfs

from gpustack_operator.device_manager.model import Card

SONAME = "libnvidia-ml.so.1"
CALLS_ENV = "NVML_STANDIN_CALLS"
"""A file the stand-in rewrites with how many times NVML's card count was asked (once per detection)."""
H100_SXM_DEVICE_ID = "2330"
DRIVER = "550.54.15"
CUDA = 12040
CORES = 16896
"""H100 SXM5: 132 SMs x 128 FP32 cores, as NVML's nvmlDeviceGetNumGpuCores answers."""

_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { unsigned index; } dev;
typedef struct { unsigned long long total, free, used; } memory_t;
typedef struct { unsigned gpu, memory; } utilization_t;
typedef struct {
    char busIdLegacy[16];
    unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} pci_t;

#define COUNT %(count)d
static dev devices[COUNT];
static const char *uuids[COUNT] = {%(uuids)s};
static const unsigned buses[COUNT] = {%(buses)s};
static const char *name = "%(name)s";
static const unsigned long long total = %(total)dULL;

int nvmlInitWithFlags(unsigned flags) {
    for (unsigned i = 0; i < COUNT; i++) devices[i].index = i;
    return 0;
}
int nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int result) { return "NVML stand-in error"; }
int nvmlSystemGetDriverVersion(char *out, unsigned size) { snprintf(out, size, "%(driver)s"); return 0; }
int nvmlSystemGetCudaDriverVersion(int *out) { *out = %(cuda)d; return 0; }
int nvmlSystemGetCudaDriverVersion_v2(int *out) { *out = %(cuda)d; return 0; }
int nvmlDeviceGetCount_v2(unsigned *out) {
    /* Each detection and each reading asks for the count once: the benchmark reads how many ran. */
    static unsigned long calls;
    const char *path = getenv("NVML_STANDIN_CALLS");
    FILE *file = path ? fopen(path, "w") : NULL;
    if (file) { fprintf(file, "%%lu\n", ++calls); fclose(file); }
    *out = COUNT;
    return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, dev **out) {
    if (i >= COUNT) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    *out = &devices[i];
    return 0;
}
int nvmlDeviceGetName(dev *d, char *out, unsigned size) { snprintf(out, size, "%%s", name); return 0; }
int nvmlDeviceGetUUID(dev *d, char *out, unsigned size) {
    snprintf(out, size, "%%s", uuids[d->index]); return 0;
}
int nvmlDeviceGetMemoryInfo(dev *d, memory_t *out) {
    out->total = total; out->used = 512ULL << 20; out->free = total - out->used;
    return 0;
}
int nvmlDeviceGetEccMode(dev *d, int *current, int *pending) { *current = *pending = 1; return 0; }
int nvmlDeviceGetMemoryBusWidth(dev *d, unsigned *out) { *out = 5120; return 0; }
int nvmlDeviceGetCudaComputeCapability(dev *d, int *major, int *minor) { *major = 9; *minor = 0; return 0; }
int nvmlDeviceGetMigMode(dev *d, unsigned *current, unsigned *pending) { *current = *pending = 0; return 0; }
int nvmlDeviceGetMinorNumber(dev *d, unsigned *out) { *out = d->index; return 0; }
int nvmlDeviceGetNumGpuCores(dev *d, unsigned *out) { *out = %(cores)d; return 0; }
int nvmlDeviceGetPciInfo_v3(dev *d, pci_t *out) {
    memset(out, 0, sizeof *out);
    out->bus = buses[d->index];
    out->pciDeviceId = 0x%(device_id)s10de;
    snprintf(out->busId, sizeof out->busId, "00000000:%%02X:00.0", buses[d->index]);
    snprintf(out->busIdLegacy, sizeof out->busIdLegacy, "0000:%%02X:00.0", buses[d->index]);
    return 0;
}
int nvmlDeviceGetMemoryErrorCounter(dev *d, int type, int counter, int where, unsigned long long *out) {
    *out = 0; return 0;
}
int nvmlDeviceGetTotalEccErrors(dev *d, int type, int counter, unsigned long long *out) {
    *out = 0; return 0;
}
int nvmlDeviceGetUtilizationRates(dev *d, utilization_t *out) { out->gpu = 0; out->memory = 0; return 0; }
int nvmlDeviceGetTemperature(dev *d, int sensor, unsigned *out) { *out = 35; return 0; }
"""


def _bus(card: Card) -> int:
    """The bus number of `0000:18:00.0`."""
    return int(card.pci_bus_id.split(":")[1], 16)


def c_source(cards: Sequence[Card]) -> str:
    """The stand-in's C code answering for ``cards`` (one product, as on a real node of one SKU)."""
    return _C % {
        "count": len(cards),
        "uuids": ", ".join(f'"{card.uuid}"' for card in cards),
        "buses": ", ".join(f"0x{_bus(card):02x}" for card in cards),
        "name": cards[0].product,
        "total": cards[0].memory_mib << 20,
        "driver": DRIVER,
        "cuda": CUDA,
        "cores": CORES,
        "device_id": H100_SXM_DEVICE_ID,
    }


def build(directory: Path, cards: Sequence[Card]) -> tuple[Path, Path]:
    """(the directory holding the compiled `libnvidia-ml.so.1`, a sysfs root showing ``cards`` on its bus)."""
    lib_dir = directory / "lib"
    lib_dir.mkdir(parents=True)
    source = directory / "nvml-standin.c"
    source.write_text(c_source(cards))
    gcc = ["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-Wno-format-truncation"]
    subprocess.run([*gcc, "-o", str(lib_dir / SONAME), str(source)], check=True)
    devices = [
        SysfsDevice(card.pci_bus_id, "10de", H100_SXM_DEVICE_ID, card.pci_class or "030200") for card in cards
    ]
    return lib_dir, build_sysfs(directory / "sys", devices)
