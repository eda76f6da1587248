"""OpenTelemetry spans for the gateway's attempts (the ``otel`` extra).

One span per proxied attempt, a client span named ``chash.gateway
attempt``, with the node tried, the attempt's number in the key's
preference list (0: its owner), the method, the backend's address and,
when it ends, the outcome (``answered``, ``failed``, ``retry status``,
``not delivered``) and what went wrong (``timed out after 2s``, ``HTTP
503``); a failed attempt's span has the error status.  Spans go to the tracer
provider given, or to the global one (which records nothing until an
OpenTelemetry SDK is configured).

Only ``opentelemetry-api`` is needed, imported when a gateway is built;
without it (or with ``GatewayConfig.tracing`` False) there are no spans
and the proxy path does not pay for them.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["AttemptTracer", "attempt_tracer"]

#: The attribute names, after OpenTelemetry's semantic conventions where
#: there is one.
NODE = "chash.node"
ATTEMPT = "chash.attempt"
OUTCOME = "chash.outcome"
DETAIL = "chash.detail"


class AttemptTracer:
    """Starts and ends the span of each attempt."""

    __slots__ = ("_error", "_kind", "_status", "_tracer")

    def __init__(self, trace: Any, provider: Any = None) -> None:
        """``trace``: the ``opentelemetry.trace`` module; ``provider``: the
        tracer provider (None: the global one)."""
        self._tracer = trace.get_tracer("chash.gateway", tracer_provider=provider)
        self._kind = trace.SpanKind.CLIENT
        self._status = trace.Status
        self._error = trace.StatusCode.ERROR

    def start(self, node: str, attempt: int, method: str, host: str, port: int) -> Any:
        """The span of one attempt on ``node`` at ``host:port``, started."""
        span = self._tracer.start_span("chash.gateway attempt", kind=self._kind)
        if span.is_recording():  # nothing to fill in for a provider that drops spans
            span.set_attributes({NODE: node, ATTEMPT: attempt, "http.request.method": method,
                                 "server.address": host, "server.port": port})
        return span

    def end(self, span: Any, outcome: str, detail: str) -> None:
        """End ``span`` with the attempt's ``outcome`` and the failure's
        ``detail`` ("" if none)."""
        if span.is_recording():
            span.set_attribute(OUTCOME, outcome)
            if detail:
                span.set_attribute(DETAIL, detail)
            if outcome != "answered" and detail:
                span.set_status(self._status(self._error, detail))
        span.end()


def attempt_tracer(enabled: bool | None, provider: Any = None) -> AttemptTracer | None:
    """An ``AttemptTracer`` if tracing is ``enabled`` (None: whenever
    opentelemetry-api is installed), else None.  ``enabled`` True without
    opentelemetry-api raises ``MissingExtra`` naming the ``otel`` extra."""
    if enabled is False:
        return None
    if enabled is None:
        try:
            trace = importlib.import_module("opentelemetry.trace")
        except ImportError:
            return None
    else:
        from chash._optional import require

        trace = require("opentelemetry.trace", user="GatewayConfig(tracing=True)",
                        extra="otel", package="opentelemetry-api")
    return AttemptTracer(trace, provider)
