"""Where a backend is reached: ``Upstream`` (plain or TLS, its host and
port, the Host field's authority), ``parse_backend`` for the gateway's
backend addresses, ``BackendTls`` holding the context of the TLS ones, and
``open_channel`` to connect to one.

A backend address is ``host:port`` (plain HTTP, also written
``http://host:port``) or ``https://host:port``: the gateway then speaks TLS
to it, with SNI and certificate verification for ``host`` under the
context ``chash.gateway.tls.backend_context`` builds.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass

from chash.gateway.channel import Channel
from chash.gateway.tls import backend_context
from chash.routing.keys import parse_address

__all__ = ["BackendTls", "Upstream", "open_channel", "parse_backend", "upstream_of"]

_HTTPS = "https://"


@dataclass(frozen=True, slots=True)
class Upstream:
    """A backend's address, split: what a connection to it needs."""

    secure: bool
    """Whether the backend is spoken to over TLS (``https://``)."""
    host: str
    """The host, IPv6 without brackets: what is connected to and verified."""
    port: int
    authority: bytes
    """``host:port`` (IPv6 in brackets), as the Host field names it."""


def parse_backend(text: str) -> str:
    """Normalize a gateway backend address: ``host:port`` for plain HTTP
    (``http://`` accepted and dropped), ``https://host:port`` for TLS;
    ValueError naming what is wrong otherwise."""
    address = text.strip()
    if address.startswith(_HTTPS):
        rest = address[len(_HTTPS):]
        rest = rest[:-1] if rest.endswith("/") else rest  # as http://host:port/ is
        try:
            return _HTTPS + parse_address(rest)
        except ValueError as exc:
            raise ValueError(str(exc).replace(repr(rest), repr(text), 1)) from None
    if "://" in address and not address.startswith("http://"):
        raise ValueError(f"backend {text!r}: only http:// and https:// backends are supported")
    return parse_address(address)


#: Addresses already split: a request's backend is looked up, not parsed.
_SPLIT: dict[str, Upstream] = {}
_SPLIT_LIMIT = 4096


def upstream_of(address: str) -> Upstream:
    """``address`` (as ``parse_backend`` returns it) split; ValueError if it
    is not one."""
    upstream = _SPLIT.get(address)
    if upstream is not None:
        return upstream
    normal = parse_backend(address)
    secure = normal.startswith(_HTTPS)
    authority = normal[len(_HTTPS):] if secure else normal
    host, _, port = authority.rpartition(":")
    upstream = Upstream(secure, host.strip("[]"), int(port), authority.encode())
    if len(_SPLIT) >= _SPLIT_LIMIT:  # addresses come and go: forget them all, rarely
        _SPLIT.clear()
    _SPLIT[address] = upstream
    return upstream


class BackendTls:
    """The context of the connections to ``https://`` backends, for one
    ``backend_ca`` and ``backend_insecure``: built when first needed
    (loading the system's CAs takes tens of milliseconds), or at once with
    ``eager`` so that a CA bundle that does not load is told now."""

    def __init__(self, ca: str | None = None, insecure: bool = False, *,
                 eager: bool = False) -> None:
        """ValueError naming ``backend_ca`` (with ``eager``) if its file
        cannot be read or holds no CA."""
        self.ca = ca
        self.insecure = insecure
        self._context: ssl.SSLContext | None = None
        self._ca_bytes = _read(ca)
        if eager or ca is not None:
            self.context()

    def context(self) -> ssl.SSLContext:
        """The context (built now if it was not yet)."""
        if self._context is None:
            self._context = backend_context(self.ca, insecure=self.insecure)
        return self._context

    @property
    def built(self) -> bool:
        """Whether the context has been built."""
        return self._context is not None

    def for_upstream(self, upstream: Upstream) -> ssl.SSLContext | None:
        """The context for connections to ``upstream``: None for a plain one."""
        return self.context() if upstream.secure else None

    def same_as(self, other: BackendTls) -> bool:
        """Whether ``other`` verifies as this one does: the same settings and
        the same bytes in the CA file (a renewed bundle is a change)."""
        return (self.ca, self.insecure, self._ca_bytes) == \
            (other.ca, other.insecure, other._ca_bytes)


def _read(path: str | None) -> bytes | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError:
        return None  # told by backend_context, which names the setting


async def open_channel(upstream: Upstream, tls: ssl.SSLContext | None,
                       timeout: float) -> Channel:
    """A new connection to ``upstream``, its TLS handshake done when it is
    a secure one (``tls`` verifies it); TimeoutError after ``timeout``
    seconds in all, OSError (``ssl.SSLError`` among them) when refused."""
    loop = asyncio.get_running_loop()
    if not upstream.secure:
        _, channel = await asyncio.wait_for(
            loop.create_connection(Channel, upstream.host, upstream.port), timeout)
        return channel
    if tls is None:
        raise ValueError(f"no TLS context for the https backend {upstream.host}")
    _, channel = await asyncio.wait_for(
        loop.create_connection(Channel, upstream.host, upstream.port, ssl=tls,
                               server_hostname=upstream.host,
                               ssl_handshake_timeout=max(timeout, 0.001)), timeout)
    return channel
