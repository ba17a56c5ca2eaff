"""NVIDIA sliced containers: the HAMi-core (libvgpu.so) limits and mounts (contract §8).

HAMi-core is preloaded into every process of the container through /etc/ld.so.preload and enforces what
the environment says: an SM-time share (`CUDA_DEVICE_SM_LIMIT`) and a VRAM cap per visible card
(`CUDA_DEVICE_MEMORY_LIMIT_<i>`, in `<MiB>m`: HAMi-core reads only the last character as the unit, so
`1Gi` would mean one byte). Its accounting region lives in the per-container /tmp/vgpu directory, which
must be fresh per container because the first process fixes the limits in it. The library is built per
CUDA major, so one container's cards must share a major. Every other mode gets the visible-devices env,
which nvidia-container-toolkit turns into the device nodes and driver mounts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator.demand import SlicedRequest
from gpustack_operator.device_manager.allocator.responses.common import (
    Grant,
    Injection,
    env_only,
    visible_devices,
)
from gpustack_operator.device_manager.allocator.workdirs import HostPaths, WorkDirs
from gpustack_operator.device_manager.plugin.handler import AllocationRefusedError, ContainerResponse, Mount
from gpustack_operator.device_manager.plugin.inventory import CardInfo

DEFAULT_CUDA_MAJOR: Final = 12
SHARED_CACHE: Final = "/tmp/vgpu/cudevshr.cache"
WORK_DIR_IN_CONTAINER: Final = "/tmp/vgpu"
WORK_DIR_ON_HOST: Final = "tmp/vgpu"
LIBRARY_IN_CONTAINER: Final = "/usr/local/vgpu/libvgpu.so"
LOG_LEVEL_ENV: Final = "LIBCUDA_LOG_LEVEL"


def cuda_major(runtime_version: str) -> int:
    """`12.4` -> 12; unknown or unparsable -> 12."""
    head = runtime_version.strip().split(".", 1)[0]
    return int(head) if head.isdigit() and int(head) > 0 else DEFAULT_CUDA_MAJOR


def single_cuda_major(cards: Sequence[CardInfo]) -> int:
    """The CUDA major every card shares; refuses cards that span majors."""
    majors = sorted({cuda_major(card.runtime_version) for card in cards})
    if len(majors) > 1:
        raise AllocationRefusedError(
            f"a sliced allocation cannot span CUDA majors {majors}: "
            f"cards {', '.join(card.uuid for card in cards)} need different libvgpu builds"
        )
    return majors[0] if majors else DEFAULT_CUDA_MAJOR


def hami_env(
    cards: Sequence[CardInfo], request: SlicedRequest, container_env: frozenset[str]
) -> dict[str, str]:
    """The container environment HAMi-core reads."""
    env = visible_devices("nvidia", cards)
    env["CUDA_DEVICE_SM_LIMIT"] = str(request.cores_percentage)
    env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = SHARED_CACHE
    for ordinal, card in enumerate(cards):
        env[f"CUDA_DEVICE_MEMORY_LIMIT_{ordinal}"] = f"{request.memory_limit_mib(card.memory_mib)}m"
    if LOG_LEVEL_ENV not in container_env:
        env[LOG_LEVEL_ENV] = "0"
    return env


def hami_mounts(paths: HostPaths, major: int, work_dir: str) -> list[Mount]:
    """Preload activation, the library for the CUDA major, the lock dir, the work dir and /dev/shm."""
    lib = paths.library_dir("nvidia")
    return [
        Mount("/tmp/vgpulock", str(paths.lock_dir), read_only=False),
        Mount("/etc/ld.so.preload", str(lib / "ld.so.preload"), read_only=True),
        Mount(LIBRARY_IN_CONTAINER, str(lib / f"cuda-{major}" / "libvgpu.so"), read_only=True),
        Mount(WORK_DIR_IN_CONTAINER, work_dir, read_only=False),
        Mount("/dev/shm", "/dev/shm", read_only=False),
    ]


def respond(grant: Grant) -> Injection:
    if grant.mode is not DeviceAllocationMode.SLICED:
        return env_only(grant)
    major = single_cuda_major(grant.cards)
    work_dir = grant.work_dir / WORK_DIR_ON_HOST
    response = ContainerResponse(
        envs=hami_env(grant.cards, grant.sliced_request(), grant.container_env),
        mounts=hami_mounts(grant.paths, major, str(work_dir)),
    )

    def prepare(dirs: WorkDirs) -> None:
        dirs.prepare(grant.pod_uid, grant.container, WORK_DIR_ON_HOST)
        dirs.shared(grant.paths.lock_dir)

    return Injection(response, prepare)
