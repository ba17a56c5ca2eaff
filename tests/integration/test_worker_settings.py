"""Settings through kubectl: `settings.gpustack.ai/v1`, served by the worker from its settings Secret.

A real worker registers `v1.gpustack.ai`; kubectl lists, reads, patches and explains Settings through
kube-apiserver, and a bad value or a setting that does not exist is refused as kube refuses built-in kinds.

Named `test_worker_*` to run with the other tests that start a real worker, after the chain tests.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.sandbox.cluster import Sandbox
from gpustack_operator.settings.secret import SECRET_NAME
from tests.helpers import eventually
from tests.integration.worker_support import Kubectl, Served, serving_worker

OVERCOMMIT = "instance-general-resources-overcommit"


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def served(
    sandbox: Sandbox, kube: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Served]:
    async with serving_worker(sandbox, kube, tmp_path_factory.mktemp("settings"), "settings-0") as served:
        yield served


async def stored(kube: Client, namespace: str, name: str) -> str:
    data = (await kube.get(resources.SECRETS, SECRET_NAME, namespace)).get("data") or {}
    return base64.b64decode(data[name]).decode()


async def test_settings_are_listed_with_their_values_and_explained(kubectl: Kubectl, served: Served) -> None:
    out = await kubectl.ok("get", "settings", "-n", served.namespace)
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "VALUE", "EDITABLE"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    assert rows[OVERCOMMIT] == ["true", "true"]
    assert "instance-type-aware-cpu-manufacturer" in rows
    wide = await kubectl.ok("get", "set", OVERCOMMIT, "-n", served.namespace, "-o", "wide")
    assert "overcommit instance general resources" in wide

    async def explained() -> str | None:  # kube-apiserver aggregates our OpenAPI v3 a while after Available
        rc, out, _ = await kubectl.run("explain", "settings")
        return out if rc == 0 else None

    assert "GROUP:      gpustack.ai" in await eventually(explained, timeout=90, what="our OpenAPI aggregated")
    assert "value" in await kubectl.ok("explain", "settings.spec")


async def test_a_setting_is_written_by_a_merge_patch_and_read_back(
    kube: Client, kubectl: Kubectl, served: Served
) -> None:
    ns = served.namespace
    name = "instance-type-aware-cpu-manufacturer"
    await kubectl.ok("patch", "setting", name, "-n", ns, "--type=merge", "-p", '{"spec":{"value":"true"}}')
    assert await stored(kube, ns, name) == "true"
    value = await kubectl.ok("get", "setting", name, "-n", ns, "-o", "jsonpath={.status.value}")
    assert value == "true"
    await kubectl.ok(
        "patch",
        "setting",
        name,
        "-n",
        ns,
        "--type=merge",
        "-p",
        '{"spec":{"value":"false"}}',
        "--dry-run=server",
    )
    assert await stored(kube, ns, name) == "true"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        pytest.param(
            ("patch", "setting", OVERCOMMIT, "--type=merge", "-p", '{"spec":{"value":"ture"}}'),
            f'The Setting "{OVERCOMMIT}" is invalid: spec.value: Invalid value: "ture"',
            id="not-a-boolean",
        ),
        pytest.param(
            (
                "patch",
                "setting",
                "container-registry",
                "--type=merge",
                "-p",
                '{"spec":{"value":"bad registry!"}}',
            ),
            "spec.value: Invalid value",
            id="not-a-registry",
        ),
        pytest.param(
            ("get", "setting", "no-such-setting"),
            'settings.gpustack.ai "no-such-setting" not found',
            id="unknown",
        ),
        pytest.param(
            ("patch", "setting", OVERCOMMIT, "-p", '{"spec":{"value":"false"}}'),
            "strategic-merge-patch+json is not supported",
            id="strategic-patch",
        ),
    ],
)
async def test_a_bad_setting_write_is_refused_naming_the_field_and_changes_nothing(
    kube: Client, kubectl: Kubectl, served: Served, args: tuple[str, ...], says: str
) -> None:
    before = await stored(kube, served.namespace, OVERCOMMIT)
    rc, _, err = await kubectl.run(*args, "-n", served.namespace)
    assert rc != 0
    assert says in err
    assert await stored(kube, served.namespace, OVERCOMMIT) == before
