"""One running controller: informer events feed a work queue, workers feed keys to the reconciler.

Handlers turn watch events into keys (through each watch's predicates and key function); the work queue
collapses repeats and guarantees one key is never reconciled twice at once; `concurrency` workers take
keys and interpret the outcome: success forgets the key's backoff, `requeue_after` schedules it again,
an exception requeues it with backoff (conflicts quietly, others with a traceback the first time), and a
`TerminalError` is logged, recorded as a Warning Event on the object and not retried.

Events of a throttled watch (controllerkit.watches) enqueue a key at once when the watch has not done so
within its period, and otherwise when the period is over; the queue collapses the events in between. What
an admin does to a primary object (create, delete, a spec change) is never held back, only the churn of
its status and labels.

A controller runs only while its manager leads. Events that arrive while it is stopped are dropped, and
every start replays all cached objects of every watch, which is what a level-based reconciler needs.
"""

from __future__ import annotations

import logging
from functools import partial

from gpustack_operator.api.json import JSONObj
from gpustack_operator.controllerkit.cache import SharedInformer
from gpustack_operator.controllerkit.metrics import Metrics
from gpustack_operator.controllerkit.reconciler import TerminalError
from gpustack_operator.controllerkit.spec import ControllerSpec
from gpustack_operator.controllerkit.watches import Watch
from gpustack_operator.kube import errors
from gpustack_operator.kube.events import EventRecorder, object_reference
from gpustack_operator.runtime import Clock, MonotonicClock, ShutDownError, Supervisor, WorkQueue

__all__ = ["Controller"]

log = logging.getLogger(__name__)


class Controller:
    """Runs one `ControllerSpec` against informers the manager made for its watches."""

    def __init__(
        self,
        spec: ControllerSpec,
        sources: list[tuple[Watch, SharedInformer]],
        *,
        metrics: Metrics,
        recorder: EventRecorder | None = None,
        clock: Clock | None = None,
        drain_grace: float = 5.0,
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self._sources = sources
        self._primary = sources[0][1]
        self._metrics = metrics
        self._recorder = recorder
        self._clock: Clock = clock or MonotonicClock()
        self._drain_grace = drain_grace
        self._queue: WorkQueue[str] | None = None
        self._fenced = False
        self._throttled: dict[str, float] = {}
        """key -> when a throttled watch may next enqueue it at once."""
        for watch, informer in sources:
            informer.add_handler(_Enqueuer(self, watch))

    @property
    def queue(self) -> WorkQueue[str] | None:
        """The work queue while running (None when stopped)."""
        return self._queue

    def fence(self) -> None:
        """Leadership is lost: stop without letting reconciles in flight finish."""
        self._fenced = True

    def enqueue(self, watch: Watch, old: JSONObj | None, new: JSONObj | None) -> None:
        queue = self._queue
        if queue is None or not watch.accepts(old, new):
            return
        urgent = watch.throttle > 0 and watch is self.spec.primary and _urgent(old, new)
        for obj in (old, new):
            if obj is None:
                continue
            try:
                keys = watch.keys(obj)
            except Exception:
                log.exception("Controller %s: key function of %s failed", self.name, watch.resource.kind)
                continue
            for key in keys:
                if watch.throttle > 0:
                    self._add_throttled(queue, key, watch.throttle, urgent)
                else:
                    queue.add(key)

    def _add_throttled(self, queue: WorkQueue[str], key: str, period: float, urgent: bool) -> None:
        now = self._clock.now()
        allowed = self._throttled.get(key, now)
        if urgent or now >= allowed:
            queue.add(key)
            self._throttled[key] = now + period
        else:
            queue.add_after(key, allowed - now)  # a later event in this period joins the same add
        if len(self._throttled) > 4096:
            self._throttled = {k: t for k, t in self._throttled.items() if t > now}

    async def run(self) -> None:
        """Reconcile until cancelled; on the way out let reconciles in flight finish (unless fenced)."""
        self._fenced = False
        queue: WorkQueue[str] = WorkQueue(
            self.name,
            backoff=self.spec.backoff,
            clock=self._clock,
            observer=self._metrics.queue_observer(self.name),
        )
        self._queue = queue
        for watch, informer in self._sources:
            for obj in informer.store.list():
                self.enqueue(watch, None, obj)
        log.info(
            "Controller %s started with %s workers, %s keys queued",
            self.name,
            self.spec.concurrency,
            len(queue),
        )
        async with Supervisor(f"controller {self.name}") as workers:
            for n in range(self.spec.concurrency):
                workers.spawn(f"{self.name} worker {n}", partial(self._work, queue))
            try:
                ended = await workers.wait()
            finally:
                self._queue = None
                if self._fenced:
                    queue.shutdown()
                elif not await queue.shutdown_with_drain(self._drain_grace):
                    log.warning(
                        "Controller %s: reconciles still running after %ss", self.name, self._drain_grace
                    )
                log.info("Controller %s stopped", self.name)
        raise RuntimeError(f"controller {self.name}: {ended.name} ended unexpectedly") from ended.error

    async def _work(self, queue: WorkQueue[str]) -> None:
        while True:
            try:
                key = await queue.get()
            except ShutDownError:
                return
            try:
                await self._reconcile(queue, key)
            finally:
                queue.done(key)

    async def _reconcile(self, queue: WorkQueue[str], key: str) -> None:
        started = self._clock.now()
        try:
            result = await self.spec.reconciler.reconcile(key)
        except TerminalError as e:
            outcome = "terminal"
            queue.forget(key)
            self._record_terminal(key, e)
        except errors.Conflict as e:
            outcome = "conflict"
            log.info("Controller %s: %s conflicted, retrying: %s", self.name, key, e.message)
            queue.add_rate_limited(key)
        except Exception as e:
            outcome = "error"
            first = queue.num_requeues(key) == 0
            log.warning("Controller %s: %s failed, retrying: %s", self.name, key, e, exc_info=first)
            queue.add_rate_limited(key)
        else:
            outcome = "success"
            queue.forget(key)
            if result.requeue_after is not None:
                outcome = "requeue_after"
                queue.add_after(key, result.requeue_after)
        self._metrics.reconciled(self.name, outcome, self._clock.now() - started)

    def _record_terminal(self, key: str, error: TerminalError) -> None:
        log.error(
            "Controller %s: %s failed and will not be retried: %s: %s", self.name, key, error.reason, error
        )
        obj = self._primary.store.get(key)
        if self._recorder is not None and obj is not None:
            ref = object_reference(self.spec.primary.resource, obj)
            self._recorder.event(ref, "Warning", error.reason, str(error))


def _urgent(old: JSONObj | None, new: JSONObj | None) -> bool:
    """The object was created or deleted, is being deleted, or its spec changed (generation)."""
    if old is None or new is None:
        return True
    before, after = old.get("metadata") or {}, new.get("metadata") or {}
    if after.get("deletionTimestamp") and not before.get("deletionTimestamp"):
        return True
    return before.get("generation") != after.get("generation")


class _Enqueuer:
    """The informer EventHandler of one watch of one controller."""

    def __init__(self, controller: Controller, watch: Watch) -> None:
        self._controller = controller
        self._watch = watch

    def on_add(self, obj: JSONObj) -> None:
        self._controller.enqueue(self._watch, None, obj)

    def on_update(self, old: JSONObj, new: JSONObj) -> None:
        self._controller.enqueue(self._watch, old, new)

    def on_delete(self, obj: JSONObj) -> None:
        self._controller.enqueue(self._watch, obj, None)
