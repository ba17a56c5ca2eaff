"""docs/walkthrough.md, run: every `$ kubectl ...` in it against the sandbox, its output compared.

To regenerate the expected outputs after a deliberate change, run this module with WALKTHROUGH_UPDATE=1:

    WALKTHROUGH_UPDATE=1 pytest tests/integration/test_walkthrough.py

it rewrites each command's output in docs/walkthrough.md in place (review the diff before committing). A
retried command whose output has changed is waited for its whole retry time before its new output is taken;
WALKTHROUGH_UPDATE_WAIT=<seconds> shortens that wait (for a first draft of new commands).

The document's format, read by `steps` below:

- a fenced ```console block holds commands, each a line `$ kubectl ...` followed by the output expected from
  it (stdout, then stderr), up to the next `$ ` line or the end of the block. A command line ending in
  `<<EOF` takes the lines up to `EOF` as its standard input, as the shell would. Nothing but kubectl is run,
  with the sandbox's kubeconfig; other fences (```sh, ```yaml) are prose and are not run.
- `<!-- walkthrough: retry N -->` on the line before a block: each of its commands is run again until its
  output matches, for up to N seconds (the chain converges asynchronously), through tests.helpers.eventually.

Both sides are normalised before comparing: the AGE column (the last one, where a table's header ends in
AGE), RFC 3339 timestamps, `uid`s, `resourceVersion`s, `generation`s, the random suffix of Kueue's Pod
workload names, runs of spaces (column widths follow the widest cell), trailing blanks. A mismatch fails
with the command and a unified diff.

The walkthrough runs in the session's shared sandbox with one worker in `gpustack-system` (the system
namespace of `make run`, which the document names), started on default settings; whatever the document
changes (a node removed, a namespace, InstanceTypes, a setting) is put back at the end even when a step
fails, so later modules find the sandbox as it was.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import difflib
import os
import re
import shlex
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client
from gpustack_operator.sandbox import inventory, nfdworker
from gpustack_operator.sandbox.cluster import Sandbox
from gpustack_operator.sandbox.process import free_port
from gpustack_operator.settings.secret import SECRET_NAME
from tests.helpers import eventually
from tests.integration.worker_support import APISERVICE, Kubectl, ready, worker_pool

DOC = Path(__file__).resolve().parents[2] / "docs" / "walkthrough.md"
UPDATE = os.environ.get("WALKTHROUGH_UPDATE") == "1"
UPDATE_WAIT = float(os.environ.get("WALKTHROUGH_UPDATE_WAIT") or "inf")
SYSTEM_NAMESPACE = "gpustack-system"
DEMO_NAMESPACE = "demo"
REMOVED_NODE = "cpu-1"
DERIVED_TYPES = {
    "gpustack--ascend-910b2-linux-arm64",
    "gpustack--generic-linux-amd64",
    "gpustack--generic-linux-arm64",
    "gpustack--nvidia-a10-linux-amd64",
    "gpustack--nvidia-h100-80gb-hbm3-linux-amd64",
}
"""The InstanceTypes the worker derives from the sandbox's inventory on default settings."""
SETTLE = 3.0
"""Seconds the derived types must stay in service before the walk starts."""

RETRY = re.compile(r"<!--\s*walkthrough:\s*retry\s+(\d+)\s*-->")


# ---- the document --------------------------------------------------------------------------------------


@dataclass
class Step:
    """One `$ kubectl ...` of a console block, and where its expected output lies in the document."""

    line: int
    """The command's line number (1-based), for messages."""
    argv: list[str]
    stdin: str | None
    expected: str
    start: int
    end: int
    """Line indexes [start, end) of the expected output in the document's lines."""
    retry: float
    """Seconds to retry until the output matches (0: run once)."""


def steps(lines: list[str]) -> list[Step]:
    found: list[Step] = []
    retry = 0.0
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = RETRY.fullmatch(line.strip())
        if marker:
            retry = float(marker.group(1))
        elif line.strip() == "```console":
            i = _block(lines, i + 1, retry, found)
            retry = 0.0
        elif line.strip():
            retry = 0.0
        i += 1
    return found


def _block(lines: list[str], i: int, retry: float, found: list[Step]) -> int:
    """Read one console block from line i; return the index of its closing fence."""
    while i < len(lines) and lines[i].strip() != "```":
        line = lines[i]
        assert line.startswith("$ kubectl "), f"{DOC}:{i + 1}: expected a `$ kubectl ...` line, got {line!r}"
        command, stdin, at = line[2:], None, i
        i += 1
        if command.rstrip().endswith("<<EOF"):
            command = command.rstrip()[: -len("<<EOF")]
            body: list[str] = []
            while lines[i] != "EOF":
                body.append(lines[i])
                i += 1
            stdin, i = "\n".join(body) + "\n", i + 1
        start = i
        while i < len(lines) and not lines[i].startswith("$ ") and lines[i].strip() != "```":
            i += 1
        argv = shlex.split(command)[1:]
        found.append(Step(at + 1, argv, stdin, "\n".join(lines[start:i]), start, i, retry))
    return i


