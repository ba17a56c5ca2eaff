"""worker-gateway over two real clusters: lists, watch, aggregation, and a dead cluster that blocks nothing.

Cluster `one` is the session's sandbox; cluster `two` is a second, bare control plane (etcd and
kube-apiserver, `Sandbox(api_only=True)`) with NFD's and Kueue's CRDs applied so that its own worker
passes its prerequisites. Each runs a worker serving `worker.gpustack.ai/v1`. The gateway runs as a real
subprocess in `loopback` mode from one kubeconfig holding a context per cluster, on a unix socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import ssl
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml
from aiohttp import web

from gpustack_operator.gateway.kinds import KINDS
from gpustack_operator.kube import definitions, errors
from gpustack_operator.kube.client import Client, connect
from gpustack_operator.kube.resources import INSTANCE_TYPES, Resource
from gpustack_operator.sandbox import build, kueue
from gpustack_operator.sandbox.cluster import NFD_CRDS, Sandbox
from gpustack_operator.sandbox.process import free_port
from tests.helpers import eventually
from tests.integration.worker_support import EXECUTABLE, cpu_type, serving_worker

V1_TYPES = Resource("worker.gpustack.ai", "v1", "instancetypes", "InstanceType", namespaced=False)


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def two(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Sandbox]:
    async with Sandbox(tmp_path_factory.mktemp("two"), api_only=True, progress=print) as box:
        async with await connect(box.kubeconfig) as client:
            nfd = build.module_source("sigs.k8s.io/node-feature-discovery", build.NFD_VERSION)
            kueue_mod = build.module_source("sigs.k8s.io/kueue", build.KUEUE_VERSION)
            crds = [d for d in yaml.safe_load_all((nfd / NFD_CRDS).read_text()) if d]
            crds += kueue.crds(kueue_mod, webhook_port=9443)
            await definitions.apply_and_wait(client, crds, timeout=60)
        yield box


def two_contexts(path: Path, clusters: dict[str, Path]) -> Path:
    """One kubeconfig with a context per cluster, named after it, from each sandbox's own kubeconfig."""
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
    for name, kubeconfig in clusters.items():
        own = yaml.safe_load(kubeconfig.read_text())
        doc["clusters"].append({"name": name, "cluster": own["clusters"][0]["cluster"]})
        doc["users"].append({"name": name, "user": own["users"][0]["user"]})
        doc["contexts"].append({"name": name, "context": {"cluster": name, "user": name}})
    doc["current-context"] = next(iter(clusters))
    path.write_text(yaml.safe_dump(doc))
    return path


class Gateway:
    """The gateway subprocess and an HTTP client over its unix socket."""

    def __init__(self, proc: asyncio.subprocess.Process, socket: Path, log: Path) -> None:
        self.proc, self.socket, self.log = proc, socket, log
        self.session = aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(socket)))

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        try:
            async with self.session.request(method, f"http://gateway{path}", json=body) as resp:
                text = await resp.text()
                return resp.status, (json.loads(text) if "json" in resp.content_type else text)
        except aiohttp.ClientConnectionError:
            return 0, None

    async def get(self, path: str) -> Any:
        status, body = await self.call("GET", path)
        assert status == 200, (status, body)
        return body


@contextlib.asynccontextmanager
async def gateway(log_dir: Path, *args: str) -> AsyncIterator[Gateway]:
    sock_dir = Path(tempfile.mkdtemp(prefix="gw-"))  # a unix socket path must stay under 108 bytes
    socket, log = sock_dir / "gw.sock", log_dir / "gateway.log"
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    with log.open("wb") as sink:
        proc = await asyncio.create_subprocess_exec(
            str(EXECUTABLE), "worker-gateway", f"--unix-socket={socket}", *args,
            stdout=sink, stderr=asyncio.subprocess.STDOUT, env=env,
        )  # fmt: skip
    gw = Gateway(proc, socket, log)
    try:
        await eventually(lambda: _live(gw), timeout=30, what="the gateway answering /livez")
        yield gw
    finally:
        await gw.session.close()
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                code = await asyncio.wait_for(proc.wait(), 20)
            except TimeoutError:
                proc.kill()
                code = await proc.wait()
            print(f"\n--- gateway (exit {code}) ---\n" + "\n".join(log.read_text().splitlines()[-40:]))
        shutil.rmtree(sock_dir, ignore_errors=True)
    assert proc.returncode == 0, "the gateway did not stop cleanly on SIGTERM"


