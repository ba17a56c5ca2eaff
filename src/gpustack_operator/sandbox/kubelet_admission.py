"""The kubelet stand-in's pod admission: device IDs chosen as the kubelet chooses them, then Allocate.

Pods bound to the node are admitted one at a time on one task (the kubelet's admission loop), in the
order the pod source delivers them: each wake-up takes the batch of bound pods not yet seen, sorted by
creation time only, with ties in random order (the kubelet's sort is not stable, and the API's creation
timestamp has one-second resolution), so the device manager cannot rely on any finer order. A pod joins
the kubelet's active pods, which PodResources lists, as its admission starts. For each container, init
containers first, and each registered device-plugin resource in its limits: take the init containers'
devices first, then `available = healthy - allocated`, ask the plugin's GetPreferredAllocation when it
offers one, fill the rest in random order (the real order is unspecified), and call Allocate with no
deadline, one container per call. Success marks the pod admitted (kwok then
starts it); any failure releases what the pod got and fails it with UnexpectedAdmissionError. Devices are
freed lazily, when the pod is gone or finished, and the plugin is never told.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping
from typing import Any

import grpc

from gpustack_operator.api.quantity import Quantity
from gpustack_operator.device_manager.plugin.api import pb
from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client
from gpustack_operator.sandbox import kubelet_pods as kp
from gpustack_operator.sandbox.kubelet_registry import DeviceRegistry, Endpoint
from gpustack_operator.sandbox.kwok import ADMITTED_ANNOTATION

log = logging.getLogger(__name__)
Pod = Mapping[str, Any]
Committed = Mapping[str, Mapping[str, tuple[str, ...]]]
"""container name -> resource name -> the device IDs committed to it."""


class AdmissionError(Exception):
    """The pod cannot be admitted; the message is what the kubelet would report."""


def response_json(response: Any) -> dict[str, Any]:
    """A ContainerAllocateResponse as plain JSON, for tests to read back."""
    return {
        "envs": dict(response.envs),
        "mounts": [
            {"containerPath": m.container_path, "hostPath": m.host_path, "readOnly": m.read_only}
            for m in response.mounts
        ],
        "devices": [
            {"containerPath": d.container_path, "hostPath": d.host_path, "permissions": d.permissions}
            for d in response.devices
        ],
        "annotations": dict(response.annotations),
    }


class Admission:
    """Admits the node's pods and remembers what each container was given."""

    def __init__(
        self,
        client: Client,
        registry: DeviceRegistry,
        pods: Callable[[], list[dict[str, Any]]],
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self.registry = registry
        self.pods = pods
        self.rng = rng or random.Random()
        self.allocated: dict[str, dict[tuple[str, str], list[str]]] = {}
        """Pod UID -> (container, resource) -> device IDs."""
        self.records: dict[str, dict[str, Any]] = {}
        """`namespace/name` -> {admitted, message, containers: {container: {resource: response}}}."""
        self._done: set[str] = set()
        """UIDs whose admission has started (the kubelet's pod manager)."""
        self._rejected: set[str] = set()
        self._wake = asyncio.Event()

    # ---- informer handler: every change may make a pod admissible ----------------------------------------
    def on_add(self, obj: dict[str, Any]) -> None:
        self._wake.set()

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self._wake.set()

    def on_delete(self, obj: dict[str, Any]) -> None:
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch = [pod for pod in self.pods() if self._admissible(pod)]
            self.rng.shuffle(batch)
            batch.sort(key=lambda pod: str(kp.meta(pod).get("creationTimestamp", "")))
            for pod in batch:
                await self.admit(pod)

    def active(self) -> list[tuple[kp.PodName, Committed]]:
        """PodResources List: the active pods this kubelet admitted or is admitting, with the device IDs
        committed to each listed container (restartable init containers, then app containers; a regular
        init container is not listed). A container's IDs appear once its Allocate has returned."""
        listed: list[tuple[kp.PodName, Committed]] = []
        for pod in self.pods():
            uid = kp.uid(pod)
            started = uid in self._done or ADMITTED_ANNOTATION in kp.annotations_of(pod)
            if not started or uid in self._rejected or not kp.active(pod):
                continue
            given = self.allocated.get(uid, {})
            containers: dict[str, dict[str, tuple[str, ...]]] = {}
            for entry in kp.listed_containers(pod):
                name = str(entry.get("name"))
                containers[name] = {res: tuple(ids) for (c, res), ids in given.items() if c == name}
            listed.append((kp.name(pod), containers))
        return listed

    def _admissible(self, pod: Pod) -> bool:
        return (
            kp.waiting(pod)
            and kp.uid(pod) not in self._done
            and ADMITTED_ANNOTATION not in kp.annotations_of(pod)
        )

    async def admit(self, pod: Pod) -> None:
        uid, key = kp.uid(pod), kp.key(pod)
        self._done.add(uid)
        self._release_finished()
        record: dict[str, Any] = {"admitted": False, "message": "", "containers": {}}
        self.records[key] = record
        try:
            reuse: dict[str, list[str]] = {}
            for entry in [*kp.init_containers(pod), *kp.app_containers(pod)]:
                for resource, device_ids, response in await self._container(pod, entry, reuse):
                    record["containers"].setdefault(entry["name"], {})[resource] = {
                        "deviceIDs": device_ids,
                        **response_json(response),
                    }
            await self._patch(pod, {"metadata": {"annotations": {ADMITTED_ANNOTATION: "true"}}})
            record["admitted"] = True
            log.info("admitted pod=%s", key)
        except (AdmissionError, errors.KubeError) as err:
            self.allocated.pop(uid, None)
            self._rejected.add(uid)
            record["message"] = str(err)
            log.warning("admission failed pod=%s: %s", key, err)
            status = {"phase": "Failed", "reason": "UnexpectedAdmissionError", "message": str(err)}
            try:
                await self._patch(pod, {"status": status}, subresource="status")
            except errors.KubeError as patch_err:
                log.warning("cannot fail pod=%s: %s", key, patch_err)

    async def _container(
        self, pod: Pod, entry: Mapping[str, Any], reuse: dict[str, list[str]]
    ) -> list[tuple[str, list[str], Any]]:
        results = []
        restartable = kp.is_sidecar(entry)
        is_init = any(c is entry for c in kp.init_containers(pod))
        for resource, text in ((entry.get("resources") or {}).get("limits") or {}).items():
            if resource not in self.registry.endpoints and resource not in self.registry.removed:
                continue
            needed = Quantity.parse(str(text)).value()
            device_ids, response = await self._allocate(
                pod, str(entry["name"]), resource, needed, reuse.get(resource, [])
            )
            results.append((resource, device_ids, response))
            if is_init and not restartable:
                reuse[resource] = device_ids
            else:
                reuse[resource] = [d for d in reuse.get(resource, []) if d not in device_ids]
        return results

    async def _allocate(
        self, pod: Pod, container: str, resource: str, needed: int, reusable: list[str]
    ) -> tuple[list[str], Any]:
        endpoint = self.registry.endpoints.get(resource)
        if endpoint is None:
            raise AdmissionError(f"cannot allocate unregistered device {resource}")
        if endpoint.stopped_at is not None:
            raise AdmissionError(f"endpoint {resource} has been stopped")
        if not endpoint.healthy:
            raise AdmissionError(f"no healthy devices present; cannot allocate unhealthy devices {resource}")
        chosen = reusable[:needed]
        in_use = {d for ids in self._in_use(resource) for d in ids}
        available = [d for d in endpoint.healthy if d not in in_use and d not in chosen]
        if len(available) < needed - len(chosen):
            raise AdmissionError(
                f"requested number of devices unavailable for {resource}. "
                f"Requested: {needed}, Available: {len(available)}"
            )
        if len(chosen) < needed and endpoint.options.get_preferred_allocation_available:
            preferred = await self._preferred(endpoint, available + chosen, chosen, needed)
            chosen += [d for d in preferred if d in available and d not in chosen][: needed - len(chosen)]
        rest = [d for d in available if d not in chosen]
        self.rng.shuffle(rest)
        chosen += rest[: needed - len(chosen)]
        request = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=chosen)])
        try:
            response = await endpoint.stub.Allocate(request)
        except grpc.aio.AioRpcError as err:
            raise AdmissionError(f"Allocate failed due to {err.details()}, which is unexpected") from err
        if not response.container_responses:
            raise AdmissionError(f"no containers return in allocation response {response}")
        self.allocated.setdefault(kp.uid(pod), {})[(container, resource)] = chosen
        return chosen, response.container_responses[0]

    async def _preferred(
        self, endpoint: Endpoint, available: list[str], must: list[str], size: int
    ) -> list[str]:
        request = pb.PreferredAllocationRequest(
            container_requests=[
                pb.ContainerPreferredAllocationRequest(
                    available_deviceIDs=available, must_include_deviceIDs=must, allocation_size=size
                )
            ]
        )
        try:
            response = await endpoint.stub.GetPreferredAllocation(request)
        except grpc.aio.AioRpcError as err:
            log.warning("GetPreferredAllocation failed resource=%s: %s", endpoint.resource, err.details())
            return []
        return list(response.container_responses[0].deviceIDs) if response.container_responses else []

    def _in_use(self, resource: str) -> list[list[str]]:
        return [ids for pod in self.allocated.values() for (_, res), ids in pod.items() if res == resource]

    def _release_finished(self) -> None:
        """UpdateAllocatedDevices: forget the devices of pods that are gone or finished."""
        active = {kp.uid(pod) for pod in self.pods() if kp.active(pod)}
        for uid in [uid for uid in self.allocated if uid not in active]:
            del self.allocated[uid]

    async def _patch(self, pod: Pod, patch: dict[str, Any], subresource: str | None = None) -> None:
        meta = kp.meta(pod)
        await self.client.patch(
            resources.PODS, str(meta["name"]), patch, namespace=meta.get("namespace"), subresource=subresource
        )
