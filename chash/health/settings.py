"""The settings of a health checker, in one frozen, validated object.

Both runners take the same keyword arguments; they build one
``HealthSettings`` from them, so every setting is checked here, once, with
the same error whichever runner was given it.  The router or membership the
checker acts on is not a setting: the runners take it as a collaborator.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container
from dataclasses import dataclass

from chash.health.state import NodeState, fraction, positive_int

__all__ = ["HealthSettings", "OnChange", "UrlSpec"]

#: A URL template with a ``{node}`` field, or a callable ``node -> url``.
UrlSpec = str | Callable[[str], str]
#: ``on_change(node, old_state, new_state, reason)``; its result is ignored.
OnChange = Callable[[str, NodeState, NodeState, str], object]


def _seconds(name: str, value: object) -> float:
    """``value`` as a float if it is a finite number > 0, else ValueError."""
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
    return float(value)


def _check_url(url: UrlSpec) -> None:
    """A template may use no field but ``{node}``; anything else must be
    callable (checked at run time too: callers may not be typed)."""
    if isinstance(url, str):
        try:
            url.format(node="node")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"url template {url!r} may only use {{node}}") from exc
    elif not callable(url):
        raise TypeError(f"url must be a template string or a callable, not {url!r}")


@dataclass(frozen=True, kw_only=True)
class HealthSettings:
    """What a health checker probes, how often, and how it judges.

    The fields are the runners' keyword arguments of the same names, with
    the same defaults; see ``HealthChecker`` for each.  Constructing one
    validates every field: ``ValueError`` for a value out of range,
    ``TypeError`` for a url or on_change of the wrong kind.  ``interval``,
    ``timeout`` and ``panic_threshold`` are stored as floats.
    """

    url: UrlSpec = "http://{node}/health"
    """Health URL template with ``{node}``, or a callable ``node -> url``."""
    interval: float = 5.0
    """Seconds from the start of one round to the start of the next."""
    timeout: float = 2.0
    """Seconds one probe may take, connecting included."""
    fall: int = 3
    """Consecutive failures that take a node out."""
    rise: int = 2
    """Consecutive successes that put a node back."""
    on_change: OnChange | None = None
    """Called as ``on_change(node, old, new, reason)`` after each transition."""
    healthy_statuses: Container[int] = range(200, 300)
    """HTTP statuses that count as success."""
    panic_threshold: float = 0.5
    """Healthy fraction below which every watched node stays in service."""
    max_concurrency: int = 64
    """At most this many probes in flight at once."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "interval", _seconds("interval", self.interval))
        object.__setattr__(self, "timeout", _seconds("timeout", self.timeout))
        positive_int("max_concurrency", self.max_concurrency)
        _check_url(self.url)
        if self.on_change is not None and not callable(self.on_change):
            raise TypeError(f"on_change must be callable, not {self.on_change!r}")
        positive_int("fall", self.fall)
        positive_int("rise", self.rise)
        object.__setattr__(self, "panic_threshold",
                           fraction("panic_threshold", self.panic_threshold))

    def url_for(self, node: str) -> str:
        """The health URL probed for ``node``; raises whatever a callable
        ``url`` raises."""
        if isinstance(self.url, str):
            return self.url.format(node=node)
        return self.url(node)
