"""Accelerator group IDs and accelerator keys (contract §7.2).

Cards of one model on a node form a group; ``<manufacturer>-<group ID>`` (the accelerator key, e.g.
``nvidia-tesla-t4``) names that model in node labels, ResourceFlavors, ClusterQueues and InstanceTypes.
The ID must leave room for the key's label suffixes, so its length budget is computed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from gpustack_operator.api.keys import ACCELERATABLE_FEATURE_PREFIX
from gpustack_operator.api.quantity import format_binary_si_rounded
from gpustack_operator.rules.cards import MIB
from gpustack_operator.rules.environ import DEFAULT_ENVIRON, Environ, env_flag
from gpustack_operator.rules.naming.manufacturers import is_known_manufacturer
from gpustack_operator.rules.naming.names import MAX_LABEL_VALUE_LENGTH, normalize_name
from gpustack_operator.rules.naming.nodes import Node, node_labels

GROUP_ID_WITH_MEMORY_ENV: Final = "GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY"
"""`true`: group IDs end with the card's VRAM (`-80g`), so same-named cards of different sizes split."""

UNNAMED_GROUP_WORDS: Final = "unnamed"
"""The group ID words of a card whose product name and PCI IDs both normalise to nothing."""

KEY_SUFFIX_RESERVE: Final = 10
"""Room kept after an accelerator key for its label suffixes (`.capacity`, `.product`, `.count`, ...)."""

MEMORY_SUFFIX_RESERVE: Final = 7
"""Room for `-<memory>` (e.g. `-1023g`) when the memory is part of the ID."""


def format_group_memory(memory_mib: int) -> str:
    """formatMemory: VRAM as a short lower-case word: 0 -> `0g`, under 1 GiB -> `1g`, 44280 -> `43g`."""
    if memory_mib <= 0:
        return "0g"
    if memory_mib < 1024:
        return "1g"
    return format_binary_si_rounded(memory_mib * MIB).lower().removesuffix("i")


def construct_group_id(
    manufacturer: str,
    name: str,
    memory_mib: int,
    environ: Environ = DEFAULT_ENVIRON,
    *,
    unnamed: str = "",
) -> str:
    """ConstructGroupID: the normalised product name (manufacturer word dropped) within its budget.

    A name that normalises to nothing (`NVIDIA`, "") would leave the key `<manufacturer>-`, which is no
    valid label name; its words then come from ``unnamed`` (the card's PCI IDs, `PCI 10de:2330`, so the
    card is called what a bus-only detection calls it), or are `unnamed` when that says nothing either.
    """
    budget = MAX_LABEL_VALUE_LENGTH - len(manufacturer) - 1 - KEY_SUFFIX_RESERVE
    with_memory = env_flag(GROUP_ID_WITH_MEMORY_ENV, environ)
    if with_memory:
        budget -= MEMORY_SUFFIX_RESERVE
    words = (
        normalize_name(name, manufacturer, budget, False)
        or normalize_name(unnamed, manufacturer, budget, False)
        or UNNAMED_GROUP_WORDS
    )
    return f"{words}-{format_group_memory(memory_mib)}" if with_memory else words


def accelerator_key(manufacturer: str, group_id: str) -> str:
    """The accelerator key `<manufacturer>-<group ID>`."""
    return f"{manufacturer}-{group_id}"


def key_manufacturer(key: str) -> str:
    """The manufacturer part of a node key: everything before the first `-`."""
    return key.partition("-")[0]


def extract_acceleratable_keys(labels: Mapping[str, str]) -> list[str]:
    """ExtractAcceleratableKeys: accelerator keys marked `true` under a known manufacturer, sorted."""
    keys = []
    for label, value in labels.items():
        key = label.removeprefix(ACCELERATABLE_FEATURE_PREFIX)
        if value == "true" and key != label and "-" in key and is_known_manufacturer(key_manufacturer(key)):
            keys.append(key)
    return sorted(keys)


def extract_acceleratable_node_keys(node: Node) -> list[str]:
    """ExtractAcceleratableNodeKeys: extract_acceleratable_keys of the node's labels."""
    return extract_acceleratable_keys(node_labels(node))
