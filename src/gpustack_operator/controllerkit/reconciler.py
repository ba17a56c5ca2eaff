"""What a reconciler is: `reconcile(key) -> Result`, level-based, with errors that say whether to retry.

A reconciler is handed only a key ("namespace/name" or "name"), never the event that caused it: it reads
the current state (from an informer's store or the API), makes the world match, and returns. Anything it
raises is retried with per-key exponential backoff, which is right for conflicts and outages; raise
`TerminalError` instead when retrying cannot help (the object itself is wrong), and the manager records a
Warning Event on the object, logs it and leaves the key alone until the object changes. Return
`Result(requeue_after=s)` to be looked at again after `s` seconds even if nothing changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["DONE", "Reconciler", "Result", "TerminalError"]


@dataclass(frozen=True)
class Result:
    """The outcome of a successful reconcile."""

    requeue_after: float | None = None
    """Seconds after which to reconcile the key again; None waits for the next change."""

    def __post_init__(self) -> None:
        if self.requeue_after is not None and self.requeue_after < 0:
            raise ValueError(f"requeue_after must be >= 0, got {self.requeue_after}")


DONE = Result()


class TerminalError(Exception):
    """Retrying cannot fix this (bad input in the object); `reason` becomes the Event's reason."""

    def __init__(self, message: str, *, reason: str = "ReconcileFailed") -> None:
        super().__init__(message)
        self.reason = reason


class Reconciler(Protocol):
    """Brings the object named by `key` to its desired state; must be idempotent."""

    async def reconcile(self, key: str) -> Result: ...
