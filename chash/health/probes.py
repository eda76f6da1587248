"""One health probe: a GET of a node's health URL, judged by its status.

``HttpProbe`` probes over ``http.client`` for the thread runner and can be
aborted from another thread; ``aiohttp_status`` probes over an aiohttp
session for the asyncio runner.  Both judge what they got with ``judge``,
and describe failures with ``describe``, so the two runners report the same
outcome, in the same words, for the same answer.
"""

from __future__ import annotations

import errno
import http.client
import socket
import ssl
import threading
import time
import types
import urllib.parse
from collections.abc import Container
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import aiohttp

__all__ = ["USER_AGENT", "HttpProbe", "ProbeOutcome", "aiohttp_session", "aiohttp_status",
           "describe", "judge"]

#: The User-Agent of every probe.
USER_AGENT = "chash-health-check"


@dataclass(frozen=True)
class ProbeOutcome:
    """What one probe of ``node`` found.

    ``aborted`` marks a probe that a stop cut short: its outcome is to be
    discarded, not counted as a failure.
    """

    node: str
    ok: bool
    error: str | None
    latency: float | None
    aborted: bool = False


def describe(exc: BaseException, timeout: float) -> str:
    """A short, runner-independent description of a failed probe."""
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return f"timed out after {timeout:g}s"
    if getattr(exc, "errno", None) == errno.ECONNREFUSED:
        return "connection refused"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def judge(node: str, answer: int | Exception, *, healthy: Container[int], timeout: float,
          latency: float, aborted: bool = False) -> ProbeOutcome:
    """The outcome of a probe of ``node`` that got ``answer``: an HTTP
    status (a success if it is in ``healthy``) or the exception raised."""
    if isinstance(answer, Exception):
        return ProbeOutcome(node, False, describe(answer, timeout), latency, aborted)
    ok = answer in healthy
    return ProbeOutcome(node, ok, None if ok else f"HTTP {answer}", latency, aborted)


def _split(url: str) -> urllib.parse.SplitResult:
    """``url`` split, if its scheme is http or https (else ValueError)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"unsupported URL {url!r}")
    return parts


class HttpProbe:
    """One GET of a health URL over http.client, abortable from another
    thread by shutting its socket down."""

    def __init__(self, node: str, url: str, timeout: float,
                 healthy: Container[int], ssl_context: ssl.SSLContext | None = None) -> None:
        """Probe ``url`` for ``node``, failing after ``timeout`` seconds
        unless the status is in ``healthy`` (an https one verified by
        ``ssl_context``); ``run()`` does it."""
        self.node = node
        self.url = url
        self.timeout = timeout
        self.healthy = healthy
        self.ssl_context = ssl_context
        self.started: float | None = None
        """``time.monotonic()`` when ``run()`` began, or None before."""
        self._lock = threading.Lock()
        self._conn: http.client.HTTPConnection | None = None
        self._aborted = False

    @property
    def aborted(self) -> bool:
        """Whether ``abort()`` was called."""
        return self._aborted

    def run(self) -> ProbeOutcome:
        """Probe now, in the calling thread; never raises."""
        started = self.started = time.monotonic()
        answer: int | Exception
        try:
            answer = self._get()
        except Exception as exc:
            answer = exc
        return judge(self.node, answer, healthy=self.healthy, timeout=self.timeout,
                     latency=time.monotonic() - started, aborted=self._aborted)

    def _get(self) -> int:
        parts = _split(self.url)
        if not parts.hostname:
            raise ValueError(f"no host in URL {self.url!r}")
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=self.timeout,
                                               context=self.ssl_context)
        else:
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=self.timeout)
        with self._lock:
            if self._aborted:
                raise ConnectionAbortedError("probe aborted")
            self._conn = conn
        try:
            target = parts.path or "/"
            if parts.query:
                target += "?" + parts.query
            conn.request("GET", target, headers={
                "Connection": "close", "User-Agent": USER_AGENT, "Accept": "*/*"})
            with conn.getresponse() as response:
                return response.status
        finally:
            conn.close()

    def abort(self) -> None:
        """Make the probe fail now; its outcome is to be ignored."""
        with self._lock:
            self._aborted = True
            conn = self._conn
        sock = conn.sock if conn is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def aiohttp_session(lib: types.ModuleType) -> aiohttp.ClientSession:
    """A session for probing with ``lib`` (the aiohttp module): a fresh
    connection per probe, no session-wide timeout (each probe has its own),
    bodies left as they are."""
    session: aiohttp.ClientSession = lib.ClientSession(
        connector=lib.TCPConnector(limit=0, force_close=True),
        timeout=lib.ClientTimeout(total=None),
        headers={"User-Agent": USER_AGENT},
        auto_decompress=False,
    )
    return session


async def aiohttp_status(session: aiohttp.ClientSession, url: str,
                         ssl_context: ssl.SSLContext | None = None) -> int:
    """GET ``url`` on ``session`` (no redirects followed; an https one
    verified by ``ssl_context``, default the system's CAs); its status."""
    _split(url)
    async with session.get(url, allow_redirects=False, ssl=ssl_context or True,
                           headers={"Connection": "close"}) as response:
        status: int = response.status
        return status