async def _live(gw: Gateway) -> bool:
    return (await gw.call("GET", "/livez"))[0] == 200


def states(answer: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["state"] for c in answer["clusters"]}


def names(answer: dict[str, Any], cluster: str) -> set[str]:
    return {i["object"]["metadata"]["name"] for i in answer["items"] if i["cluster"] == cluster}


async def _state_is(gw: Gateway, cluster: str, state: str) -> dict[str, Any] | None:
    answer: dict[str, Any] = await gw.get(f"/instancetypes?cluster={cluster}")
    return answer if states(answer)[cluster] == state else None


class Stream:
    """A watch=true answer read line by line in a task of the test's own."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def follow(self, gw: Gateway, path: str, session: aiohttp.ClientSession | None = None) -> None:
        session = session or gw.session
        async with session.get(f"http://gateway{path}", timeout=aiohttp.ClientTimeout(total=None)) as resp:
            assert resp.headers["Content-Type"].startswith("application/x-ndjson")
            async for line in resp.content:
                if line.strip():
                    self.events.append(json.loads(line))

    def seen(self, type_: str, cluster: str, name: str | None) -> bool:
        return any(
            e["type"] == type_
            and e["cluster"] == cluster
            and (e["object"] is None if name is None else e["object"]["metadata"]["name"] == name)
            for e in self.events
        )


async def test_two_clusters_listed_watched_folded_and_a_dead_one_blocks_nothing(
    sandbox: Sandbox, kube: Client, two: Sandbox, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    kube_two = await connect(two.kubeconfig)
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(kube_two.close)
        (tmp_path / "one").mkdir()
        (tmp_path / "two").mkdir()
        _, served_two = await asyncio.gather(
            stack.enter_async_context(serving_worker(sandbox, kube, tmp_path / "one", "gw-one")),
            stack.enter_async_context(serving_worker(two, kube_two, tmp_path / "two", "gw-two")),
        )
        print(f"both workers ready in {time.monotonic() - t0:.1f}s")
        # The same hardware on both clusters. The sandbox's InstanceType defaulting fills `manufacturer:
        # generic` from its CPU pool's flavors once the worker has made them (the bare cluster has none, and a
        # type made a moment earlier stays unfilled): say it up front so all three store the same spec.
        for client, name in ((kube, "gw-shared"), (kube, "gw-only-one"), (kube_two, "gw-shared")):
            manifest = cpu_type(name)
            manifest["spec"]["manufacturer"] = "generic"
            await client.create(V1_TYPES, manifest)
        stack.push_async_callback(kube.delete, V1_TYPES, "gw-shared")
        stack.push_async_callback(kube.delete, V1_TYPES, "gw-only-one")

        kubeconfig = two_contexts(tmp_path / "kubeconfig", {"one": sandbox.kubeconfig, "two": two.kubeconfig})
        gw = await stack.enter_async_context(
            gateway(tmp_path, "--worker-conn-mode=loopback", f"--kubeconfig={kubeconfig}")
        )

        # bad input is a 400 that says why
        status, body = await gw.call("POST", "/workers")
        assert status == 400, body
        assert "cluster is required" in body["message"]
        status, body = await gw.call("POST", "/workers?cluster=one&color=red")
        assert status == 400, body
        assert "unknown query parameter(s): color" in body["message"]

        # subscribe by query and by body; a cluster not subscribed is reported as such
        assert (await gw.call("POST", "/workers?cluster=one"))[0] == 200
        assert (await gw.call("POST", "/workers", {"clusters": ["two"]}))[0] == 200
        before = await gw.get("/instancetypes?cluster=one&cluster=two&cluster=three")
        assert states(before)["three"] == "NotSubscribed", before

        async def both_synced() -> dict[str, Any] | None:
            answer = await gw.get("/instancetypes?cluster=one&cluster=two")
            return answer if set(states(answer).values()) == {"Synced"} else None

        listed = await eventually(both_synced, timeout=60, what="both clusters synced in the gateway")
        print(f"both clusters synced in the gateway at {time.monotonic() - t0:.1f}s")
        assert {"gw-shared", "gw-only-one"} <= names(listed, "one")
        assert names(listed, "two") == {"gw-shared"}
        # the worker serves every kind the gateway follows (the Instance companions included)
        assert {c["name"]: c["kinds"] for c in listed["clusters"]}["two"] == sorted(KINDS)
        every = await gw.get("/instancetypes")  # no cluster named: every subscribed one
        assert names(every, "two") == {"gw-shared"}
        instances = await gw.get("/instances?cluster=two")
        assert (instances["kind"], states(instances), instances["items"]) == (
            "InstanceList",
            {"two": "Synced"},
            [],
        )

        # aggregated: the same hardware in both clusters is one AggregatedInstanceType listing both
        folded = await gw.get("/instancetypes?aggregated=true")
        assert folded["kind"] == "AggregatedInstanceTypeList"
        shared = [
            {(m["cluster"], m["name"]) for m in item["status"]["members"]}
            for item in folded["items"]
            if ("two", "gw-shared") in {(m["cluster"], m["name"]) for m in item["status"]["members"]}
        ]
        assert shared == [{("one", "gw-shared"), ("one", "gw-only-one"), ("two", "gw-shared")}], folded

        # watch: what is cached first, then each change, tagged with its cluster
        stream = Stream()
        follower = asyncio.ensure_future(
            stream.follow(gw, "/instancetypes?cluster=one&cluster=two&watch=true")
        )
        try:
            await eventually(
                lambda: stream.seen("ADDED", "two", "gw-shared"), timeout=10, what="initial ADDED"
            )
            assert stream.seen("ADDED", "one", "gw-only-one")
            assert [e["type"] for e in stream.events[:2]] == ["STATUS", "STATUS"]
            await kube_two.create(V1_TYPES, cpu_type("gw-new"))
            await eventually(
                lambda: stream.seen("ADDED", "two", "gw-new"), timeout=20, what="a new one in two"
            )
            await kube_two.delete(V1_TYPES, "gw-new")
            await eventually(lambda: stream.seen("DELETED", "two", "gw-new"), timeout=20, what="its deletion")
            added = [
                e
                for e in stream.events
                if e["type"] == "ADDED" and e["object"]["metadata"]["name"] == "gw-new"
            ]
            assert len(added) == 1, "an object was told twice"

            await _thousand_changes_in_order(gw, stream, kube, kube_two)
            await _many_watchers_bounded(gw, kube_two)

            # cluster two's apiserver restarts: the gateway resumes from where it was, nothing told twice
            await two.restart("kube-apiserver")

            async def created_after_restart() -> bool:
                try:
                    await kube_two.create(V1_TYPES, cpu_type("gw-after-restart"))
                except errors.KubeError:
                    return False
                return True

            await eventually(created_after_restart, timeout=60, what="cluster two serving v1 again")
            await eventually(
                lambda: stream.seen("ADDED", "two", "gw-after-restart"),
                timeout=30,
                what="two streaming again",
            )
            told = [
                (e["type"], e["object"]["metadata"]["resourceVersion"])
                for e in stream.events
                if e["cluster"] == "two"
                and e["type"] != "STATUS"
                and e["object"]["metadata"]["name"] == "gw-shared"
            ]
            # its status may really change (MODIFIED), but no version is told twice and it is added once
            assert len({version for _, version in told}) == len(told), f"gw-shared of two told twice: {told}"
            assert [kind for kind, _ in told].count("ADDED") == 1, told

            back = await eventually(
                lambda: _state_is(gw, "two", "Synced"), timeout=30, what="two Synced again after the restart"
            )
            assert names(back, "two") == {"gw-shared", "gw-after-restart"}

            # cluster two's worker dies: two is Unavailable, one keeps answering and streaming
            served_two.worker.proc.kill()
            await served_two.worker.proc.wait()
            t_kill = time.monotonic()

            async def two_down() -> dict[str, Any] | None:
                answer = await gw.get("/instancetypes?cluster=one&cluster=two")
                return answer if states(answer)["two"] == "Unavailable" else None

            down = await eventually(two_down, timeout=60, what="cluster two reported Unavailable")
            print(f"two Unavailable {time.monotonic() - t_kill:.1f}s after its worker died")
            assert states(down)["one"] == "Synced"
            assert "gw-only-one" in names(down, "one")
            assert names(down, "two") == set(), "a dead cluster's cache was served as current"
            assert stream.seen("STATUS", "two", None) or any(
                e["type"] == "STATUS" and e["object"]["state"] == "Unavailable" for e in stream.events
            )
            await kube.create(V1_TYPES, cpu_type("gw-while-two-down"))
            stack.push_async_callback(kube.delete, V1_TYPES, "gw-while-two-down")
            await eventually(
                lambda: stream.seen("ADDED", "one", "gw-while-two-down"),
                timeout=20,
                what="one still streaming",
            )

            # unsubscribing tells watchers to drop all of the cluster (DELETED, null object)
            status, body = await gw.call("DELETE", "/workers?cluster=two")
            assert (status, body) == (200, {"removed": ["two"]})
            await eventually(lambda: stream.seen("DELETED", "two", None), timeout=10, what="drop-all of two")
            assert states(await gw.get("/instancetypes?cluster=two"))["two"] == "NotSubscribed"
            metrics = (await gw.call("GET", "/metrics"))[1]
            assert "gpustack_worker_gateway_watchers 1.0" in metrics
            ready_status, ready = await gw.call("GET", "/readyz?verbose")
            assert ready_status == 200, ready
        finally:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower
    print(f"test done in {time.monotonic() - t0:.1f}s")


CHANGES = 500
"""Label changes per cluster in the ordering check (1,000 in all)."""
SEQ = "test.gpustack.ai/seq"
WATCHERS = 200
WATCHERS_RSS_BOUND_MB = 60
"""What 200 idle watch streams may add to the gateway's resident memory (measured: see the printout)."""


