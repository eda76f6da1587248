"""OpenTelemetry spans per proxied attempt (chash.gateway.tracing), caught
by the OpenTelemetry SDK itself: a real ``TracerProvider`` whose spans go
to an ``InMemorySpanExporter``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")
pytest.importorskip("opentelemetry.trace", reason="the otel extra (opentelemetry-api) is "
                    "not installed")
pytest.importorskip("opentelemetry.sdk.trace", reason="opentelemetry-sdk (the test extra) is "
                    "not installed")

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, Sampler
from opentelemetry.trace import SpanKind, StatusCode

from _support.gateways import cluster, get, owner_of
from _support.waiting import run
from chash._optional import MissingExtra
from chash.gateway.tracing import attempt_tracer


def recording(sampler: Sampler | None = None) -> tuple[TracerProvider, InMemorySpanExporter]:
    """A provider that hands every ended span to an in-memory exporter at once."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler) if sampler is not None else TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def attempts(exporter: InMemorySpanExporter) -> Sequence[ReadableSpan]:
    spans = exporter.get_finished_spans()
    assert all(span.instrumentation_scope is not None
               and span.instrumentation_scope.name == "chash.gateway" for span in spans)
    return spans


def port(address: str) -> int:
    return int(address.rsplit(":")[1])


def test_a_span_per_attempt_with_node_attempt_and_outcome() -> None:
    provider, exporter = recording()

    async def main() -> None:
        async with cluster(health=False, tracer_provider=provider) as (gateway, backends, s):
            owner = owner_of(gateway, "u1")
            assert (await get(s, gateway, "u1"))[0] == 200
            [span] = attempts(exporter)
            assert span.name == "chash.gateway attempt" and span.kind is SpanKind.CLIENT
            assert span.end_time is not None and span.start_time is not None
            assert span.start_time <= span.end_time
            assert dict(span.attributes or {}) == {
                "chash.node": owner, "chash.attempt": 0, "http.request.method": "GET",
                "server.address": "127.0.0.1", "server.port": port(backends[owner].address),
                "chash.outcome": "answered"}
            assert span.status.status_code is StatusCode.UNSET
            # The gateway reads no trace context from the request and opens
            # no span of its own around the attempts: each is a root.
            assert span.parent is None and span.context is not None and span.context.is_valid

            await backends[owner].stop()
            exporter.clear()
            status, body = await get(s, gateway, "u1")
            assert status == 200 and body["backend"] != owner
            failed, answered = attempts(exporter)
            assert failed.name == answered.name == "chash.gateway attempt"
            assert dict(failed.attributes or {}) == {
                "chash.node": owner, "chash.attempt": 0, "http.request.method": "GET",
                "server.address": "127.0.0.1", "server.port": port(backends[owner].address),
                "chash.outcome": "not delivered", "chash.detail": "connection refused"}
            assert failed.status.status_code is StatusCode.ERROR
            assert failed.status.description == "connection refused"
            assert dict(answered.attributes or {}) == {
                "chash.node": body["backend"], "chash.attempt": 1, "http.request.method": "GET",
                "server.address": "127.0.0.1",
                "server.port": port(backends[body["backend"]].address),
                "chash.outcome": "answered"}
            assert answered.status.status_code is StatusCode.UNSET
            # One after the other, neither inside the other.
            assert failed.end_time is not None and answered.start_time is not None
            assert failed.end_time <= answered.start_time
            assert failed.parent is None and answered.parent is None
            assert failed.context is not None and answered.context is not None
            assert failed.context.span_id != answered.context.span_id
    run(main())


def test_a_provider_that_samples_nothing_gets_no_spans_and_requests_still_work() -> None:
    provider, exporter = recording(ALWAYS_OFF)

    async def main() -> None:
        async with cluster(health=False, tracer_provider=provider) as (gateway, backends, s):
            owner = owner_of(gateway, "u1")
            assert (await get(s, gateway, "u1"))[0] == 200
            await backends[owner].stop()
            status, body = await get(s, gateway, "u1")
            assert status == 200 and body["backend"] != owner
    run(main())
    assert exporter.get_finished_spans() == ()


def test_no_spans_when_tracing_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    provider, exporter = recording()

    async def main() -> None:
        async with cluster(health=False, tracing=False, tracer_provider=provider) as (
                gateway, _, session):
            assert (await get(session, gateway, "u1"))[0] == 200
    run(main())
    assert exporter.get_finished_spans() == ()
    assert attempt_tracer(False) is None
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)
    assert attempt_tracer(None) is None  # not installed: quietly none
    with pytest.raises(MissingExtra, match=r"opentelemetry-api: pip install 'chash-router\[otel\]'"):
        attempt_tracer(True)


def test_no_spans_by_default_without_a_configured_provider(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The API's global provider before an SDK sets one records nothing:
    # by default, no tracer then, so the proxy path does not pay for spans.
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert attempt_tracer(None) is None
    assert attempt_tracer(True) is not None  # asked for: spans go to the global one
    given, given_spans = recording()
    assert attempt_tracer(None, given) is not None
    configured, configured_spans = recording()
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", configured)
    tracer = attempt_tracer(None)
    assert tracer is not None
    # ... and its spans go to the provider set globally.
    span: Any = tracer.start("a", 0, "GET", "127.0.0.1", 80)
    tracer.end(span, "answered", "")
    [ended] = configured_spans.get_finished_spans()
    assert ended.name == "chash.gateway attempt"
    assert given_spans.get_finished_spans() == ()
