"""The kubelet stand-in's own small HTTP face, for the sandbox's readiness probes and for tests.

`/healthz` says the process runs. `/readyz?resource=a&resource=b[&since=<unix time>]` answers 200 only
once every named resource is registered (after `since`, when given), its stream is live and it has
advertised its devices: what "the device manager is up" means to the sandbox. `/pods/<namespace>/<name>`
returns what admission gave each container (device IDs, env, mounts), so a test can check the Allocate
response the kubelet actually received.
"""

from __future__ import annotations

from aiohttp import web

from gpustack_operator.sandbox.kubelet_admission import Admission
from gpustack_operator.sandbox.kubelet_registry import DeviceRegistry


def application(registry: DeviceRegistry, admission: Admission) -> web.Application:
    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(request: web.Request) -> web.Response:
        wanted = request.query.getall("resource", [])
        since = float(request.query.get("since", "0"))
        missing = []
        for name in wanted:
            endpoint = registry.endpoints.get(name)
            if (
                endpoint is None
                or endpoint.stopped_at is not None
                or not endpoint.listed
                or endpoint.registered_at < since
            ):
                missing.append(name)
        if missing:
            return web.Response(status=503, text=f"not registered: {', '.join(missing)}")
        return web.Response(text="ok")

    async def pod(request: web.Request) -> web.Response:
        key = f"{request.match_info['namespace']}/{request.match_info['name']}"
        record = admission.records.get(key)
        if record is None:
            return web.json_response({"message": f"pod {key} was not admitted here"}, status=404)
        return web.json_response(record)

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/pods/{namespace}/{name}", pod)
    return app


async def serve(app: web.Application, port: int) -> web.AppRunner:
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner
