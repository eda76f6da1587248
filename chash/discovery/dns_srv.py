"""``DnsSrvDiscovery``: a ring's nodes from a DNS SRV record set.

What Consul's DNS interface, Kubernetes headless services and nginx's
``service=`` parameter give: the backends of a service as SRV records.
``resolve()`` asks the nameservers (dnspython); ``follow(target)`` keeps a
router or a membership equal to the record set (``chash.discovery.follow``);
``start()`` polls at the records' TTL (or every ``interval``) in a daemon
thread.  A failed lookup (a timeout, SERVFAIL, NXDOMAIN, an empty answer)
keeps the last set: it is logged when it begins and when lookups work
again, and never empties the ring.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import threading
import types
from collections.abc import Callable, Sequence
from typing import Any, Self

from chash._optional import require
from chash.discovery.follow import apply, check_target
from chash.discovery.records import SrvRecord, nodes_of

__all__ = ["DiscoveryError", "DnsSrvDiscovery"]

logger = logging.getLogger("chash.discovery")

#: The shortest wait between two polls, whatever the TTL says (a TTL of 0
#: must not spin the thread).
MIN_POLL = 1.0
#: The longest wait between two polls when no interval is given.
MAX_POLL = 300.0


def _failures(exc: Exception) -> str:
    """What each nameserver answered, from dnspython's NoNameservers
    (``errors``: tuples of the server, ..., its error or rcode text)."""
    errors = getattr(exc, "kwargs", {}).get("errors") or []
    texts = [f"{error[0]} answered {error[3]}" for error in errors if len(error) > 3]
    return "; ".join(texts) or "no answer"


class DiscoveryError(LookupError):
    """A lookup found no usable node set; the message says why."""


def _dns() -> types.ModuleType:
    require("dns.resolver", user="DnsSrvDiscovery", extra="dns", package="dnspython")
    return require("dns", user="DnsSrvDiscovery", extra="dns", package="dnspython")


def _nameserver(text: str, port: int) -> tuple[str, int]:
    """``HOST`` or ``HOST:PORT`` (``[v6]:PORT``) as an IP address and port."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        rest = rest.removeprefix(":")
    elif text.count(":") == 1:
        host, _, rest = text.partition(":")
    else:
        host, rest = text, ""
    try:
        address = str(ipaddress.ip_address(host))
    except ValueError as exc:
        raise ValueError(f"nameserver {text!r} is not an IP address[:port]") from exc
    if rest:
        if not rest.isdigit() or not 0 < int(rest) < 65536:
            raise ValueError(f"nameserver {text!r} has no valid port")
        return address, int(rest)
    return address, port


