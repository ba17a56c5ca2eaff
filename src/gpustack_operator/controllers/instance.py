"""InstanceReconciler: each Instance runs as one Pod in its type's queue, and says how it is doing.

Why this module exists: an Instance is what a user asks for (an image, a type, resources, a volume, maybe
an SSH key); Kueue, the scheduler and the device manager only know Pods. This reconciler renders the Pod
(rules.instance.pod: the queue label is the type's entrance, the resources are those the Instance
webhook defaulted, the Pod webhook folds a slice into units), creates it while the Instance should run,
deletes it on `spec.stop`, and writes the Instance's status from the Pod (phase, node, addresses, ports,
the cards of the device manager's allocation annotation).

Reaching it: a Pod that exposes ports (main's `spec.ports`, the SSH sidecar's 22) gets a NodePort Service
of its name, controlled by the Pod (rules.instance.service), whose node ports fill `status.ports`; the
access address comes from the `instance-access-*` settings or the node (rules.instance.access). A
settings change re-reads every Instance, so a new static address or wildcard DNS shows at once; the
image settings (`container-registry`, `container-namespace`, `image-pull-secrets`, `image-pull-policy`)
apply to Pods created from then on, as a running Pod's spec cannot change.

Stopping is also decided here (architecture "Running-instance stop"): an Instance whose queue is
HoldAndDrain (a drained pool, a teardown evicting its workloads) or whose InstanceType is being deleted or
gone gets `spec.stop=true` and a Warning Event saying why, rather than a Pod no queue will ever admit; an
admin Hold (`inactive`) is not a stop, so a running Pod keeps running and a new one waits. The queue and
type watches map a change to the type's Instances through an index, so such a stop is prompt.

A Pod deleted by someone else is recreated under the same name, but only once Kueue has let go of the
Workload of the former Pod: Kueue files Workloads under their owner's name, so a new Pod created while the
old Workload is still finalizing is taken for that Workload's Pod, and Kueue deletes it with the Workload
(Kueue v0.17 jobframework.FindMatchingWorkloads and Pod.Stop with StopReasonWorkloadDeleted). The
Workloads are indexed by their controlling Pod, and the deletion of the last one re-enqueues the Instance.

Bad input never loops: a Pod that cannot be rendered or that kube-apiserver refuses (a webhook) is
reported on the Instance (status message and one Warning Event) and waits for the Instance to change; a
missing PersistentVolumeClaim or Secret is reported the same way and looked for again every
`MISSING_RECHECK` seconds. Every write is computed against the cache: at rest nothing is written.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import RESOURCE_TYPE_INSTANCES, RESOURCE_TYPE_LABEL
from gpustack_operator.api.types.kueue import StopPolicy
from gpustack_operator.controllerkit.cache import Cache
from gpustack_operator.controllerkit.problems import ProblemReporter
from gpustack_operator.controllerkit.rbac import Rule
from gpustack_operator.controllerkit.reconciler import DONE, Result
from gpustack_operator.controllerkit.spec import ControllerSpec, Index
from gpustack_operator.controllerkit.watches import Watch, for_, mapped, owner_keys, owns, reads
from gpustack_operator.controllers.dependencies import Dependencies
from gpustack_operator.controllers.pools import deleting
from gpustack_operator.controllers.settingsview import SettingsView
from gpustack_operator.kube import errors
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.events import EventSink, object_reference
from gpustack_operator.kube.resources import (
    CLUSTER_QUEUES,
    INSTANCE_TYPES,
    INSTANCES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PODS,
    RUNTIME_CLASSES,
    SECRETS,
    SERVICES,
    WORKLOADS,
    Resource,
)
from gpustack_operator.rules.instance.access import pull_secret_names
from gpustack_operator.rules.instance.pod import (
    PodSettings,
    RenderError,
    pod_status,
    render_pod,
    required_objects,
)
from gpustack_operator.rules.instance.service import render_service, serves_pod
from gpustack_operator.rules.instance.status import Access
from gpustack_operator.settings.catalog import (
    CONTAINER_NAMESPACE,
    CONTAINER_REGISTRY,
    IMAGE_PULL_POLICY,
    IMAGE_PULL_SECRETS,
    INSTANCE_ACCESS_STATIC_ADDRESS,
    INSTANCE_ACCESS_WILDCARD_DNS,
    INSTANCE_GENERAL_RESOURCES_OVERCOMMIT,
    INSTANCE_SSH_SERVER_IMAGE,
)

__all__ = ["NAME", "InstanceReconciler", "controller"]

log = logging.getLogger(__name__)

NAME: Final = "instance"
FIELD_MANAGER: Final = "gpustack-instance"
MISSING_RECHECK: Final = 30.0
"""Seconds between looks for a PersistentVolumeClaim or Secret an Instance names and that is missing."""
TYPE_INDEX: Final = "spec.type"
STOPPED: Final = "Stopped"
"""Reason of the Warning Event when the reconciler stops an Instance."""
POD_FAILED: Final = "PodNotCreated"
MISSING: Final = "MissingDependency"
POD_WATCH: Final = Watch(
    PODS, owner_keys(INSTANCES), label_selector=f"{RESOURCE_TYPE_LABEL}={RESOURCE_TYPE_INSTANCES}"
)
"""The Instances' Pods only (their ownership label), each enqueueing its Instance."""
SERVICE_WATCH: Final = Watch(
    SERVICES, owner_keys(PODS), label_selector=f"{RESOURCE_TYPE_LABEL}={RESOURCE_TYPE_INSTANCES}"
)
"""The Instances' Services, each enqueueing its Instance (its controlling Pod has the Instance's name)."""
NODE_READS: Final = reads(NODES)
"""The node a Pod runs on, for its address (shares the workers' one Node informer)."""
RUNTIME_CLASS_READS: Final = reads(RUNTIME_CLASSES)
"""Which RuntimeClasses exist (a manufacturer's is set on a Pod only when it does)."""
WORKLOADS_BY_POD: Final = Index(WORKLOADS, "metadata.ownerReferences.pod", owner_keys(PODS))
"""Kueue's Workloads filed under the namespace/name of the Pod that controls them (an Instance's key)."""
_KINDS: Final[dict[str, Resource]] = {"PersistentVolumeClaim": PERSISTENT_VOLUME_CLAIMS, "Secret": SECRETS}