async def _thousand_changes_in_order(gw: Gateway, stream: Stream, kube: Client, kube_two: Client) -> None:
    """1,000 changes (a label counted up on `gw-shared` in each cluster, both clusters at once) reach the
    streaming client, each object's in the order they were made, none lost."""
    t0 = time.monotonic()

    async def count_up(client: Client) -> None:
        for seq in range(1, CHANGES + 1):
            await client.patch(INSTANCE_TYPES, "gw-shared", {"metadata": {"labels": {SEQ: str(seq)}}})

    await asyncio.gather(count_up(kube), count_up(kube_two))

    def told(cluster: str) -> list[int]:
        values = [
            int(e["object"]["metadata"].get("labels", {}).get(SEQ, 0))
            for e in stream.events
            if e["cluster"] == cluster
            and e["type"] in ("ADDED", "MODIFIED")
            and e["object"]["metadata"]["name"] == "gw-shared"
        ]
        return [v for i, v in enumerate(values) if v and (i == 0 or values[i - 1] != v)]

    def all_told() -> bool:
        return told("one")[-1:] == [CHANGES] and told("two")[-1:] == [CHANGES]

    await eventually(all_told, timeout=60, what=f"the {CHANGES}th change of gw-shared from both clusters")
    print(f"{2 * CHANGES} changes made and streamed in {time.monotonic() - t0:.1f}s")
    for cluster in ("one", "two"):
        assert told(cluster) == list(range(1, CHANGES + 1)), f"{cluster}: out of order or lost"


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def _many_watchers_bounded(gw: Gateway, kube_two: Client) -> None:
    """200 concurrent watch clients all get a change; the memory they cost is reported and bounded;
    clients that go away mid-stream leave no watcher behind."""
    before = _rss_mb(gw.proc.pid)
    streams = [Stream() for _ in range(WATCHERS)]
    session = aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(gw.socket), limit=0))
    path = "/instancetypes?cluster=two&watch=true"
    followers = [asyncio.ensure_future(s.follow(gw, path, session)) for s in streams]
    try:
        await eventually(
            lambda: all(s.seen("ADDED", "two", "gw-shared") for s in streams),
            timeout=60,
            what=f"{WATCHERS} watchers started",
        )
        await kube_two.patch(INSTANCE_TYPES, "gw-shared", {"metadata": {"labels": {SEQ: "last"}}})

        def last(event: dict[str, Any]) -> bool:
            if event["type"] not in ("ADDED", "MODIFIED"):
                return False
            return bool(event["object"]["metadata"].get("labels", {}).get(SEQ) == "last")

        def everyone_told() -> bool:
            return all(any(last(e) for e in s.events) for s in streams)

        await eventually(everyone_told, timeout=60, what=f"the change told to all {WATCHERS} watchers")
        during = _rss_mb(gw.proc.pid)
        print(f"gateway RSS {before:.1f} MB, with {WATCHERS} more watchers {during:.1f} MB")
        assert during - before < WATCHERS_RSS_BOUND_MB, (before, during)
    finally:
        for follower in followers:
            follower.cancel()
        await asyncio.gather(*followers, return_exceptions=True)
        await session.close()

    async def only_the_first_left() -> bool:
        metrics = (await gw.call("GET", "/metrics"))[1]
        return "gpustack_worker_gateway_watchers 1.0" in metrics

    await eventually(only_the_first_left, timeout=30, what="the departed watchers let go")


