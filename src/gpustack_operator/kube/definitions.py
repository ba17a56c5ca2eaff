"""Installing CustomResourceDefinitions: server-side apply, then wait until the apiserver serves them.

Both the worker's Prepare phase (our CRDs) and the sandbox (Kueue's and NFD's) need exactly this; a kind is
usable only once its CRD reports Established.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.conditions import is_true

log = logging.getLogger(__name__)


class NotEstablishedError(RuntimeError):
    """Some CRDs were not Established in time; the message names them."""


async def apply_and_wait(client: Client, crds: Sequence[dict[str, Any]], *, timeout: float) -> None:
    """Apply every CRD (concurrently), then poll until each is Established or timeout seconds passed."""
    await asyncio.gather(*(client.apply(resources.CRDS, crd) for crd in crds))
    pending = {crd["metadata"]["name"] for crd in crds}
    try:
        async with asyncio.timeout(timeout):
            while pending:
                for name in sorted(pending):
                    if is_true(await client.get(resources.CRDS, name), "Established"):
                        pending.discard(name)
                        log.info("CRD %s is Established", name)
                if pending:
                    await asyncio.sleep(0.2)
    except TimeoutError:
        raise NotEstablishedError(
            f"CRDs not Established within {timeout:.0f}s: {', '.join(sorted(pending))}"
        ) from None