def instance_type_of(instance: JSONObj) -> list[str]:
    name = (instance.get("spec") or {}).get("type")
    return [name] if isinstance(name, str) and name else []


INSTANCES_BY_TYPE: Final = Index(INSTANCES, TYPE_INDEX, instance_type_of)


def _spec(obj: JSONObj | None) -> dict[str, Any]:
    spec = (obj or {}).get("spec")
    return spec if isinstance(spec, dict) else {}


def stop_reason(type_name: str, instance_type: JSONObj | None, queue: JSONObj | None) -> str | None:
    """Why an Instance of `type_name` must stop, or None when it may run (or wait)."""
    if instance_type is None:
        return f"InstanceType {type_name} is gone"
    if deleting(instance_type):
        return f"InstanceType {type_name} is being deleted"
    if queue is not None and _spec(queue).get("stopPolicy") == StopPolicy.HOLD_AND_DRAIN:
        return f"the queue of InstanceType {type_name} is draining (stopPolicy HoldAndDrain)"
    return None


class InstanceReconciler:
    def __init__(
        self,
        client: Client,
        cache: Cache,
        settings: SettingsView,
        recorder: EventSink | None,
        problems: ProblemReporter,
    ) -> None:
        self.client, self.cache, self.settings = client, cache, settings
        self.recorder, self.problems = recorder, problems

    async def reconcile(self, key: str) -> Result:
        instance = self.cache.get(INSTANCES, key)
        if instance is None or deleting(instance):
            return DONE  # the Pod is owned by it: the garbage collector removes it
        spec = _spec(instance)
        type_name = str(spec.get("type") or "")
        instance_type = self.cache.get(INSTANCE_TYPES, type_name) if type_name else None
        pod = self.cache.get(POD_WATCH, key)
        if not spec.get("stop"):
            why = stop_reason(type_name, instance_type, self.cache.get(CLUSTER_QUEUES, type_name))
            if why is not None:
                return await self._stop(instance, why)
            if pod is None:
                return await self._start(instance, instance_type)
            service = None if deleting(pod) else await self._expose(pod, key)
            await self._write_status(instance, pod_status(pod, instance, self._access(pod, service)))
            return DONE
        if pod is not None and not deleting(pod):
            await self.client.delete(PODS, pod["metadata"]["name"], pod["metadata"]["namespace"])
            log.info("instance=%s stopped: deleted its Pod", key)
        await self._write_status(instance, pod_status(pod, instance))
        return DONE

    async def _expose(self, pod: JSONObj, key: str) -> JSONObj | None:
        """The NodePort Service of the Pod's ports: the cached one, or one created now (None while a
        predecessor's is going away or the Pod exposes nothing)."""
        service = self.cache.get(SERVICE_WATCH, key)
        if service is not None:
            if serves_pod(service, pod):
                return service
            if not deleting(service):  # left by a former Pod the garbage collector has not caught up with
                meta = service["metadata"]
                await self.client.delete(SERVICES, meta["name"], meta["namespace"])
            return None
        wanted = render_service(pod)
        if wanted is None:
            return None
        try:
            created = await self.client.create(
                SERVICES, wanted, pod["metadata"]["namespace"], field_manager=FIELD_MANAGER
            )
        except errors.AlreadyExists:
            return None  # the cache has not seen it yet; its event re-enqueues the Instance
        log.info("instance=%s exposed its Pod's ports on Service %s", key, created["metadata"]["name"])
        return created

    def _access(self, pod: JSONObj, service: JSONObj | None) -> Access:
        node_name = str((pod.get("spec") or {}).get("nodeName") or "")
        return Access(
            service=service,
            node=self.cache.get(NODE_READS, node_name) if node_name else None,
            static_address=self.settings.text(INSTANCE_ACCESS_STATIC_ADDRESS),
            wildcard_dns=self.settings.text(INSTANCE_ACCESS_WILDCARD_DNS),
        )

    async def _stop(self, instance: JSONObj, why: str) -> Result:
        meta = instance["metadata"]
        patch = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "spec": {"stop": True}}
        await self.client.patch(INSTANCES, meta["name"], patch, namespace=meta["namespace"])
        log.info("instance=%s/%s stopped: %s", meta["namespace"], meta["name"], why)
        if self.recorder is not None:
            self.recorder.event(object_reference(INSTANCES, instance), "Warning", STOPPED, f"Stopped: {why}")
        return DONE  # the update re-enqueues it, and the stop path deletes the Pod

    async def _start(self, instance: JSONObj, instance_type: JSONObj | None) -> Result:
        meta = instance["metadata"]
        namespace = meta["namespace"]
        assert instance_type is not None  # stop_reason said it exists
        former = self.cache.by_index(WORKLOADS, WORKLOADS_BY_POD.name, f"{namespace}/{meta['name']}")
        if former:  # its deletion (the owns watch below) brings us back
            names = ", ".join(sorted(str(wl["metadata"]["name"]) for wl in former))
            log.info(
                "instance=%s/%s waits for Kueue to let go of %s of its former Pod",
                namespace,
                meta["name"],
                names,
            )
            return DONE
        missing = [
            f'{kind} "{name}"'
            for kind, name in required_objects(instance)
            if await self.client.get_or_none(_KINDS[kind], name, namespace) is None
        ]
        if missing:
            problem = f"waiting for {', '.join(missing)} in namespace {namespace}"
            await self._refuse(instance, MISSING, problem)
            return Result(requeue_after=MISSING_RECHECK)
        self.problems.report(INSTANCES, instance, MISSING, None)
        settings = PodSettings(
            overcommit=self.settings.flag(INSTANCE_GENERAL_RESOURCES_OVERCOMMIT),
            ssh_server_image=self.settings.text(INSTANCE_SSH_SERVER_IMAGE),
            container_registry=self.settings.text(CONTAINER_REGISTRY),
            container_namespace=self.settings.text(CONTAINER_NAMESPACE),
            image_pull_secrets=pull_secret_names(self.settings.text(IMAGE_PULL_SECRETS)),
            image_pull_policy=self.settings.text(IMAGE_PULL_POLICY),
            runtime_classes=frozenset(
                str(obj["metadata"]["name"]) for obj in self.cache.list(RUNTIME_CLASS_READS)
            ),
        )
        try:
            pod = render_pod(instance, instance_type, settings)
            created = await self.client.create(PODS, pod, namespace, field_manager=FIELD_MANAGER)
        except RenderError as err:
            await self._refuse(instance, POD_FAILED, f"cannot render the Pod: {err}")
            return DONE
        except errors.AlreadyExists:
            return Result(requeue_after=1.0)  # the cache has not seen our own Pod yet
        except (errors.Invalid, errors.Forbidden, errors.BadRequest) as err:
            await self._refuse(instance, POD_FAILED, f"the Pod was refused: {err.message}")
            return DONE
        self.problems.report(INSTANCES, instance, POD_FAILED, None)
        log.info("instance=%s/%s created its Pod", namespace, meta["name"])
        await self._write_status(instance, pod_status(created, instance))
        return DONE

    async def _refuse(self, instance: JSONObj, reason: str, problem: str) -> None:
        """Say on the Instance why it cannot run: a Warning Event (once) and its status message."""
        self.problems.report(INSTANCES, instance, reason, problem)
        await self._write_status(instance, {**pod_status(None, instance), "phaseMessage": problem})

    async def _write_status(self, instance: JSONObj, status: JSONObj) -> None:
        current = instance.get("status") or {}
        if current == status:
            return
        meta = instance["metadata"]
        # a merge patch: what the new status no longer has is set to null
        body = {
            "metadata": {"resourceVersion": meta["resourceVersion"]},
            "status": {**dict.fromkeys(current), **status},
        }
        try:
            await self.client.patch_status(INSTANCES, meta["name"], body, namespace=meta["namespace"])
        except errors.NotFound:
            return


