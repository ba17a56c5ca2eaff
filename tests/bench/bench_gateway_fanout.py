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

from aiohttp import web
from tests.bench.bench_watchfanout import against_bare, arguments, changed

from gpustack_operator.gateway.events import Event, Hub
from gpustack_operator.gateway.fleet import Fleet
from gpustack_operator.gateway.http import add_routes
from gpustack_operator.gateway.options import GatewayOptions


async def serve(args: argparse.Namespace) -> None:
    fleet = Fleet(GatewayOptions(), Hub())
    app = web.Application()
    add_routes(app, fleet)

    async def to_gateway(i: int) -> None:
        fleet.hub.publish("InstanceType", Event(type="MODIFIED", cluster="bench", object=changed(i)))

    path = "/instancetypes?cluster=bench&watch=true"
    await against_bare(args, app, "gateway NDJSON watch", lambda: path, to_gateway)


def main() -> None:
    asyncio.run(serve(arguments(__doc__)))


if __name__ == "__main__":
    main()
