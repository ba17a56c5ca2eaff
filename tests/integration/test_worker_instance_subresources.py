"""The v1 Instance's `log`, `events` and `metrics` subresources through kube-apiserver with the real kubectl
(`kubectl get --raw`): discovery lists them, a running Instance's log is the sandbox's fake container log
read kube-apiserver -> worker -> kube-apiserver `pods/log` -> kwok (tail, timestamps, follow), its Events
are its Pod's and its own oldest first, an Instance without a Pod says why, the sandbox serves no
metrics.k8s.io so `metrics` says that, and a user who may read `instances/events` but not `instances/log`
is refused the log (403) by the same SubjectAccessReview as every request.

Reuses test_worker_instances' module worker (`served`) and namespace (`space`) fixtures.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from datetime import datetime

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import ROLEBINDINGS
from gpustack_operator.sandbox.cluster import Sandbox
from gpustack_operator.sandbox.kwok import append_container_log
from tests.helpers import eventually
from tests.integration.test_admission_check import LONG
from tests.integration.test_worker_instances import reaches, served, space, started, status_of
from tests.integration.worker_support import Kubectl, Served

__all__ = ["served", "space"]

V1 = "/apis/worker.gpustack.ai/v1"


def item(namespace: str, name: str, sub: str) -> str:
    return f"{V1}/namespaces/{namespace}/instances/{name}/{sub}"


async def raw(kubectl: Kubectl, path: str, *args: str) -> tuple[int, str, str]:
    return await kubectl.run("get", "--raw", path, *args)


async def test_1_discovery_lists_the_subresources(kubectl: Kubectl, served: Served) -> None:
    entries = {e["name"]: e for e in json.loads(await kubectl.ok("get", "--raw", V1))["resources"]}
    for sub in ("log", "events", "metrics"):
        assert entries[f"instances/{sub}"]["verbs"] == ["get"]
        assert entries[f"instances/{sub}"]["namespaced"] is True


async def test_2_a_running_instances_log_is_its_containers_through_kube_apiserver(
    sandbox: Sandbox, kube: Client, kubectl: Kubectl, space: str
) -> None:
    name = await started(kube, kubectl, space, resources={"accelerator": 1})
    await reaches(kube, space, name, "Running")
    marker = f"hello from {name} {uuid.uuid4().hex[:6]}"
    append_container_log(sandbox.container_log, marker)
    log = item(space, name, "log")

    async def logged() -> str | None:
        rc, out, _ = await raw(kubectl, log)
        return out if rc == 0 and marker in out else None

    whole = await eventually(logged, timeout=60, what="the marker in the Instance's log")
    assert whole.startswith("kwok: fake container started (sandbox)\n")
    assert await kubectl.ok("get", "--raw", log + "?tailLines=1") == marker + "\n"
    stamped = await kubectl.ok("get", "--raw", log + "?tailLines=1&timestamps=true")
    assert stamped.split(" ", 1)[1] == marker + "\n"
    assert stamped[:4].isdigit()  # an RFC 3339 timestamp first
    rc, _, err = await raw(kubectl, log + "?container=nope")
    assert rc != 0
    assert "nope" in err, err  # kube-apiserver's own refusal, passed on

    with kubectl.discovery() as cache:
        proc = await asyncio.create_subprocess_exec(
            *kubectl.command(cache, "get", "--raw", log + "?follow=true&tailLines=0"),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=kubectl.env,
        )
        try:
            later = f"later line {uuid.uuid4().hex[:6]}"
            assert proc.stdout is not None

            async def followed() -> bool:
                # appended again until the follow is established (a line before it is not followed)
                append_container_log(sandbox.container_log, later)
                try:
                    line = await asyncio.wait_for(proc.stdout.readline(), 2)
                except TimeoutError:
                    return False
                return line.decode() == later + "\n"

            await eventually(followed, timeout=60, what="a followed log showing a new line")
        finally:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()


async def test_3_events_are_the_pods_and_the_instances_own_oldest_first(
    kube: Client, kubectl: Kubectl, space: str
) -> None:
    name = await started(kube, kubectl, space, resources={"accelerator": 1})
    await reaches(kube, space, name, "Running")

    async def scheduled() -> JSONObj | None:
        rc, out, _ = await raw(kubectl, item(space, name, "events"))
        doc = json.loads(out) if rc == 0 else {}
        reasons = [e["reason"] for e in doc.get("items") or []]
        return doc if "Scheduled" in reasons else None

    doc = await eventually(scheduled, timeout=60, what="the Pod's Scheduled Event")
    assert (doc["kind"], doc["apiVersion"]) == ("EventList", "v1")
    items = doc["items"]
    assert {e["involvedObject"]["name"] for e in items} == {name}
    assert {e["involvedObject"]["kind"] for e in items} <= {"Pod", "Service", "Instance"}
    times = [datetime.fromisoformat(e.get("lastTimestamp") or e["eventTime"]) for e in items]
    assert times == sorted(times)

    # an Instance waiting for a Secret: no Pod, its own Warning Event, and a log request that says why
    waiting = await started(kube, kubectl, space, imagePullSecret={"name": "no-such-secret"})

    async def warned() -> list[JSONObj] | None:
        rc, out, _ = await raw(kubectl, item(space, waiting, "events"))
        found = [e for e in json.loads(out)["items"] if e["reason"] == "MissingDependency"] if rc == 0 else []
        return found or None

    (event,) = await eventually(warned, timeout=LONG, what="the Instance's MissingDependency Event")
    assert event["involvedObject"]["kind"] == "Instance"
    assert event["type"] == "Warning"
    status = await status_of(kube, space, waiting)
    for sub in ("log", "metrics"):
        rc, _, err = await raw(kubectl, item(space, waiting, sub))
        assert rc != 0
        assert f'Error from server (Conflict): Instance "{waiting}" has no Pod: it is Pending' in err, err
        assert status["phaseMessage"] in err, err


async def test_4_metrics_say_metrics_k8s_io_is_not_served_and_a_missing_instance_is_not_found(
    kube: Client, kubectl: Kubectl, space: str
) -> None:
    name = await started(kube, kubectl, space, resources={"accelerator": 1})
    await reaches(kube, space, name, "Running")
    rc, _, err = await raw(kubectl, item(space, name, "metrics"))
    assert rc != 0
    assert "Error from server (ServiceUnavailable)" in err, err
    assert "the metrics.k8s.io API is not served in this cluster" in err, err
    for sub in ("log", "events", "metrics"):
        rc, _, err = await raw(kubectl, item(space, "no-such-instance", sub))
        assert rc != 0
        assert 'instances.worker.gpustack.ai "no-such-instance" not found' in err, err


@contextlib.asynccontextmanager
async def events_reader(kube: Client, namespace: str, user: str) -> AsyncIterator[None]:
    """`user` may get Instances and their events in `namespace`, and nothing else."""
    role = {
        "metadata": {"name": user},
        "rules": [
            {
                "apiGroups": ["worker.gpustack.ai"],
                "resources": ["instances", "instances/events"],
                "verbs": ["get"],
            }
        ],
    }
    await kube.request("POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles", body=role)
    binding = {
        "metadata": {"name": user},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": user},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    await kube.create(ROLEBINDINGS, binding, namespace)
    yield


async def test_5_a_user_who_may_read_events_but_not_the_log_is_refused_the_log(
    kube: Client, kubectl: Kubectl, space: str
) -> None:
    name = await started(kube, kubectl, space, resources={"accelerator": 1})
    await reaches(kube, space, name, "Running")
    user = f"carol-{uuid.uuid4().hex[:4]}"
    async with events_reader(kube, space, user):

        async def reads_events() -> bool:
            rc, out, _ = await raw(kubectl, item(space, name, "events"), f"--as={user}")
            return rc == 0 and json.loads(out)["kind"] == "EventList"

        await eventually(reads_events, timeout=30, what=f"{user}'s Role in effect")
        for sub in ("log", "metrics"):
            rc, _, err = await raw(kubectl, item(space, name, sub), f"--as={user}")
            assert rc != 0
            assert "Error from server (Forbidden)" in err, err
            assert (
                f'User "{user}" cannot get resource "instances/{sub}" in API group "worker.gpustack.ai"'
                in err
            )