@contextlib.asynccontextmanager
async def gpustack_proxy(upstreams: dict[str, Sandbox]) -> AsyncIterator[tuple[int, list[str]]]:
    """A stand-in for the GPUStack server's `/v2/clusters/<c>/proxy/...`: forwards each request (watches
    streamed) to cluster <c>'s kube-apiserver as its admin; yields its port and the Authorization
    headers it was sent."""
    seen: list[str] = []
    sessions: dict[str, tuple[aiohttp.ClientSession, int]] = {}
    for name, box in upstreams.items():
        ctx = ssl.create_default_context(cafile=str(box.certs.ca_crt))
        ctx.load_cert_chain(str(box.certs.admin_crt), str(box.certs.admin_key))
        assert box.state is not None
        connector = aiohttp.TCPConnector(ssl=ctx)
        sessions[name] = (aiohttp.ClientSession(connector=connector), box.state.ports["apiserver"])

    async def forward(request: web.Request) -> web.StreamResponse:
        seen.append(request.headers.get("Authorization", ""))
        if request.match_info["cluster"] not in sessions:
            return web.json_response({"message": "no such cluster"}, status=404)
        session, port = sessions[request.match_info["cluster"]]
        url = f"https://127.0.0.1:{port}/{request.match_info['rest']}"
        headers = {k: v for k, v in request.headers.items() if k in ("Content-Type", "Accept")}
        body = await request.read()
        timeout = aiohttp.ClientTimeout(total=None)
        async with session.request(
            request.method, url, params=request.query, data=body or None, headers=headers, timeout=timeout
        ) as upstream:
            resp = web.StreamResponse(
                status=upstream.status,
                headers={"Content-Type": upstream.headers.get("Content-Type", "application/json")},
            )
            await resp.prepare(request)
            async for chunk in upstream.content.iter_any():
                await resp.write(chunk)
            return resp

    app = web.Application()
    app.router.add_route("*", "/v2/clusters/{cluster}/proxy/{rest:.*}", forward)
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield port, seen
    finally:
        await runner.cleanup()
        for session, _ in sessions.values():
            await session.close()


