"""Fake nodes from an inventory file: what a cluster admin would see on real hardware, without the hardware.

Each inventory node becomes a kwok-managed Node with the labels and capacity a kubelet would report. NFD's
labels and annotations are not written here: the sandbox's nfd-worker stand-in (sandbox/nfdworker.py)
reports each node's CPU and PCI devices from this file and the real nfd-master publishes them, so the rest
of the operator sees the same inputs as on a real cluster. The same file drives the simulated device backend.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpustack_operator.rules.naming import manufacturers
from gpustack_operator.sandbox.kwok import MANAGED_ANNOTATION

DEFAULT_INVENTORY = Path(__file__).with_name("inventory.yaml")
BUNDLED_DIR = Path(__file__).with_name("inventories")
"""Inventories shipped with the package, named by file stem: `sandbox up --inventory all-vendors`."""
ALL_VENDORS_INVENTORY = BUNDLED_DIR / "all-vendors.yaml"
"""One node per manufacturer the operator supports, each card with every fact its library reports."""
DEFAULT_PCI_CLASS = "0302"
"""PCI class of a GPU group unless the inventory says otherwise: 3D controller, as data-centre GPUs report."""
_PCI_CLASS = re.compile(r"[0-9a-f]{4}")
_TEXT_FACTS = ("driverVersion", "runtimeVersion", "computeCapability", "family")
"""Optional GPU facts given as text."""


class InventoryError(ValueError):
    """The inventory file is malformed; the message names the node and field."""


@dataclass(frozen=True)
class CPU:
    vendor: str
    model: str
    family: str
    id: str
    cores: int
    threads_per_core: int = 2


@dataclass(frozen=True)
class GPU:
    """A group of identical cards, with the facts each vendor's library reports (the simulated backend
    reads the same entry; see device_manager/simulated.py)."""

    manufacturer: str
    product: str
    count: int
    memory_mib: int
    pci_class: str = DEFAULT_PCI_CLASS
    cores: int = 0
    driver_version: str = ""
    runtime_version: str = ""
    compute_capability: str = ""
    family: str = ""
    unhealthy: tuple[int, ...] = ()
    """Positions in the group (from 0) of the cards the vendor library flags unhealthy."""


@dataclass(frozen=True)
class InventoryNode:
    name: str
    cpu: CPU
    memory: str
    os: str = "linux"
    arch: str = "amd64"
    gpus: tuple[GPU, ...] = field(default_factory=tuple)


def _require(doc: dict[str, Any], key: str, where: str) -> Any:
    if key not in doc or doc[key] in (None, ""):
        raise InventoryError(f"{where}.{key}: required")
    return doc[key]


def _positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InventoryError(f"{where}: must be a positive integer, got {value!r}")
    return value


def _parse_gpu(doc: dict[str, Any], where: str) -> GPU:
    mfr = str(_require(doc, "manufacturer", where)).lower()
    if not manufacturers.is_known_manufacturer(mfr):
        raise InventoryError(
            f"{where}.manufacturer: unknown manufacturer {mfr!r} "
            f"(known: {', '.join(manufacturers.known_manufacturers())})"
        )
    pci_class = str(doc.get("pciClass", DEFAULT_PCI_CLASS)).lower()
    if not _PCI_CLASS.fullmatch(pci_class):
        raise InventoryError(f"{where}.pciClass: want 4 hex digits (class and subclass), got {pci_class!r}")
    count = _positive_int(_require(doc, "count", where), f"{where}.count")
    texts = {key: doc.get(key, "") for key in _TEXT_FACTS}
    for key, value in texts.items():
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise InventoryError(f"{where}.{key}: want a string, got {value!r}")
    unhealthy = doc.get("unhealthy") or []
    if not isinstance(unhealthy, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and 0 <= i < count for i in unhealthy
    ):
        raise InventoryError(
            f"{where}.unhealthy: want a list of card positions 0..{count - 1}, got {unhealthy!r}"
        )
    cores = doc.get("cores", 0)
    return GPU(
        mfr,
        str(_require(doc, "product", where)),
        count,
        _positive_int(_require(doc, "memoryMiB", where), f"{where}.memoryMiB"),
        pci_class,
        cores=_positive_int(cores, f"{where}.cores") if cores else 0,
        driver_version=str(texts["driverVersion"]),
        runtime_version=str(texts["runtimeVersion"]),
        compute_capability=str(texts["computeCapability"]),
        family=str(texts["family"]),
        unhealthy=tuple(sorted(set(unhealthy))),
    )


def _parse_node(doc: dict[str, Any], index: int) -> InventoryNode:
    where = f"nodes[{index}]"
    name = str(_require(doc, "name", where))
    where = f"nodes[{index}] ({name})"
    cpu_doc = _require(doc, "cpu", where)
    cpu = CPU(
        vendor=str(cpu_doc.get("vendor", "")),
        model=str(cpu_doc.get("model", "")),
        family=str(cpu_doc.get("family", "")),
        id=str(cpu_doc.get("id", "")),
        cores=_positive_int(_require(cpu_doc, "cores", f"{where}.cpu"), f"{where}.cpu.cores"),
        threads_per_core=_positive_int(cpu_doc.get("threadsPerCore", 2), f"{where}.cpu.threadsPerCore"),
    )
    gpus = tuple(_parse_gpu(g, f"{where}.gpus[{i}]") for i, g in enumerate(doc.get("gpus") or []))
    return InventoryNode(
        name=name,
        cpu=cpu,
        memory=str(doc.get("memory", "256Gi")),
        os=str(doc.get("os", "linux")),
        arch=str(doc.get("arch", "amd64")),
        gpus=gpus,
    )


def bundled() -> dict[str, Path]:
    """The inventories shipped with the package, by name."""
    return {path.stem: path for path in sorted(BUNDLED_DIR.glob("*.yaml"))}


def resolve(text: str) -> Path:
    """An `--inventory` argument: a bundled inventory's name (`all-vendors`), else a file's path."""
    found = bundled().get(text)
    if found is not None and not Path(text).exists():
        return found
    path = Path(text)
    if not path.is_file():
        names = ", ".join(bundled())
        raise InventoryError(f"no inventory file {text!r} (bundled inventories: {names})")
    return path


def load(path: Path = DEFAULT_INVENTORY) -> list[InventoryNode]:
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise InventoryError(f"cannot read inventory {path}: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise InventoryError(f"{path}: expected a mapping with a 'nodes' list")
    nodes = [_parse_node(n, i) for i, n in enumerate(doc["nodes"])]
    names = [n.name for n in nodes]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InventoryError(f"{path}: duplicate node names {duplicates}")
    return nodes


def node_manifest(node: InventoryNode) -> dict[str, Any]:
    """The Node object (with status) a kubelet would produce for this inventory node."""
    labels = {
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": node.os,
        "kubernetes.io/arch": node.arch,
        "type": "kwok",
    }
    threads = node.cpu.cores * node.cpu.threads_per_core
    annotations = {MANAGED_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"}
    capacity = {"cpu": str(threads), "memory": node.memory, "pods": "110", "ephemeral-storage": "1Ti"}
    known = manufacturers.manufacturers()
    for gpu in node.gpus:
        name = known[gpu.manufacturer].resource_name
        capacity[name] = str(int(capacity.get(name, "0")) + gpu.count)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": labels, "annotations": annotations},
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "nodeInfo": {
                "architecture": node.arch,
                "operatingSystem": node.os,
                "kubeletVersion": "fake",
                "kubeProxyVersion": "fake",
            },
        },
    }
