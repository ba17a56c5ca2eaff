"""worker-gateway fan-out benchmark: its CPU per event written to a watch client, against a bare loop.

Run: `.venv/bin/python -m tests.bench.bench_gateway_fanout` (no sandbox; about half a minute).

Why: a GPUStack server and its dashboards hold many `watch=true` streams on the gateway, and every change of
every cluster is written to each of them. The code under test is the gateway's own: its aiohttp routes
(gateway.http, the NDJSON watch) over its Hub (gateway.events), fed by publishing on the Hub what a
cluster's informer would publish, served over TLS on 127.0.0.1 to `--watchers` client connections in a child
process (bench_watchfanout's client). The baseline, in the same process and run, is bench_watchfanout's: the
least an aiohttp handler can do for the same clients, one shared wake-up per event and one write of an
already encoded line per connection. Both paths are fed `--events` changes of an InstanceType of about 2 KB,
`--gap` seconds apart.

Measured: this process's CPU time (user + system) from the first change to the last line read by every
client, per event written to one connection; the ratio of the gateway over the baseline. The gateway's
stream begins with a STATUS line, which the client counts as one of its events, so it reads one change
fewer than the baseline's client; that is 1 in `--events`. Nothing about time is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

from aiohttp import web
from tests.bench.bench_watchfanout import Bare, changed, measure, tls

from gpustack_operator.gateway.events import Event, Hub
from gpustack_operator.gateway.fleet import Fleet
from gpustack_operator.gateway.http import add_routes
from gpustack_operator.gateway.options import GatewayOptions


async def serve(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bgf-") as tmp:
        fleet = Fleet(GatewayOptions(), Hub())
        bare = Bare()
        app = web.Application()
        add_routes(app, fleet)
        app.router.add_get("/bare", bare.handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, handler_cancellation=True)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls(Path(tmp)))
        await site.start()
        port = runner.addresses[0][1]

        async def to_gateway(i: int) -> None:
            fleet.hub.publish("InstanceType", Event(type="MODIFIED", cluster="bench", object=changed(i)))

        async def to_bare(i: int) -> None:
            bare.send(changed(1000 + i))

        print(f"{args.watchers} watchers x {args.events} events, {args.gap * 1000:.0f} ms apart", flush=True)
        found: dict[str, list[float]] = {"bare": [], "gateway": []}
        try:
            for _ in range(args.rounds):
                found["bare"].append(
                    await measure(
                        "bare aiohttp loop", port, "/bare", args.watchers, args.events, args.gap, to_bare
                    )
                )
                found["gateway"].append(
                    await measure(
                        "gateway NDJSON watch",
                        port,
                        "/instancetypes?cluster=bench&watch=true",
                        args.watchers,
                        args.events,
                        args.gap,
                        to_gateway,
                    )
                )
        finally:
            await runner.cleanup()
    base, ours = statistics.median(found["bare"]), statistics.median(found["gateway"])
    print(
        f"\nmedian of {args.rounds} rounds: bare {base * 1e6:.1f} us, gateway {ours * 1e6:.1f} us,"
        f" ratio {ours / base:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watchers", type=int, default=50, help="client connections per path")
    parser.add_argument("--events", type=int, default=300, help="changes each connection is sent")
    parser.add_argument("--gap", type=float, default=0.005, help="seconds between changes")
    parser.add_argument("--rounds", type=int, default=3, help="runs of both paths, taking turns")
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
