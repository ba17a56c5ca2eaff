"""Ascend NPU: ASCEND_VISIBLE_DEVICES in every mode, and for a slice the vcann-rt runtime (contract §8).

The Ascend docker runtime turns the visible-devices variable into the NPU's device nodes and driver
mounts. Both it and vcann-rt's `physical-npu-id` name an NPU by DCMI's physical ID (`/dev/davinci<N>`,
the card's `physicalIndexes`), not by its logic ID (our index): the two differ on a host where an NPU
is missing from the logic numbering, and the logic ID would then hand the container another NPU.

A slice additionally gets vcann-rt: `libvruntime.so`, preloaded into every process through
/etc/ld.so.preload, enforces the quota of the `npu_info.config` it reads from /etc/enpu/vcann-rt/ - a
share of the NPU's AI cores (`aicore-quota`, percent, from `.sliced.cores-percentage`) and a device
memory cap (`memory-quota`, MiB, worked out as NVIDIA's VRAM cap). The config describes one physical
NPU, so a sliced container gets exactly one card. Containers slicing one NPU need distinct
`virtual-npu-id`s: each takes the lowest not used by another container's config for that NPU; the
configs live in the per-pod work directories, so a restarted device manager reads them back and a gone
pod's ID is free again once its directory is collected. The library is built per CANN major and product
family (`lib/ascend/cann-<major>-<family>/`), and `ENPU_LOG_LEVEL=1` (errors only) quiets its per-call
logging unless the container sets the variable itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator.responses.common import (
    Grant,
    Injection,
    env_only,
    visible_devices,
)
from gpustack_operator.device_manager.allocator.workdirs import WorkDirs
from gpustack_operator.device_manager.plugin.handler import AllocationRefusedError, ContainerResponse, Mount
from gpustack_operator.device_manager.plugin.inventory import CardInfo

CONFIG_IN_CONTAINER: Final = "/etc/enpu/vcann-rt/npu_info.config"
CONFIG_DIR_ON_HOST: Final = "etc/enpu/vcann-rt"
"""Under the container's work directory."""
CONFIG_NAME: Final = "npu_info.config"
LIBRARY_IN_CONTAINER: Final = "/opt/enpu/vcann-rt/lib/libvruntime.so"
DEFAULT_CANN_MAJOR: Final = 8
ELASTIC: Final = 2
"""vcann-rt scheduling policy: 1 fixed share, 2 elastic (idle cores lent out), 3 best effort."""
LOG_LEVEL_ENV: Final = "ENPU_LOG_LEVEL"


def cann_dir(card: CardInfo) -> str:
    """`cann-8-910b` from CANN `8.0.RC3` and family `910B`; the major defaults to 8."""
    head = card.runtime_version.strip().split(".", 1)[0]
    major = head if head.isdigit() and int(head) > 0 else str(DEFAULT_CANN_MAJOR)
    return "-".join(part for part in ("cann", major, card.family.lower()) if part)


@dataclass(frozen=True)
class NpuQuota:
    """What one sliced container may use of one physical NPU."""

    physical_id: int
    aicore_percentage: int
    memory_mib: int
    shm_id: str

    def render(self, virtual_id: int) -> str:
        return (
            f"physical-npu-id={self.physical_id}\n"
            f"virtual-npu-id={virtual_id}\n"
            f"aicore-quota={self.aicore_percentage}\n"
            f"memory-quota={self.memory_mib}\n"
            f"shm-id={self.shm_id}\n"
            f"scheduling-policy={ELASTIC}\n"
        )


def read_ids(path: Path) -> tuple[int, int] | None:
    """(physical-npu-id, virtual-npu-id) of a config, None when it is missing or unreadable."""
    try:
        text = path.read_text()
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and value.strip().isdigit():
            values[key.strip()] = int(value)
    if "physical-npu-id" not in values or "virtual-npu-id" not in values:
        return None
    return values["physical-npu-id"], values["virtual-npu-id"]


def write_config(dirs: WorkDirs, pod_uid: str, container: str, quota: NpuQuota) -> Path:
    """Write the container's config with the lowest virtual ID free on its NPU (its own when it has one).

    Choosing and writing is one step: it runs on the event loop, so no other Allocate interleaves.
    """
    own = dirs.paths.container_dir(pod_uid, container) / CONFIG_DIR_ON_HOST / CONFIG_NAME
    mine = read_ids(own)
    if mine is not None and mine[0] == quota.physical_id:
        virtual = mine[1]
    else:
        pattern = f"*/c-*/{CONFIG_DIR_ON_HOST}/{CONFIG_NAME}"
        used = {
            ids[1]
            for path in dirs.paths.pods_dir.glob(pattern)
            if path != own and (ids := read_ids(path)) is not None and ids[0] == quota.physical_id
        }
        virtual = next(i for i in range(len(used) + 1) if i not in used)
    path = dirs.prepare(pod_uid, container, CONFIG_DIR_ON_HOST) / CONFIG_NAME
    path.write_text(quota.render(virtual))
    path.chmod(0o644)
    return path


def respond(grant: Grant) -> Injection:
    if grant.mode is not DeviceAllocationMode.SLICED:
        return env_only(grant)
    if len(grant.cards) != 1:
        raise AllocationRefusedError(
            f"a sliced Ascend container takes one NPU (vcann-rt's npu_info.config describes one), "
            f"not {len(grant.cards)}: {', '.join(card.uuid for card in grant.cards)}"
        )
    card, request = grant.cards[0], grant.sliced_request()
    quota = NpuQuota(
        card.node_index,
        request.cores_percentage,
        request.memory_limit_mib(card.memory_mib),
        card.uuid.replace(" ", "-"),
    )
    lib = grant.paths.library_dir("ascend")
    config = grant.work_dir / CONFIG_DIR_ON_HOST / CONFIG_NAME
    env = visible_devices("ascend", [card])
    if LOG_LEVEL_ENV not in grant.container_env:
        env[LOG_LEVEL_ENV] = "1"
    response = ContainerResponse(
        envs=env,
        mounts=[
            Mount("/etc/ld.so.preload", str(lib / "ld.so.preload"), read_only=True),
            Mount(LIBRARY_IN_CONTAINER, str(lib / cann_dir(card) / "lib" / "libvruntime.so"), read_only=True),
            Mount(CONFIG_IN_CONTAINER, str(config), read_only=True),
            Mount("/dev/shm", "/dev/shm", read_only=False),
        ],
    )

    def prepare(dirs: WorkDirs) -> None:
        write_config(dirs, grant.pod_uid, grant.container, quota)

    return Injection(response, prepare)