def _instances_of_type(cache: Cache) -> Any:
    def keys(obj: JSONObj) -> list[str]:
        name = str((obj.get("metadata") or {}).get("name") or "")
        return [
            f"{inst['metadata']['namespace']}/{inst['metadata']['name']}"
            for inst in cache.by_index(INSTANCES, TYPE_INDEX, name)
        ]

    return keys


def _stop_policy_changed(old: JSONObj | None, new: JSONObj | None) -> bool:
    return old is None or new is None or _spec(old).get("stopPolicy") != _spec(new).get("stopPolicy")


def _gone(_: JSONObj | None, new: JSONObj | None) -> bool:
    return new is None


def _deletion_signal(old: JSONObj | None, new: JSONObj | None) -> bool:
    return old is None or new is None or deleting(old) != deleting(new)


def _every_instance(cache: Cache) -> Any:
    def keys(_: JSONObj) -> list[str]:
        return sorted(f"{i['metadata']['namespace']}/{i['metadata']['name']}" for i in cache.list(INSTANCES))

    return keys


def controller(deps: Dependencies) -> ControllerSpec:
    instances_of_type = _instances_of_type(deps.cache)
    return ControllerSpec(
        name=NAME,
        reconciler=InstanceReconciler(deps.client, deps.cache, deps.settings, deps.recorder, deps.problems()),
        primary=for_(INSTANCES),
        watches=(
            POD_WATCH,
            SERVICE_WATCH,
            NODE_READS,
            RUNTIME_CLASS_READS,
            owns(WORKLOADS, PODS, _gone),
            mapped(CLUSTER_QUEUES, instances_of_type, _stop_policy_changed),
            mapped(INSTANCE_TYPES, instances_of_type, _deletion_signal),
            deps.settings.changes(_every_instance(deps.cache)),
        ),
        indexes=(INSTANCES_BY_TYPE, WORKLOADS_BY_POD),
        concurrency=4,
        rbac=(
            Rule.of(INSTANCES, "patch"),
            Rule.of(INSTANCES, "patch", subresource="status"),
            Rule.of(PODS, "create", "delete"),
            Rule.of(SERVICES, "create", "delete"),
            Rule.of(PERSISTENT_VOLUME_CLAIMS, "get"),
            Rule.of(SECRETS, "get"),
        ),
    )