# ---- normalising ------------------------------------------------------------------------------------------

AGE = re.compile(r"^(?:\d+[smhdy])+$|^<unknown>$|^<invalid>$")
SUBSTITUTIONS = (
    (re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z"), "<time>"),
    (
        re.compile(r"(\buid\"?:\s*\"?)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
        r"\1<uid>",
    ),
    (re.compile(r"(\bresourceVersion\"?:\s*)\"?\d+\"?"), r"\1<rv>"),
    (re.compile(r"(\bgeneration\"?:\s*)\d+"), r"\1<n>"),
    (re.compile(r"\b(pod-[a-z0-9.-]+)-[0-9a-f]{5}\b"), r"\1-<hash>"),
)


def normalise(text: str) -> str:
    out: list[str] = []
    header: list[str] = []
    for line in text.strip("\n").splitlines():
        cells = line.split()
        if cells and cells[0] in ("NAME", "NAMESPACE"):
            header = cells
        elif "AGE" in header and cells:
            # AGE last (after headers of two words, too), or where it stands in a table of one-word headers
            at = -1 if header[-1] == "AGE" else header.index("AGE") if len(cells) == len(header) else None
            if at is not None and AGE.match(cells[at]):
                cells[at] = "<age>"
                line = "  ".join(cells)
        for pattern, replacement in SUBSTITUTIONS:
            line = pattern.sub(replacement, line)
        indent = len(line) - len(line.lstrip(" "))
        out.append(line[:indent] + re.sub(r" {2,}", "  ", line[indent:]).rstrip())
    return "\n".join(out)


def mismatch(step: Step, actual: str) -> str:
    diff = difflib.unified_diff(
        step.expected.splitlines(),
        actual.rstrip("\n").splitlines(),
        "docs/walkthrough.md",
        "kubectl",
        lineterm="",
    )
    return (
        f"docs/walkthrough.md:{step.line}: `kubectl {shlex.join(step.argv)}` printed something else "
        f"(WALKTHROUGH_UPDATE=1 rewrites the document):\n" + "\n".join(diff)
    )


# ---- the sandbox, as the document expects it and as it is left ------------------------------------------


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def walker(
    sandbox: Sandbox, kube: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Kubectl]:
    """`make run`'s worker (system namespace gpustack-system, default settings, aggregated API and webhooks),
    ready, and a kubectl whose discovery cache lives as long as the module (the APIService is Available
    before its first run). At the end, whatever the walkthrough changed is put back."""
    log_dir = tmp_path_factory.mktemp("walkthrough")
    await _default_settings(kube)
    async with worker_pool(sandbox, kube, log_dir) as pool:
        port = free_port()
        worker = await pool.start(
            "walk-0",
            f"--secure-port={port}",
            f"--cert-dir={log_dir / 'tls'}",
            env={"KUBERNETES_POD_NAMESPACE": SYSTEM_NAMESPACE},
        )
        try:
            await eventually(lambda: ready(worker), timeout=180, what="worker ready (APIService Available)")
            await _derived_types_only(kube)
            yield Kubectl(sandbox, cache_dir=log_dir / "kubectl-cache")
        finally:
            with contextlib.suppress(errors.KubeError):
                await _put_back(kube)
            await kube.delete(resources.APISERVICES, APISERVICE)
    await _default_settings(kube)


async def _default_settings(kube: Client) -> None:
    """No settings Secret: the worker writes one with every default (an earlier module may have left one)."""
    await kube.delete(resources.SECRETS, SECRET_NAME, SYSTEM_NAMESPACE)


async def _derived_types_only(kube: Client) -> None:
    """Only the inventory's derived InstanceTypes, each Active: an earlier module may have left a type of
    its own, or one its teardown marked inactive (a pool that lost its nodes stays so until an admin says).
    A worker that starts while a pool's ResourceFlavors are gone drains that pool's queue before it derives
    them again and so marks the type inactive too (contract §6), which can happen after it is ready: the
    admin's `inactive: null` is repeated until every type has stayed Active."""
    for it in await kube.list(resources.INSTANCE_TYPES):
        if it["metadata"]["name"] not in DERIVED_TYPES:
            await kube.delete(resources.INSTANCE_TYPES, it["metadata"]["name"])

    async def only_derived() -> bool:
        return {it["metadata"]["name"] for it in await kube.list(resources.INSTANCE_TYPES)} <= DERIVED_TYPES

    await eventually(only_derived, timeout=120, what="only the derived InstanceTypes")
    # a queue whose type an earlier module deleted while no worker ran is left to an admin: this one
    for queue in await kube.list(resources.CLUSTER_QUEUES):
        if queue["metadata"]["name"] not in DERIVED_TYPES:
            await kube.delete(resources.CLUSTER_QUEUES, queue["metadata"]["name"])

    async def only_derived_queues() -> bool:
        return {q["metadata"]["name"] for q in await kube.list(resources.CLUSTER_QUEUES)} <= DERIVED_TYPES

    await eventually(only_derived_queues, timeout=120, what="only the derived ClusterQueues")

    async def in_service() -> bool:  # twice, SETTLE seconds apart: a drain still on its way shows
        await _all_active(kube)
        await asyncio.sleep(SETTLE)
        return await _all_active(kube)

    await eventually(in_service, timeout=120, what="every derived InstanceType Active, its queue filled")


async def _all_active(kube: Client) -> bool:
    """Every derived InstanceType Active and its queue admitting from live flavors; a type marked
    inactive is put back in service on the way."""
    types = {it["metadata"]["name"]: it for it in await kube.list(resources.INSTANCE_TYPES)}
    for name, it in types.items():
        if name in DERIVED_TYPES and (it.get("spec") or {}).get("inactive") is not None:
            await kube.patch(resources.INSTANCE_TYPES, name, {"spec": {"inactive": None}})
    assert set(types) >= DERIVED_TYPES, f"missing: {sorted(DERIVED_TYPES - set(types))}"
    phases = {name: (types[name].get("status") or {}).get("phase") for name in DERIVED_TYPES}
    assert all(phase == "Active" for phase in phases.values()), phases
    flavors = {f["metadata"]["name"] for f in await kube.list(resources.RESOURCE_FLAVORS)}
    for queue in await kube.list(resources.CLUSTER_QUEUES):
        spec = queue.get("spec") or {}
        named = {f["name"] for group in spec.get("resourceGroups") or [] for f in group["flavors"]}
        assert spec.get("stopPolicy") == "None", (queue["metadata"]["name"], spec.get("stopPolicy"))
        assert named, (queue["metadata"]["name"], "no flavors")
        assert named <= flavors, (queue["metadata"]["name"], sorted(named - flavors))
    return True


async def _put_back(kube: Client) -> None:
    """Undo what the walkthrough does, whether or not it got to its own clean-up."""
    await kube.delete(resources.NAMESPACES, DEMO_NAMESPACE)
    secret = await kube.get_or_none(resources.SECRETS, SECRET_NAME, SYSTEM_NAMESPACE)
    if secret is not None:
        off = base64.b64encode(b"false").decode()
        await kube.patch(
            resources.SECRETS,
            SECRET_NAME,
            {"data": {"instance-type-aware-cpu-manufacturer": off}},
            namespace=SYSTEM_NAMESPACE,
        )
    if await kube.get_or_none(resources.NODES, REMOVED_NODE) is None:
        await _recreate_node(kube, REMOVED_NODE)
    await _derived_types_only(kube)


async def _recreate_node(kube: Client, name: str) -> None:
    """The inventory's Node, and the NodeFeature the sandbox's nfd-worker stand-in writes for it once the
    old one (owned by the deleted Node) is gone."""
    (node,) = (n for n in inventory.load(inventory.DEFAULT_INVENTORY) if n.name == name)

    async def old_features_gone() -> bool:
        old = await kube.get_or_none(resources.NODE_FEATURES, name, nfdworker.NAMESPACE)
        return old is None or not (old["metadata"].get("ownerReferences") or [])

    await eventually(old_features_gone, timeout=60, what=f"{name}'s NodeFeature collected with its Node")
    await kube.create(resources.NODES, inventory.node_manifest(node))
    await nfdworker.publish(kube, [node])


# ---- the walk ------------------------------------------------------------------------------------------


async def run(kubectl: Kubectl, step: Step) -> str:
    _, out, err = await kubectl.run(*step.argv, stdin=step.stdin)
    return out + err


async def test_every_command_of_the_walkthrough_prints_what_the_document_shows(walker: Kubectl) -> None:
    lines = DOC.read_text().splitlines()
    walk = steps(lines)
    assert walk, f"{DOC} holds no `$ kubectl` commands"
    updated: dict[int, tuple[int, str]] = {}
    for step in walk:
        last = ""

        async def matches(step: Step = step) -> bool:
            nonlocal last
            last = await run(walker, step)
            return normalise(last) == normalise(step.expected)

        if step.retry:
            with contextlib.suppress(AssertionError):
                wait = min(step.retry, UPDATE_WAIT) if UPDATE else step.retry
                await eventually(matches, timeout=wait, interval=0.5, what=f"line {step.line}")
        else:
            await matches()
        if normalise(last) != normalise(step.expected):
            if not UPDATE:
                pytest.fail(mismatch(step, last), pytrace=False)
            updated[step.start] = (step.end, last.rstrip("\n"))
    if UPDATE and updated:
        for start in sorted(updated, reverse=True):
            end, text = updated[start]
            lines[start:end] = text.splitlines()
        DOC.write_text("\n".join(lines) + "\n")
    assert not updated or UPDATE
