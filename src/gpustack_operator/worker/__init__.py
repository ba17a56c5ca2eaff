"""Composition root of `gpustack-operator worker`: Prepare, then Start, in the order the spec gives.

Prepare (every replica, idempotent, before anything reconciles): ensure the system namespace, apply our
CRDs by server-side apply and wait until they are Established, then create the `gpustack-settings` Secret
or backfill the keys it lacks (never overwriting a value an admin set). Extension API services, webhook
configurations and the bundled applications join this sequence, in the spec's order, with their issues.

Start: the health and metrics servers come up first (so probes answer during Prepare), then the manager
runs the controllers that controllers.setup registers (the one list of them) under leader election.
"""

from __future__ import annotations

from gpustack_operator.worker.prepare import PrepareError, prepare
from gpustack_operator.worker.start import WorkerOptions, run

__all__ = ["PrepareError", "WorkerOptions", "prepare", "run"]
