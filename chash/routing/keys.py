"""Where a request's routing key comes from, and backend addresses.

``KeyRule`` reads a key spec (``"header:X-User-Id"``, ``"cookie:session"``,
``"query:room"``, ``"path"``, ``"path:N"``) and extracts the key from any
request head that offers ``KeyedRequest``; ``parse_address`` normalizes a
backend address.  A leaf that imports nothing of chash, shared by the
gateway and the sticky clients so that both read a spec the same way.
Everything here raises ValueError with the reason.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["KEY_SOURCES", "KeyRule", "KeyedRequest", "parse_address", "request_rule"]


#: Where a routing key can come from (see ``KeyRule``).
KEY_SOURCES = ("header", "cookie", "query", "path", "tls-subject")


class KeyedRequest(Protocol):
    """What ``KeyRule.extract`` reads of a request head (the gateway's
    parsed heads are one; the sticky clients adapt their requests)."""

    @property
    def target(self) -> bytes:
        """The origin-form target: path and query, as sent."""

    @property
    def fields(self) -> list[tuple[bytes, bytes]]:
        """``(lower-case name, value)`` of every header field, in order."""

    def get(self, name: bytes) -> bytes | None:
        """The first value of header ``name`` (lower-case), or None."""


@dataclass(frozen=True)
class KeyRule:
    """Where a request's routing key comes from.

    Written as a string, as on the command line:

    * ``header:NAME``: the value of header NAME (case-insensitive);
    * ``cookie:NAME``: the value of cookie NAME;
    * ``query:NAME``: the value of query parameter NAME (the first one);
    * ``path``: the first segment of the URL path (``/u42/cart`` -> ``u42``);
      ``path:N``: the first N segments joined by ``/`` (``path:2`` on
      ``/users/42/cart`` -> ``users/42``; fewer when the path is shorter);
    * ``tls-subject``: the subject of the client certificate the gateway's
      TLS listener verified (``CN=tenant-a,O=Acme``; see
      ``chash.gateway.tls``).  A connection's, not a request head's:
      ``extract`` finds none, and the sticky clients refuse it.

    Keys are bytes, exactly as sent (percent-decoded for query and path):
    a value that is not UTF-8 is hashed like any other.  An empty value
    counts as no key.
    """

    source: str
    """One of ``KEY_SOURCES``."""
    name: str = ""
    """The header, cookie or parameter name ("" for ``path``)."""
    segments: int = 1
    """For ``path``: how many leading path segments make the key."""
    _header: bytes = field(default=b"", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The header's lower-case name, encoded once rather than per request.
        object.__setattr__(self, "_header", self.name.lower().encode())

    @classmethod
    def parse(cls, spec: str) -> KeyRule:
        """Parse ``header:NAME``, ``cookie:NAME``, ``query:NAME``, ``path`` or
        ``path:N``; ValueError with the reason otherwise."""
        source, sep, name = spec.partition(":")
        source = source.strip().lower()
        name = name.strip()
        if source == "path":
            if not sep:
                return cls("path")
            if not name.isdigit() or int(name) < 1:
                raise ValueError(f"in {spec!r}: path:N needs a whole number N >= 1")
            return cls("path", segments=int(name))
        if source == "tls-subject":
            if sep:
                raise ValueError(f"in {spec!r}: tls-subject takes no name")
            return cls("tls-subject")
        if source not in KEY_SOURCES:
            raise ValueError(
                f"unknown key source {spec!r}: use header:NAME, cookie:NAME, "
                "query:NAME, path, path:N or tls-subject")
        if not name:
            raise ValueError(f"in {spec!r}: {source}: needs a name, as in {source}:user")
        if any(c.isspace() for c in name) or any(c in name for c in ":;,=\"()<>@[]{}/?\\") \
                or not name.isascii():
            raise ValueError(f"in {spec!r}: {name!r} is not a valid {source} name")
        return cls(source, name)

    def __str__(self) -> str:
        if self.source == "path":
            return "path" if self.segments == 1 else f"path:{self.segments}"
        if self.source == "tls-subject":
            return "tls-subject"
        return f"{self.source}:{self.name}"

    def extract(self, request: KeyedRequest) -> bytes | None:
        """The key of ``request`` (a parsed head), or None when it has none."""
        value: bytes | None = None
        if self.source == "header":
            value = request.get(self._header)
        elif self.source == "cookie":
            wanted = self.name.encode()
            for name, header in request.fields:
                if name == b"cookie":
                    for pair in header.split(b";"):
                        cname, sep, cvalue = pair.strip(b" \t").partition(b"=")
                        if sep and cname == wanted:
                            value = cvalue.strip(b'"')
                            break
                    if value is not None:
                        break
        elif self.source == "query":
            _, sep, query = request.target.partition(b"?")
            wanted = self.name.encode()
            for pair in query.split(b"&"):
                qname, _, qvalue = pair.partition(b"=")
                if urllib.parse.unquote_to_bytes(qname.replace(b"+", b" ")) == wanted:
                    value = urllib.parse.unquote_to_bytes(qvalue.replace(b"+", b" "))
                    break
        elif self.source == "path":
            path = request.target.partition(b"?")[0]
            parts = [part for part in path.split(b"/") if part]
            value = urllib.parse.unquote_to_bytes(b"/".join(parts[:self.segments]))
        return value or None


def request_rule(spec: str, user: str) -> KeyRule:
    """``KeyRule.parse(spec)`` for ``user``, which sees requests but no TLS
    connection: ValueError for ``tls-subject``, which only the gateway's
    TLS listener knows."""
    rule = KeyRule.parse(spec)
    if rule.source == "tls-subject":
        raise ValueError(f"{user}: the key tls-subject is the gateway's (the client "
                         f"certificate its TLS listener verified); use a header, cookie, "
                         f"query or path key")
    return rule


def parse_address(text: str) -> str:
    """Normalize a backend address to ``host:port``; ValueError if it is not one.

    Accepts ``host:port``, ``[v6]:port`` and ``http://host:port[/]``.
    """
    address = text.strip()
    if address.startswith("http://"):
        address = address[len("http://"):].rstrip("/")
    elif "://" in address:
        raise ValueError(f"backend {text!r}: only http:// backends are supported")
    host, sep, port = address.rpartition(":")
    if not sep or not host or "/" in address:
        raise ValueError(f"backend {text!r} is not HOST:PORT")
    if host.startswith("[") != host.endswith("]") or (":" in host and not host.startswith("[")):
        raise ValueError(f"backend {text!r}: write an IPv6 host in brackets, as [::1]:8080")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"backend {text!r}: the port must be a number from 1 to 65535")
    return f"{host}:{int(port)}"
