"""Watch fan-out benchmark: the worker's CPU per event it writes to a cached v1 watch, against a bare loop.

Run: `.venv/bin/python -m tests.bench.bench_watchfanout` (no sandbox; about half a minute).

Why: in bench_apiserver the v1 WATCH fan-out goes through kube-apiserver twice, and on a shared 2-core
machine its medians move by 2x from run to run, too much to see what the worker's own code costs. Here
the code under test is the worker's own: the real v1 InstanceType proxy (`instancetypes.proxy`, so
CRDProxy's watch handler and registry/generic/watchcache.py) over the real informer, fed by the scripted API
server of the unit tests (tests/unit/kube/fakes.py), served by aiohttp over TLS on 127.0.0.1 to
`--watchers` client connections in a child process. The baseline, in the same process and run: the least
an aiohttp handler can do for the same clients, one shared wake-up per event and one write of an already
encoded line per connection. Both paths are fed `--events` changes, `--gap` seconds apart, so each is one
fan-out.

Measured: this process's CPU time (user + system) from the first change to the last line read by every
client, per event written to one connection; the ratio of the cached path over the baseline. The child's
reading is not counted. Nothing about time is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web
from tests.unit.apiserver.registry.generic.test_watchcache import cached, it
from tests.unit.kube.fakes import event

from gpustack_operator.api.json import JSONObj
from gpustack_operator.apiserver.registry import instancetypes
from gpustack_operator.certs import pki

V1 = "/apis/worker.gpustack.ai/v1/instancetypes"


def changed(rv: int) -> JSONObj:
    """An InstanceType about the size of a real one with its managedFields (about 2 KB of JSON)."""
    obj = it("bench", rv, bench=str(rv))
    obj["metadata"]["managedFields"] = [
        {
            "manager": f"manager-{i}",
            "operation": "Update",
            "fieldsV1": {"f:spec": {f"f:field{j}": {} for j in range(8)}},
        }
        for i in range(4)
    ]
    obj["spec"] |= {"unitResources": {"cpu": "4", "ram": "16Gi"}, "description": "x" * 200}
    return obj


class Bare:
    """The baseline: each connection waits on its own future, which the next event resolves with the
    already-encoded line, and writes it."""

    def __init__(self) -> None:
        self.waiters: set[asyncio.Future[bytes]] = set()

    def send(self, obj: JSONObj) -> None:
        line = json.dumps({"type": "MODIFIED", "object": obj}, separators=(",", ":")).encode() + b"\n"
        waiters, self.waiters = self.waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(line)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        await resp.write(b"")
        loop = asyncio.get_running_loop()
        try:
            while True:
                waiter = loop.create_future()
                self.waiters.add(waiter)
                await resp.write(await waiter)
        except ConnectionResetError:  # the client read its events and left
            return resp


def tls(directory: Path) -> ssl.SSLContext:
    ca = pki.new_ca("bench-watchfanout-ca")
    crt, key = pki.issue(ca, "127.0.0.1", hosts=["127.0.0.1"], server=True).write(directory, "serving")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(crt, key)
    return ctx


async def measure(
    label: str,
    port: int,
    path: str,
    watchers: int,
    events: int,
    gap: float,
    feed: Callable[[int], Awaitable[None]],
) -> float:
    """CPU seconds of this process per event written, for one path; prints it."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.bench.bench_watchfanout",
        "--client",
        str(port),
        path,
        str(watchers),
        str(events),
        stdout=asyncio.subprocess.PIPE,
    )
    assert child.stdout is not None
    await asyncio.wait_for(child.stdout.readline(), 60)  # "open": every watch has its headers
    await asyncio.sleep(0.3)
    start = time.process_time()
    for i in range(events):
        await feed(i)
        await asyncio.sleep(gap)
    await asyncio.wait_for(child.wait(), 120)
    per_write = (time.process_time() - start) / (watchers * events)
    if child.returncode != 0:
        raise RuntimeError(f"{label}: the client failed ({child.returncode})")
    print(f"  {label:<26} {per_write * 1e6:7.1f} us per event written", flush=True)
    return per_write


