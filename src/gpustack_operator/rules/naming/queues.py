"""LocalQueue names (contract §7.8).

Workloads name their LocalQueue in the `kueue.x-k8s.io/queue-name` label (63 chars at most), while
ClusterQueue names can be longer, so every LocalQueue is named after a 64-bit FNV-1a hash of its
ClusterQueue's name: `gpustack-fnv64-<16 hex digits>`, always 31 characters.
"""

from __future__ import annotations

from typing import Final

from gpustack_operator.api.keys import LOCAL_QUEUE_NAME_PREFIX

FNV64_OFFSET_BASIS: Final = 0xCBF29CE484222325
FNV64_PRIME: Final = 0x100000001B3
_MASK64: Final = 2**64 - 1


def fnv1a_64(data: bytes) -> int:
    """The 64-bit FNV-1a hash of ``data``."""
    value = FNV64_OFFSET_BASIS
    for byte in data:
        value = ((value ^ byte) * FNV64_PRIME) & _MASK64
    return value


def format_local_queue_name(cluster_queue: str) -> str:
    """FormatLocalQueueName: `gpustack-fnv64-` + zero-padded lower-case hex FNV-1a 64 of the UTF-8 name."""
    return f"{LOCAL_QUEUE_NAME_PREFIX}{fnv1a_64(cluster_queue.encode()):016x}"
