"""Host paths a sliced container is given, and the per-pod work directories behind them.

HAMi-core keeps its shared accounting region in a file that every process of a container maps, so each
sliced container gets a fresh directory on the host, mounted at /tmp/vgpu. The kubelet replays the
Allocate response on every container restart, so the directory must live as long as the pod, and no
longer: `collect()` removes the directories of pods that are gone. The preload libraries are staged under
the same data directory by the device manager's init container (contract §8). Removal can take a while (a
pod's tree may be large), so the allocator lists and removes from a worker thread; making a fresh
directory is a handful of system calls and runs where the allocation is recorded.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

log = logging.getLogger(__name__)

DEFAULT_DATA_DIR: Final = Path("/var/lib/gpustack")
"""GPUSTACK_DATA_DIR's default; `serve` passes the configured one."""


@dataclass(frozen=True)
class HostPaths:
    """Where the device manager's files live on the host."""

    data_dir: Path = DEFAULT_DATA_DIR
    lock_dir: Path = Path("/tmp/vgpulock")

    @property
    def operator_dir(self) -> Path:
        return self.data_dir / "operator"

    @property
    def pods_dir(self) -> Path:
        return self.operator_dir / "pods"

    def library_dir(self, manufacturer: str) -> Path:
        return self.operator_dir / "lib" / manufacturer

    def container_dir(self, pod_uid: str, container: str) -> Path:
        return self.pods_dir / pod_uid / f"c-{container}"


class WorkDirs:
    """Creates per-container work directories and removes those of pods that are gone."""

    def __init__(self, paths: HostPaths) -> None:
        self.paths = paths

    def prepare(self, pod_uid: str, container: str, sub: str) -> Path:
        """A fresh, world-writable `<pods>/<uid>/c-<container>/<sub>` (workloads may run as any user)."""
        path = self.paths.container_dir(pod_uid, container) / sub
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        path.chmod(0o777)
        return path

    @staticmethod
    def shared(path: Path) -> Path:
        """A world-writable directory every container shares (made once, never emptied)."""
        if not path.is_dir():
            path.mkdir(parents=True, exist_ok=True)
            path.chmod(0o777)
        return path

    def present(self) -> list[str]:
        """The UIDs of the pods that have a work directory."""
        try:
            return sorted(entry.name for entry in self.paths.pods_dir.iterdir() if entry.is_dir())
        except FileNotFoundError:
            return []

    def remove(self, uids: Iterable[str]) -> list[str]:
        """Remove these pods' directories; returns the UIDs removed (blocking: run it in a worker thread)."""
        removed = []
        for uid in uids:
            shutil.rmtree(self.paths.pods_dir / uid, ignore_errors=True)
            removed.append(uid)
            log.info("removed work dir of gone pod uid=%s", uid)
        return removed

    def collect(self, live_uids: Iterable[str]) -> list[str]:
        """Remove the directories of pods not in `live_uids`; returns the UIDs removed."""
        live = set(live_uids)
        return self.remove(uid for uid in self.present() if uid not in live)