Feed = Callable[[int], Awaitable[None]]
"""Sends change number i to the path under test."""


async def against_bare(
    args: argparse.Namespace, app: web.Application, label: str, path: Callable[[], str], feed: Feed
) -> None:
    """Serve `app` and the bare baseline (`/bare`) over TLS on 127.0.0.1, measure both paths `args.rounds`
    times taking turns (`path()` is asked before each round), and print the medians and their ratio."""
    bare = Bare()
    app.router.add_get("/bare", bare.handle)

    async def to_bare(i: int) -> None:
        bare.send(changed(1000 + i))

    found: dict[str, list[float]] = {"bare": [], "ours": []}
    with tempfile.TemporaryDirectory(prefix="bwf-") as tmp:
        runner = web.AppRunner(app, access_log=None, handle_signals=False, handler_cancellation=True)
        await runner.setup()
        try:
            await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls(Path(tmp))).start()
            port = runner.addresses[0][1]
            shape = (args.watchers, args.events, args.gap)
            print(
                f"{args.watchers} watchers x {args.events} events, {args.gap * 1000:.0f} ms apart", flush=True
            )
            for _ in range(args.rounds):
                found["bare"].append(await measure("bare aiohttp loop", port, "/bare", *shape, to_bare))
                found["ours"].append(await measure(label, port, path(), *shape, feed))
        finally:
            await runner.cleanup()
    base, ours = statistics.median(found["bare"]), statistics.median(found["ours"])
    print(
        f"\nmedian of {args.rounds} rounds: bare {base * 1e6:.1f} us, {label} {ours * 1e6:.1f} us,"
        f" ratio {ours / base:.2f}"
    )


def arguments(doc: str) -> argparse.Namespace:
    """The benches' shared flags: watchers, events, gap, rounds."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--watchers", type=int, default=50, help="client connections per path")
    parser.add_argument("--events", type=int, default=300, help="changes each connection is sent")
    parser.add_argument("--gap", type=float, default=0.005, help="seconds between changes")
    parser.add_argument("--rounds", type=int, default=3, help="runs of both paths, taking turns")
    return parser.parse_args()


async def serve(args: argparse.Namespace) -> None:
    async with cached(changed(5)) as (api, _, cache):
        app = web.Application()
        instancetypes.proxy(api, cache.informer).add_routes(app.router)
        rv = 10

        async def to_cache(_: int) -> None:
            nonlocal rv
            rv += 1
            api.send(event("MODIFIED", changed(rv)))

        def query() -> str:
            return f"{V1}?watch=1&fieldSelector=metadata.name%3Dbench&resourceVersion={rv}"

        await against_bare(args, app, "v1 cached watch (proxy)", query, to_cache)


# ---- the child: the watch clients -------------------------------------------------------------------------
async def clients(port: int, path: str, watchers: int, events: int) -> None:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the bench's own throwaway serving certificate
    opened = 0
    all_open = asyncio.Event()

    async def one() -> None:
        nonlocal opened
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        while (await reader.readline()) not in (b"\r\n", b""):
            pass  # the headers
        opened += 1
        if opened == watchers:
            all_open.set()
        seen = 0
        while seen < events:
            line = await reader.readline()
            if not line:
                raise RuntimeError("the stream ended early")
            seen += line.startswith(b'{"type"')
        writer.close()

    tasks = [asyncio.create_task(one()) for _ in range(watchers)]
    await all_open.wait()
    print("open", flush=True)
    await asyncio.gather(*tasks)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        port, path, watchers, events = sys.argv[2:6]
        asyncio.run(clients(int(port), path, int(watchers), int(events)))
        return
    asyncio.run(serve(arguments(__doc__)))


if __name__ == "__main__":
    main()
