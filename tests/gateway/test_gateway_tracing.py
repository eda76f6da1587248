"""OpenTelemetry spans per proxied attempt (chash.gateway.tracing), caught
by a tracer provider of the test's own, written against opentelemetry-api."""

from __future__ import annotations

import sys
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")
pytest.importorskip("opentelemetry.trace", reason="the otel extra (opentelemetry-api) is "
                    "not installed")

from _support.gateways import cluster, get, owner_of
from _support.waiting import run
from chash._optional import MissingExtra
from chash.gateway.tracing import attempt_tracer


class Span:
    def __init__(self, name: str, kind: Any) -> None:
        self.name, self.kind = name, kind
        self.attributes: dict[str, Any] = {}
        self.status: Any = None
        self.ended = False

    def is_recording(self) -> bool:
        return not self.ended

    def set_attributes(self, attributes: dict[str, Any]) -> None:
        self.attributes.update(attributes)

    def set_attribute(self, key: str, value: Any) -> None:
        self.attributes[key] = value

    def set_status(self, status: Any) -> None:
        self.status = status

    def end(self) -> None:
        self.ended = True


class Provider:
    """Records every span its tracers start."""

    def __init__(self) -> None:
        self.spans: list[Span] = []

    def get_tracer(self, *args: Any, **kwargs: Any) -> Provider:
        return self

    def start_span(self, name: str, kind: Any = None, **kwargs: Any) -> Span:
        span = Span(name, kind)
        self.spans.append(span)
        return span


def test_a_span_per_attempt_with_node_attempt_and_outcome() -> None:
    provider = Provider()

    async def main() -> None:
        async with cluster(health=False, tracer_provider=provider) as (gateway, backends, s):
            owner = owner_of(gateway, "u1")
            assert (await get(s, gateway, "u1"))[0] == 200
            [span] = provider.spans
            assert span.ended and span.name == "chash.gateway attempt"
            assert span.attributes["chash.node"] == owner
            assert span.attributes["chash.attempt"] == 0
            assert span.attributes["chash.outcome"] == "answered"
            assert span.attributes["http.request.method"] == "GET"
            assert span.attributes["server.port"] == int(backends[owner].address.rsplit(":")[1])
            assert span.status is None

            await backends[owner].stop()
            provider.spans.clear()
            status, body = await get(s, gateway, "u1")
            assert status == 200 and body["backend"] != owner
            failed, answered = provider.spans
            assert failed.attributes["chash.node"] == owner
            assert failed.attributes["chash.outcome"] == "not delivered"
            assert failed.attributes["chash.detail"] == "connection refused"
            assert failed.status is not None and failed.status.description == \
                "connection refused"
            assert answered.attributes["chash.attempt"] == 1
            assert answered.attributes["chash.node"] == body["backend"]
            assert answered.attributes["chash.outcome"] == "answered"
    run(main())


def test_no_spans_when_tracing_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    provider = Provider()

    async def main() -> None:
        async with cluster(health=False, tracing=False, tracer_provider=provider) as (
                gateway, _, session):
            assert (await get(session, gateway, "u1"))[0] == 200
    run(main())
    assert provider.spans == []
    assert attempt_tracer(False) is None
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)
    assert attempt_tracer(None) is None  # not installed: quietly none
    with pytest.raises(MissingExtra, match=r"opentelemetry-api: pip install 'chash-router\[otel\]'"):
        attempt_tracer(True)
