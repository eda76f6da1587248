"""Tests of chash.health.probes: how a probe's answer becomes an outcome,
and the two probes (http.client, aiohttp) against real servers on
127.0.0.1, asking the same thing and judging alike."""

from __future__ import annotations

import errno
import http.server
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from _support.http_backends import Backend
from _support.ports import refused_node
from _support.waiting import run
from chash.health.probes import USER_AGENT, HttpProbe, ProbeOutcome, describe, judge

HEALTHY = range(200, 300)


@pytest.mark.parametrize("exc, text", [
    (TimeoutError(), "timed out after 2s"),
    (TimeoutError("timed out"), "timed out after 2s"),
    (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "connection refused"),
    (OSError(errno.ECONNREFUSED, "refused, as an OSError"), "connection refused"),
    (ConnectionResetError(errno.ECONNRESET, "reset"), f"ConnectionResetError: [Errno {errno.ECONNRESET}] reset"),
    (ValueError("unsupported URL 'ftp://a'"), "ValueError: unsupported URL 'ftp://a'"),
    (OSError(), "OSError"),
])
def test_describe_is_short_and_runner_independent(exc: BaseException, text: str) -> None:
    assert describe(exc, 2.0) == text


def test_describe_writes_the_timeout_briefly() -> None:
    assert describe(TimeoutError(), 0.25) == "timed out after 0.25s"
    assert describe(TimeoutError(), 30.0) == "timed out after 30s"


def test_judge_a_status_or_an_error() -> None:
    assert judge("a", 204, healthy=HEALTHY, timeout=2.0, latency=0.1) == \
        ProbeOutcome("a", True, None, 0.1)
    assert judge("a", 503, healthy=HEALTHY, timeout=2.0, latency=0.1) == \
        ProbeOutcome("a", False, "HTTP 503", 0.1)
    assert judge("a", 418, healthy={418}, timeout=2.0, latency=0.0).ok
    assert judge("a", 301, healthy=HEALTHY, timeout=2.0, latency=0.0).error == "HTTP 301"
    assert judge("a", TimeoutError(), healthy=HEALTHY, timeout=1.5, latency=1.5, aborted=True) == \
        ProbeOutcome("a", False, "timed out after 1.5s", 1.5, aborted=True)


# -- HttpProbe, over http.client --------------------------------------------


def test_http_probe_outcomes(backends: Callable[..., Backend]) -> None:
    ok, failing = backends(200), backends(503)
    outcome = HttpProbe(ok.node, ok.url, 2.0, HEALTHY).run()
    assert (outcome.node, outcome.ok, outcome.error, outcome.aborted) == (ok.node, True, None, False)
    assert outcome.latency is not None and outcome.latency >= 0
    assert HttpProbe(failing.node, failing.url, 2.0, HEALTHY).run().error == "HTTP 503"
    dead = refused_node()
    assert HttpProbe(dead, f"http://{dead}/health", 2.0, HEALTHY).run().error == \
        "connection refused"
    assert ok.hits == 1 and failing.hits == 1


def test_http_probe_times_out(backends: Callable[..., Backend]) -> None:
    hung = backends().hang()
    outcome = HttpProbe(hung.node, hung.url, 0.2, HEALTHY).run()
    assert (outcome.ok, outcome.error) == (False, "timed out after 0.2s")


@pytest.mark.parametrize("url, error", [
    ("ftp://127.0.0.1:21/health", "ValueError: unsupported URL 'ftp://127.0.0.1:21/health'"),
    ("http:///health", "ValueError: no host in URL 'http:///health'"),
])
def test_http_probe_rejects_urls_it_cannot_get(url: str, error: str) -> None:
    outcome = HttpProbe("a", url, 2.0, HEALTHY).run()
    assert (outcome.ok, outcome.error) == (False, error)


def test_an_aborted_http_probe_is_marked_to_be_discarded(backends: Callable[..., Backend]) -> None:
    backend = backends()
    probe = HttpProbe(backend.node, backend.url, 2.0, HEALTHY)
    assert probe.started is None and not probe.aborted
    probe.abort()
    outcome = probe.run()
    assert probe.started is not None and probe.aborted
    assert (outcome.ok, outcome.aborted, outcome.error) == \
        (False, True, "ConnectionAbortedError: probe aborted")
    assert backend.hits == 0


def test_abort_cuts_a_hanging_http_probe_short(backends: Callable[..., Backend]) -> None:
    hung = backends().hang()
    probe = HttpProbe(hung.node, hung.url, 30.0, HEALTHY)
    result: list[ProbeOutcome] = []
    thread = threading.Thread(target=lambda: result.append(probe.run()))
    thread.start()
    hung.wait_for_hits(1)
    probe.abort()
    thread.join(timeout=5.0)
    assert not thread.is_alive()
    assert result[0].aborted and not result[0].ok


# -- both probes send the same request --------------------------------------


class _Recording(http.server.BaseHTTPRequestHandler):
    """Answers 204 and keeps each request's path and headers."""

    seen: list[tuple[str, dict[str, str]]]

    def do_GET(self) -> None:
        self.seen.append((self.path, dict(self.headers.items())))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def recording() -> Iterator[tuple[str, list[tuple[str, dict[str, str]]]]]:
    """A server on 127.0.0.1 answering 204; yields (its URL base, requests seen)."""
    seen: list[tuple[str, dict[str, str]]] = []
    handler = type("Handler", (_Recording,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_both_probes_ask_alike(recording: tuple[str, list[tuple[str, dict[str, str]]]]) -> None:
    pytest.importorskip("aiohttp", reason="the async probe needs aiohttp (chash-router[async])")
    import aiohttp

    from chash.health.probes import aiohttp_session, aiohttp_status

    base, seen = recording
    url = base + "/ready?deep=1"
    assert HttpProbe("a", url, 2.0, HEALTHY).run().ok

    async def main() -> int:
        session = aiohttp_session(aiohttp)
        try:
            with pytest.raises(ValueError, match="unsupported URL 'ftp://a/'"):
                await aiohttp_status(session, "ftp://a/")
            return await aiohttp_status(session, url)
        finally:
            await session.close()

    assert run(main()) == 204
    assert [path for path, _ in seen] == ["/ready?deep=1"] * 2
    for _, headers in seen:
        lowered = {name.lower(): value for name, value in headers.items()}
        assert lowered["user-agent"] == USER_AGENT == "chash-health-check"
        assert lowered["connection"].lower() == "close"
