"""Cambricon MLU: the control node `/dev/cambricon_ctl` and each card's `/dev/cambricon_dev<i>`.

The MLU driver numbers its device nodes as cndev indexes the cards (the detected physical index, else the
card's index); CAMBRICON_VISIBLE_DEVICES names the cndev indexes. Sliced is a whole-card passthrough: no
sMLU profile is created.
"""

from __future__ import annotations

from gpustack_operator.device_manager.allocator.responses.common import Grant, Injection, with_device_nodes
from gpustack_operator.device_manager.plugin.inventory import CardInfo

CONTROL = "/dev/cambricon_ctl"


def card_nodes(card: CardInfo) -> list[str]:
    return [f"/dev/cambricon_dev{card.node_index}"]


def respond(grant: Grant) -> Injection:
    return with_device_nodes(grant, [CONTROL], card_nodes)
