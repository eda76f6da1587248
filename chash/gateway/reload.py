"""What a reload changes, as data: ``RingChanges``, ``ReloadOutcome``, ``LIVE_SETTINGS``.

A reload (SIGHUP, ``POST /-/reload``) rereads the configuration into a new
set of backends, weights, zones and settings; this module says what
differs from the running ones, with no I/O: the nodes to add, remove and
reweigh, the addresses and zones that moved (``ring_changes``), and which
settings a running gateway takes (``LIVE_SETTINGS``; any other is
refused by the caller, naming it).  ``Gateway.reconfigure`` applies the
changes in one step; ``ReloadOutcome`` is what a reload answers (logged,
and the JSON body of ``POST /-/reload``).

A leaf beside ``chash.gateway.config``: it imports nothing else of the
gateway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["LIVE_SETTINGS", "ReloadError", "ReloadOutcome", "Reloads", "RingChanges",
           "ring_changes"]

#: The ``GatewayConfig`` fields a running gateway takes from a reload: the
#: ones each request, tunnel or connection reads when it starts (a
#: connection or tunnel already open keeps the timeouts it started with).
LIVE_SETTINGS = frozenset({
    "key", "missing_key", "attempts", "connect_timeout", "read_timeout", "deadline",
    "retry_statuses", "fail_on_status", "retry_unsafe", "node_header", "max_body",
    "buffer_body", "max_header_size", "header_timeout", "idle_timeout", "body_timeout",
    "tunnel_idle_timeout", "max_tunnels", "on_ring_change", "tunnel_close_grace",
    # The TLS files and settings: a new context for the handshakes after the
    # reload (the listener stays a TLS one, or a plain one: see
    # ``Gateway.reconfigure``).
    "tls_cert", "tls_key", "tls_ciphers", "tls_min_version", "tls_client_ca",
    "tls_handshake_timeout",
    # How https:// backends are verified: new connections to them after the
    # reload use the new context (see ``Gateway.reconfigure``).
    "backend_ca", "backend_insecure",
})


class ReloadError(Exception):
    """A reload that changes nothing: the configuration does not validate
    (``refused`` empty), or it changes settings a running gateway cannot
    take (``refused``: their names)."""

    def __init__(self, message: str, refused: tuple[str, ...] = ()) -> None:
        """``message``: what is wrong; ``refused``: the settings that
        cannot change while running, if that is why."""
        super().__init__(message)
        self.refused = refused


@dataclass(frozen=True)
class RingChanges:
    """What a reload changes in the ring and the backends' addresses."""

    added: dict[str, float] = field(default_factory=dict)
    """``{node: weight}`` of the nodes new to the configuration."""
    removed: tuple[str, ...] = ()
    """The nodes no longer configured."""
    weights: dict[str, float] = field(default_factory=dict)
    """``{node: new weight}`` of the nodes kept whose weight changed."""
    addresses: dict[str, str] = field(default_factory=dict)
    """``{node: address}`` of the nodes added, and of those kept whose
    address changed."""
    zones: dict[str, str | None] = field(default_factory=dict)
    """``{node: zone or None}`` of the nodes kept whose zone changed."""

    def __bool__(self) -> bool:
        """Whether anything changes."""
        return bool(self.added or self.removed or self.weights or self.addresses or self.zones)

    def as_json(self) -> dict[str, Any]:
        """The changes as a JSON-ready dict (the reload's answer)."""
        moved = {n: a for n, a in self.addresses.items() if n not in self.added}
        return {"added": sorted(self.added), "removed": list(self.removed),
                "weights": dict(sorted(self.weights.items())),
                "addresses": dict(sorted(moved.items())),
                "zones": dict(sorted(self.zones.items()))}


def ring_changes(old: Mapping[str, str], new: Mapping[str, str],
                 old_weights: Mapping[str, float], new_weights: Mapping[str, float],
                 old_zones: Mapping[str, str], new_zones: Mapping[str, str]) -> RingChanges:
    """The changes from the backends ``old`` to ``new`` (``{node:
    address}``), with their weights (1 where not given) and zones."""
    added = {node: float(new_weights.get(node, 1.0)) for node in new if node not in old}
    removed = tuple(node for node in old if node not in new)
    weights = {node: float(new_weights.get(node, 1.0)) for node in new
               if node in old and new_weights.get(node, 1.0) != old_weights.get(node, 1.0)}
    addresses = {node: address for node, address in new.items()
                 if old.get(node) != address}
    zones = {node: new_zones.get(node) for node in new
             if node in old and new_zones.get(node) != old_zones.get(node)}
    return RingChanges(added, removed, weights, addresses, zones)


@dataclass(frozen=True)
class ReloadOutcome:
    """What one reload did: applied (``ok``) with ``changes`` and the
    ``settings`` changed, or nothing with ``error`` (and the ``refused``
    settings, when that is why).  ``digest``: the configuration running
    after it."""

    ok: bool
    digest: str
    at: float
    """When it was done (``time.time()``)."""
    error: str | None = None
    refused: tuple[str, ...] = ()
    changes: RingChanges = field(default_factory=RingChanges)
    settings: tuple[str, ...] = ()
    """The ``GatewayConfig`` fields whose values changed."""
    invalid: bool = False
    """Whether the configuration did not validate (rather than being
    refused, or there being no file to reread)."""

    @property
    def status(self) -> int:
        """The HTTP status of ``POST /-/reload``: 200 applied, 422 the
        configuration does not validate, 409 refused (settings that cannot
        change while running, or no file to reread)."""
        return 200 if self.ok else 422 if self.invalid else 409

    def as_json(self) -> dict[str, Any]:
        """The outcome as a JSON-ready dict."""
        body: dict[str, Any] = {"reloaded": self.ok, "digest": self.digest, "at": self.at}
        if self.ok:
            body["changes"] = self.changes.as_json()
            body["settings"] = list(self.settings)
        else:
            body["error"] = self.error
            body["refused"] = list(self.refused)
        return body


class Reloads(Protocol):
    """What the admin listener needs to reload a gateway and show its
    configuration (``chash.gateway.supervisor.Reloader``)."""

    @property
    def digest(self) -> str:
        """The digest of the configuration running now."""

    def reload(self) -> ReloadOutcome:
        """Reread the configuration and apply it, or change nothing."""

    def status(self) -> dict[str, Any]:
        """The configuration's file, digest, reloads and last outcome."""