async def test_gpustack_api_mode_goes_through_the_servers_proxy_with_the_token_and_streams_a_websocket(
    sandbox: Sandbox, kube: Client, tmp_path: Path
) -> None:
    async with (
        serving_worker(sandbox, kube, tmp_path, "gw-proxied"),
        gpustack_proxy({"one": sandbox}) as (port, seen),
        gateway(tmp_path, f"--worker-conn-gpustack-api-port={port}") as gw,
    ):
        status, body = await gw.call("POST", "/workers", {"clusters": ["one"], "token": "s3cret"})
        assert status == 200, body

        async def synced() -> dict[str, Any] | None:
            answer = await gw.get("/instancetypes?cluster=one")
            return answer if states(answer) == {"one": "Synced"} else None

        listed = await eventually(synced, timeout=60, what="cluster one synced through the proxy")
        assert names(listed, "one"), "the controllers' InstanceTypes were not listed"
        assert seen, "nothing went through the proxy"
        assert set(seen) == {"Bearer s3cret"}, set(seen)

        async with gw.session.ws_connect("http://gateway/instancetypes?cluster=one&watch=true") as ws:
            first = json.loads((await ws.receive(timeout=10)).data)
            assert (first["type"], first["cluster"], first["object"]["state"]) == ("STATUS", "one", "Synced")
            await kube.create(V1_TYPES, cpu_type("gw-proxied"))
            try:
                while True:
                    event = json.loads((await ws.receive(timeout=20)).data)
                    if event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "gw-proxied":
                        break
            finally:
                await kube.delete(V1_TYPES, "gw-proxied")
                # gone while its worker still runs, so its queue goes with it (a later module sees none)
                await eventually(
                    lambda: _gone(kube, "gw-proxied"), timeout=120, what="InstanceType gw-proxied gone"
                )
            assert event["cluster"] == "one"


async def _gone(kube: Client, name: str) -> bool:
    return await kube.get_or_none(V1_TYPES, name) is None
