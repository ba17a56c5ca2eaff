"""Client transport: which failures are retried and how long it waits, how a watch stream is read.

The seam is kubernetes-asyncio's `ApiClient.call_api`, replaced by a script of HTTP answers; everything
of ours above it runs for real.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from multidict import CIMultiDict

from gpustack_operator.kube import errors, patches, resources
from gpustack_operator.kube.client import JSON_PATCH, MERGE_PATCH, Client, connect, resource_of
from gpustack_operator.kube.watch import watch
from gpustack_operator.runtime import Backoff, TokenBucket

from .fakes import RecordingClock

CM = resources.CONFIGMAPS


class FakeResponse:
    """Enough of aiohttp.ClientResponse: status, headers, read(), content.iter_any()."""

    def __init__(
        self,
        status: int = 200,
        body: Any = None,
        *,
        headers: dict[str, str] | list[tuple[str, str]] | None = None,
        chunks: list[bytes | BaseException] | None = None,
    ) -> None:
        self.status = status
        self.headers = CIMultiDict(headers or {})
        self._body = body
        self._chunks = chunks or []
        self.content = self
        self.closed = False

    async def read(self) -> bytes:
        if isinstance(self._body, BaseException):
            raise self._body
        return b"" if self._body is None else json.dumps(self._body).encode()

    async def iter_any(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            if isinstance(chunk, BaseException):
                raise chunk
            yield chunk

    async def __aenter__(self) -> FakeResponse:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.closed = True


class ScriptedHttp:
    """Stands in for ApiClient: answers call_api from a script and remembers each call."""

    def __init__(self, *answers: FakeResponse | BaseException) -> None:
        self.answers = deque(answers)
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    async def call_api(self, path: str, method: str, **kw: Any) -> FakeResponse:
        self.calls.append((method, path, kw))
        answer = self.answers.popleft()
        if isinstance(answer, BaseException):
            raise answer
        return answer


def client(
    *answers: FakeResponse | BaseException, retries: int = 3
) -> tuple[Client, ScriptedHttp, RecordingClock]:
    http = ScriptedHttp(*answers)
    clock = RecordingClock()
    return Client(http, retries, backoff=Backoff(base=1, cap=4), clock=clock), http, clock


def status(code: int, reason: str) -> dict[str, Any]:
    return {"kind": "Status", "code": code, "reason": reason, "message": reason}


@pytest.mark.parametrize(
    ("answers", "want_sleeps"),
    [
        pytest.param(
            [FakeResponse(503, status(503, "ServiceUnavailable"))] * 2,
            [1, 2],
            id="unavailable-backs-off-doubling",
        ),
        pytest.param(
            [FakeResponse(429, status(429, "TooManyRequests"), headers={"Retry-After": "3"})],
            [3],
            id="throttled-waits-as-told-by-retry-after",
        ),
        pytest.param(
            [aiohttp.ClientOSError(111, "Connect call failed")],
            [1],
            id="server-restarting-refuses-connections",
        ),
        pytest.param(
            [FakeResponse(200, aiohttp.ServerDisconnectedError())],
            [1],
            id="pooled-connection-died-mid-answer",
        ),
    ],
)
async def test_transient_failures_are_retried_with_backoff_until_the_server_answers(
    answers: list[Any], want_sleeps: list[float]
) -> None:
    kube, http, clock = client(*answers, FakeResponse(200, {"metadata": {"name": "a"}}))
    assert await kube.request("GET", "/api/v1/namespaces/ns/configmaps/a") == {"metadata": {"name": "a"}}
    assert clock.sleeps == want_sleeps
    assert len(http.calls) == len(answers) + 1


async def test_warning_headers_of_an_answer_are_handed_to_the_caller() -> None:
    """fieldValidation=Warn answers 201 with one Warning header per unknown field; the aggregated API
    passes them on to kubectl, which prints them."""
    warned = [
        ("Warning", '299 - "unknown field \\"spec.bogus\\""'),
        ("Warning", '299 - "unknown field \\"spec.other\\""'),
    ]
    kube, _, _ = client(FakeResponse(201, {"metadata": {"name": "a"}}, headers=warned))
    got: list[str] = []
    await kube.request("POST", "/api/v1/namespaces/ns/configmaps", body={}, warnings=got)
    assert got == [value for _, value in warned]


@pytest.mark.parametrize(
    ("answer", "want"),
    [
        pytest.param(FakeResponse(404, status(404, "NotFound")), errors.NotFound, id="not-found"),
        pytest.param(FakeResponse(409, status(409, "Conflict")), errors.Conflict, id="conflict"),
        pytest.param(FakeResponse(410, status(410, "Expired")), errors.Gone, id="gone"),
        pytest.param(FakeResponse(422, status(422, "Invalid")), errors.Invalid, id="invalid"),
    ],
)
async def test_answers_that_retrying_cannot_fix_raise_at_once(
    answer: FakeResponse, want: type[Exception]
) -> None:
    kube, _, clock = client(answer)
    with pytest.raises(want):
        await kube.request("GET", "/api/v1/namespaces/ns/configmaps/a")
    assert clock.sleeps == []
    assert answer.closed


async def test_retries_stop_after_the_limit_with_the_last_error() -> None:
    kube, http, clock = client(*[FakeResponse(503, status(503, "ServiceUnavailable"))] * 4, retries=3)
    with pytest.raises(errors.Unavailable):
        await kube.request("GET", "/healthz")
    assert clock.sleeps == [1, 2, 4]
    assert len(http.calls) == 4


async def test_json_patch_and_status_patch_hit_the_right_path_with_the_right_media_type() -> None:
    kube, http, _ = client(FakeResponse(200, {}), FakeResponse(200, {}))
    await kube.json_patch(
        CM, "a", [patches.expect_resource_version("7"), patches.add(["data", "x/y"], "1")], namespace="ns"
    )
    await kube.patch_status(resources.NODES, "n1", {"status": {"phase": "x"}})
    (m1, p1, kw1), (m2, p2, kw2) = http.calls
    assert (m1, p1, kw1["header_params"]["Content-Type"]) == (
        "PATCH",
        "/api/v1/namespaces/ns/configmaps/a",
        JSON_PATCH,
    )
    assert kw1["body"] == [
        {"op": "replace", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "add", "path": "/data/x~1y", "value": "1"},
    ]
    assert (m2, p2, kw2["header_params"]["Content-Type"]) == ("PATCH", "/api/v1/nodes/n1/status", MERGE_PATCH)


def watch_answer(*chunks: bytes | BaseException) -> FakeResponse:
    return FakeResponse(200, chunks=list(chunks))


async def events_of(kube: Client, **kw: Any) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    async with aclosing(watch(kube, CM, resource_version="10", namespace="ns", **kw)) as events:
        async for ev in events:
            seen.append((ev["type"], ev["object"]["metadata"]["resourceVersion"]))
    return seen


def line(kind: str, rv: str) -> bytes:
    return (
        json.dumps({"type": kind, "object": {"metadata": {"name": "a", "resourceVersion": rv}}}).encode()
        + b"\n"
    )


async def test_watch_reassembles_events_split_across_chunks_and_skips_keepalive_newlines() -> None:
    one, two = line("ADDED", "11"), line("BOOKMARK", "12")
    answer = watch_answer(one[:7], one[7:] + b"\n" + two[:3], two[3:] + line("DELETED", "13")[:-1])
    kube, http, _ = client(answer)
    assert await events_of(kube, label_selector="a=b", timeout_seconds=42) == [
        ("ADDED", "11"),
        ("BOOKMARK", "12"),
        ("DELETED", "13"),
    ]
    _, _, kw = http.calls[0]
    assert dict(kw["query_params"]) == {
        "watch": "true",
        "resourceVersion": "10",
        "timeoutSeconds": "42",
        "allowWatchBookmarks": "true",
        "labelSelector": "a=b",
    }
    assert (
        kw["_request_timeout"].sock_read > 42
    )  # a silent dead connection is noticed after the server's timeout
    assert answer.closed


@pytest.mark.parametrize(
    ("answer", "want"),
    [
        pytest.param(FakeResponse(410, status(410, "Expired")), errors.Gone, id="watch-request-410"),
        pytest.param(
            watch_answer(json.dumps({"type": "ERROR", "object": status(410, "Expired")}).encode() + b"\n"),
            errors.Gone,
            id="error-event-410",
        ),
        pytest.param(
            watch_answer(
                json.dumps({"type": "ERROR", "object": status(500, "InternalError")}).encode() + b"\n"
            ),
            errors.Unavailable,
            id="error-event-500",
        ),
        pytest.param(
            watch_answer(line("ADDED", "11"), aiohttp.ClientPayloadError("cut")), errors.Unavailable, id="cut"
        ),
        pytest.param(watch_answer(b"<html>proxy error</html>\n"), errors.Unavailable, id="garbage-line"),
        pytest.param(
            aiohttp.ClientOSError(111, "Connect call failed"),
            errors.Unavailable,
            id="connection-refused",
        ),
    ],
)
async def test_watch_failures_surface_as_our_errors(answer: Any, want: type[Exception]) -> None:
    kube, _, _ = client(answer)
    with pytest.raises(want):
        await events_of(kube)


async def test_every_request_waits_for_a_token_of_the_rate_limiter() -> None:
    http = ScriptedHttp(*(FakeResponse(200, {"kind": "ConfigMap"}) for _ in range(4)))
    clock = RecordingClock()
    kube = Client(http, 0, clock=clock, limiter=TokenBucket(rate=2.0, burst=2, clock=clock))
    for _ in range(4):
        await kube.get(CM, "x", "ns")
    assert len(http.calls) == 4
    # Two go out at once (the burst); the next two each wait half a second (2 per second).
    assert clock.sleeps == [0.5, 0.5]


async def test_connect_names_a_missing_kubeconfig_instead_of_a_library_traceback(tmp_path: Path) -> None:
    with pytest.raises(errors.KubeConfigError, match="does not exist"):
        await connect(tmp_path / "nope")
    broken = tmp_path / "broken"
    broken.write_text("apiVersion: v1\nkind: Config\n")
    with pytest.raises(errors.KubeConfigError, match=f"cannot use kubeconfig {broken}"):
        await connect(broken)


@pytest.mark.parametrize(
    ("path", "want"),
    [
        ("/api/v1/nodes/n1", "nodes"),
        ("/api/v1/nodes/n1/status", "nodes/status"),
        ("/api/v1/namespaces/ns/configmaps", "configmaps"),
        ("/api/v1/namespaces/ns/configmaps/a?watch=true", "configmaps"),
        ("/api/v1/namespaces/ns", "namespaces"),
        ("/api/v1/namespaces", "namespaces"),
        ("/apis/kueue.x-k8s.io/v1beta2/clusterqueues/q/status", "clusterqueues/status"),
        ("/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/s/nodefeatures/n-gpustack-worker", "nodefeatures"),
        ("/version", "other"),
    ],
)
def test_a_request_path_names_its_resource_for_the_request_count(path: str, want: str) -> None:
    assert resource_of(path) == want


async def test_the_observer_hears_every_attempt_and_every_watch_with_its_answer() -> None:
    heard: list[tuple[str, str, int]] = []
    http = ScriptedHttp(
        FakeResponse(503, status(503, "ServiceUnavailable")),
        FakeResponse(200, {"metadata": {"name": "a"}}),
        FakeResponse(404, status(404, "NotFound")),
        aiohttp.ClientOSError(111, "Connect call failed"),
        watch_answer(line("ADDED", "11")),
    )
    kube = Client(
        http, 3, backoff=Backoff(base=1, cap=4), clock=RecordingClock(), observer=lambda *a: heard.append(a)
    )
    await kube.patch(CM, "a", {"data": {}}, namespace="ns")  # refused once, then accepted
    assert await kube.get_or_none(resources.NODES, "n1") is None
    with pytest.raises(errors.Unavailable):
        await events_of(kube)  # the server is down: no answer
    assert await events_of(kube) == [("ADDED", "11")]
    assert heard == [
        ("PATCH", "configmaps", 503),
        ("PATCH", "configmaps", 200),
        ("GET", "nodes", 404),
        ("WATCH", "configmaps", 0),
        ("WATCH", "configmaps", 200),
    ]


async def test_a_byte_stream_is_handed_on_untouched_and_its_refusal_raised_before_any_byte() -> None:
    log = FakeResponse(200, chunks=[b"first li", b"ne\n\n", b"no newline at the end"])
    kube, http, _ = client(log, FakeResponse(400, status(400, "BadRequest")))
    path = resources.PODS.path("p", "ns", "log")
    async with kube.stream_bytes(path, params={"follow": "true"}, read_timeout=5) as chunks:
        assert [chunk async for chunk in chunks] == [b"first li", b"ne\n\n", b"no newline at the end"]
    assert log.closed
    assert http.calls[0][1] == "/api/v1/namespaces/ns/pods/p/log"
    with pytest.raises(errors.BadRequest):
        async with kube.stream_bytes(path, params={}, read_timeout=5):
            pass
