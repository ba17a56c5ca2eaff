"""Domain-free asyncio kit: supervised tasks, workqueue, backoff, clock.

Nothing here knows about Kubernetes, HTTP or gRPC; the layers above build controllers, servers
and reconnect loops out of these parts.
"""

from .backoff import Attempts, Backoff, KeyedAttempts
from .clock import Clock, FakeClock, MonotonicClock, Timer
from .ratelimit import TokenBucket
from .signals import run_until_signal
from .tasks import Restart, Supervisor, TaskExit, TaskFactory
from .workqueue import QueueObserver, ShutDownError, WorkQueue

__all__ = [
    "Attempts",
    "Backoff",
    "Clock",
    "FakeClock",
    "KeyedAttempts",
    "MonotonicClock",
    "QueueObserver",
    "Restart",
    "ShutDownError",
    "Supervisor",
    "TaskExit",
    "TaskFactory",
    "Timer",
    "TokenBucket",
    "WorkQueue",
    "run_until_signal",
]