class DnsSrvDiscovery:
    """The nodes an SRV name (``"_http._tcp.users.example."``) lists.

    Arguments:
        name: the SRV name, looked up as given (no search domains).
        nameservers: IP addresses (``"10.0.0.2"`` or ``"10.0.0.2:5353"``) to
            ask; None for the system's (``/etc/resolv.conf``).
        port: the port of a nameserver given without one.
        interval: seconds between two lookups; None polls at the answer's
            TTL (at least 1 s, at most 300 s).
        timeout: seconds a lookup may take, over every nameserver.

    Nodes are ``"target:port"``; ring weights are the SRV weights of the
    lowest priority (``chash.discovery.records``).  ValueError for a bad
    argument; ImportError without dnspython (``pip install
    'chash-router[dns]'``).
    """

    def __init__(self, name: str, *, nameservers: Sequence[str] | None = None, port: int = 53,
                 interval: float | None = None, timeout: float = 2.0) -> None:
        """See the class docstring."""
        if not isinstance(name, str) or not name.strip("."):
            raise ValueError(f"name must be a DNS name, not {name!r}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"port must be 1..65535, not {port!r}")
        for label, value in (("interval", interval), ("timeout", timeout)):
            if value is None and label == "interval":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value <= 0:
                raise ValueError(f"{label} must be a positive number of seconds, not {value!r}")
        if isinstance(nameservers, str):
            nameservers = [nameservers]
        servers = [_nameserver(s, port) for s in nameservers] if nameservers is not None \
            else None
        if servers is not None and not servers:
            raise ValueError("nameservers must name at least one server, or be None")
        dns = _dns()
        self.name = name if name.endswith(".") else name + "."
        self.interval = None if interval is None else float(interval)
        self.timeout = float(timeout)
        self._dns = dns
        self._resolver = dns.resolver.Resolver(configure=servers is None)
        if servers is not None:
            self._resolver.nameservers = [address for address, _ in servers]
            self._resolver.nameserver_ports = dict(servers)
            self._resolver.port = port
        self._lock = threading.RLock()
        self._nodes: dict[str, float] | None = None
        self._ttl: float | None = None
        self._failing: str | None = None
        #: [target, the set last applied to it (None until one was)]
        self._targets: list[list[Any]] = []
        self._listeners: list[Callable[[], object]] = []
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # -- looking up ---------------------------------------------------------

    def resolve(self) -> dict[str, float]:
        """Look the name up now: ``{node: weight}``.  DiscoveryError (the
        set kept by ``refresh`` is not touched) if the lookup fails or
        lists no usable target."""
        dns = self._dns
        try:
            answer = self._resolver.resolve(self.name, "SRV", lifetime=self.timeout,
                                            search=False)
        except dns.resolver.NXDOMAIN as exc:
            raise DiscoveryError(f"{self.name}: no such name (NXDOMAIN)") from exc
        except dns.resolver.NoAnswer as exc:
            raise DiscoveryError(f"{self.name}: no SRV records (empty answer)") from exc
        except dns.exception.Timeout as exc:
            raise DiscoveryError(f"{self.name}: no nameserver answered within "
                                 f"{self.timeout:g}s") from exc
        except dns.resolver.NoNameservers as exc:
            raise DiscoveryError(f"{self.name}: every nameserver failed the query "
                                 f"({_failures(exc)})") from exc
        except dns.exception.DNSException as exc:
            raise DiscoveryError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        records = [SrvRecord(r.priority, r.weight, r.port, r.target.to_text()) for r in answer]
        nodes = nodes_of(records)
        if not nodes:
            raise DiscoveryError(f"{self.name}: no SRV record names a target")
        with self._lock:
            self._ttl = float(answer.rrset.ttl) if answer.rrset is not None else None
        return nodes

    @property
    def nodes(self) -> dict[str, float] | None:
        """The last set resolved (None before one was)."""
        with self._lock:
            return None if self._nodes is None else dict(self._nodes)

    def refresh(self) -> dict[str, float] | None:
        """Resolve now and bring every followed target to the set if it
        changed (or its last attempt failed); the set held afterwards.  A failed lookup keeps the last
        set (logged once until lookups work again) and raises nothing."""
        try:
            nodes = self.resolve()
        except DiscoveryError as exc:
            self._failed(str(exc))
            return self.nodes
        with self._lock:
            if self._failing is not None:
                logger.warning("%s resolves again: %d nodes", self.name, len(nodes),
                               extra={"srv": self.name})
                self._failing = None
            changed, self._nodes = nodes != self._nodes, nodes
        if changed:
            logger.info("%s lists %d nodes: %s", self.name, len(nodes),
                        ", ".join(sorted(nodes)[:20]), extra={"srv": self.name})
        self._bring_targets(nodes)
        return dict(nodes)

    def _bring_targets(self, nodes: dict[str, float]) -> None:
        """Apply ``nodes`` to every target that did not get this set yet
        (new, or one whose last apply failed): a set is written once per
        change, so instances sharing a ring do not rewrite it every poll."""
        with self._lock:
            pending = [entry for entry in self._targets if entry[1] != nodes]
        applied = False
        for entry in pending:
            if self._apply(entry[0], nodes):
                entry[1] = dict(nodes)
                applied = True
        if applied:
            for listener in list(self._listeners):
                try:
                    listener()
                except Exception:
                    logger.exception("a listener of %s failed", self.name,
                                     extra={"srv": self.name})

    def _failed(self, why: str) -> None:
        with self._lock:
            first, self._failing = self._failing is None, why
            held = self._nodes
        if first:
            logger.warning("%s; keeping the last known set (%s) until it resolves again",
                           why, "none yet" if held is None else f"{len(held)} nodes",
                           extra={"srv": self.name})

    @staticmethod
    def _apply(target: Any, nodes: dict[str, float]) -> bool:
        try:
            apply(target, nodes)
        except Exception as exc:
            logger.warning("could not bring %r to the record set (%s: %s); trying again at "
                           "the next lookup", target, type(exc).__name__, exc)
            return False
        return True

    # -- following ----------------------------------------------------------

    def follow(self, target: Any) -> None:
        """Keep ``target`` (a router, a ``RedisMembership`` /
        ``EtcdMembership``, or a ``chash.health.LocalMembership``) equal to
        the record set from now on; it gets the last set at once, if one
        was resolved.  TypeError for a target it cannot edit."""
        check_target(target)
        with self._lock:
            self._targets.append([target, None])
            nodes = self._nodes
        if nodes is not None:
            self._bring_targets(nodes)

    def add_listener(self, listener: Callable[[], object]) -> None:
        """Call ``listener()`` after each record set brought to the
        targets (from the thread that looked it up); its errors are logged.
        (The gateway closes the WebSocket tunnels a change moved.)"""
        if not callable(listener):
            raise TypeError(f"listener must be callable, not {listener!r}")
        with self._lock:
            self._listeners.append(listener)

    def next_poll(self) -> float:
        """Seconds until the next lookup: ``interval``, else the TTL of
        the last answer (within 1 s .. 300 s; 5 s before any answer)."""
        if self.interval is not None:
            return self.interval
        ttl = self._ttl
        return 5.0 if ttl is None else min(MAX_POLL, max(MIN_POLL, ttl))

    # -- polling ------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the polling thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Resolve once (a failure is logged, not raised), then poll in a
        daemon thread until ``stop()``."""
        if self.running:
            raise RuntimeError("the discovery is already running")
        self.refresh()
        self._stopping = stopping = threading.Event()
        self._thread = threading.Thread(target=self._poll, args=(stopping,),
                                        name="chash-dns-srv", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop polling; safe to call twice or without ``start()``."""
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(self.timeout + 5.0)

    def _poll(self, stopping: threading.Event) -> None:
        while not stopping.wait(self.next_poll()):
            self.refresh()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc: BaseException | None, tb: types.TracebackType | None) -> None:
        self.stop()
