"""The worker's probe and scrape endpoints: /healthz, /readyz and /metrics, served by aiohttp.

Kubernetes restarts a pod whose liveness probe fails and sends no traffic to one that is not ready;
Prometheus scrapes /metrics. Checks are named callables so the composition root decides what "ready"
means (Prepare done, caches synced) without this module knowing about controllers. A failing probe
answers 500 with one `[+]name ok` / `[-]name failed` line per check, as kube-apiserver's do, so
`curl` shows which check failed; a check may return the reason instead of False (`[-]name failed: why`).
A note (`[!]name: text`) is shown with the checks but fails nothing: what an admin should know that does
not stop the process from serving. /livez answers as /healthz does (kube-apiserver serves both).
Metrics and probes may share one address or use two.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["Check", "Note", "build_app", "parse_address", "serve"]

log = logging.getLogger(__name__)

Check = Callable[[], bool | str]
"""True when healthy; False, or the reason as text, when not."""
Note = Callable[[], str | None]
"""Text to show beside the checks, or None."""


def parse_address(text: str) -> tuple[str, int] | None:
    """`host:port` (`:port` means every interface, `[::1]:port` for IPv6); "0" or "" disables."""
    if text in ("", "0"):
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bind address {text!r}: want host:port, e.g. 127.0.0.1:8080, or 0 to disable")
    return host.strip("[]") or "0.0.0.0", int(port)


def _probe(
    checks: Mapping[str, Check], notes: Mapping[str, Note] | None = None
) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        lines, healthy = [], True
        for name, check in checks.items():
            try:
                verdict = check()
            except Exception:
                log.exception("Health check %s raised", name)
                verdict = False
            ok = verdict is True
            healthy = healthy and ok
            why = f": {verdict}" if isinstance(verdict, str) else ""
            lines.append(f"[+]{name} ok" if ok else f"[-]{name} failed{why}")
        for name, note in (notes or {}).items():
            text = note()
            if text:
                lines.append(f"[!]{name}: {text}")
        verbose = "verbose" in request.query or not healthy
        text = "\n".join([*lines, ""]) if verbose else ""
        text += f"{request.path.strip('/')} check {'passed' if healthy else 'failed'}\n"
        return web.Response(status=200 if healthy else 500, text=text)

    return handler


def build_app(
    *,
    registry: CollectorRegistry | None = None,
    live: Mapping[str, Check] | None = None,
    ready: Mapping[str, Check] | None = None,
    notes: Mapping[str, Note] | None = None,
) -> web.Application:
    """An app with /metrics when `registry` is given and /healthz, /readyz when their checks are."""
    app = web.Application()
    if registry is not None:

        async def metrics(request: web.Request) -> web.Response:
            body = generate_latest(registry)
            return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

        app.router.add_get("/metrics", metrics)
    if live is not None:
        app.router.add_get("/healthz", _probe(live))
        app.router.add_get("/livez", _probe(live))
    if ready is not None:
        app.router.add_get("/readyz", _probe(ready, notes))
    return app


async def serve(app: web.Application, address: tuple[str, int], *, name: str) -> None:
    """Serve `app` on `address` until cancelled (run it as a supervised task)."""
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, address[0], address[1])
        await site.start()
        log.info("Serving %s on http://%s:%s", name, *address)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
