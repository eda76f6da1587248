"""What both sticky transports do to one request, without sending it.

They read its key, point its URL at a node, tell the outcome of a failed
attempt and whether its body can be sent again.  The classes of exceptions
and streams come from the package the request itself belongs to, so one
transport serves an ``httpx.Client`` and an ``httpx2.Client`` alike (httpx2,
the maintained fork, keeps httpx's transport API).
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any, Union

from chash._optional import MissingExtra, require
from chash.routing.keys import request_rule
from chash.routing.retry import Outcome, next_attempt
from chash.routing.sticky import StickyRoutes, key_of, missing_key

if TYPE_CHECKING:
    import httpx

__all__ = ["KEY_EXTENSION", "Attempts", "KeyReader", "Library", "default_library", "library_of",
           "reader_for"]

#: The request extension that overrides the transport's key for one request.
KEY_EXTENSION = "chash.key"

KeySpec = Union[str, Callable[["httpx.Request"], "str | bytes | None"]]  # noqa: UP007
KeyReader = Callable[["httpx.Request"], "str | bytes"]


def default_library() -> types.ModuleType:
    """httpx, or httpx2 when only the fork is installed; MissingExtra else."""
    try:
        return require("httpx", user="chash.httpx", extra="httpx")
    except MissingExtra:
        try:
            return importlib.import_module("httpx2")
        except ModuleNotFoundError:
            pass
        raise


class Library:
    """The classes the transports need from one package (httpx or httpx2)."""

    def __init__(self, lib: types.ModuleType) -> None:
        self.module = lib
        self.byte_stream: type = lib.ByteStream
        self.sync_stream: type = lib.SyncByteStream
        self.async_stream: type = lib.AsyncByteStream
        self.transport_error: type[Exception] = lib.TransportError
        self.pool_timeout: type[Exception] = lib.PoolTimeout
        self.not_sent: tuple[type[Exception], ...] = (lib.ConnectError, lib.ConnectTimeout)
        # A node's fault: nothing answered, or not as HTTP.  Other transport
        # errors (an unsupported scheme, a malformed request) are the
        # caller's and go back at once.
        self.node_errors: tuple[type[Exception], ...] = (
            lib.NetworkError, lib.TimeoutException, lib.RemoteProtocolError)
        self._fast = True
        self._origins: dict[tuple[str, str, int], tuple[str, int | None]] = {}

    def retarget(self, url: httpx.URL, host: str, port: int) -> httpx.URL:
        """``url.copy_with(host=host, port=port)``, made cheaper.

        ``copy_with`` formats and parses the whole URL again, which costs
        more than the rest of the routing together.  Both packages keep a
        parsed URL as a named tuple, ``_uri_reference``; the first time a
        (scheme, host, port) is met, the tuple's host and port are taken
        from what ``copy_with`` makes, and the fast copy is checked to be
        equal to it: if it ever is not (another version of the package),
        ``copy_with`` is used from then on.
        """
        if self._fast:
            ref = url._uri_reference
            found = self._origins.get((ref.scheme, host, port))
            if found is not None:
                copy = object.__new__(type(url))
                copy._uri_reference = ref._replace(host=found[0], port=found[1])
                return copy
            slow = url.copy_with(host=host, port=port)
            try:
                origin = (slow._uri_reference.host, slow._uri_reference.port)
                copy = object.__new__(type(url))
                copy._uri_reference = ref._replace(host=origin[0], port=origin[1])
                same = copy == slow and str(copy) == str(slow)
            except (AttributeError, TypeError, ValueError):
                same = False
            if same:
                self._origins[(ref.scheme, host, port)] = origin
            else:
                self._fast = False
            return slow
        return url.copy_with(host=host, port=port)

    def outcome(self, exc: Exception) -> Outcome | None:
        """What a failed attempt came to; None for an error that is no node's."""
        if isinstance(exc, (self.pool_timeout, *self.not_sent)):
            return Outcome.NOT_DELIVERED
        if isinstance(exc, self.node_errors):
            return Outcome.FAILED
        return None

    def replayable(self, request: httpx.Request) -> bool:
        """Whether the body can be sent again: held in memory, not streamed."""
        return isinstance(request.stream, self.byte_stream)

    def hold(self, response: httpx.Response, release: Callable[[], None]) -> None:
        """Call ``release`` once ``response``'s body is closed (read to its
        end, or given up): the request stays in flight until then."""
        if isinstance(response.stream, self.async_stream):
            response.stream = _async_held(self.async_stream)(response.stream, release)
        else:
            response.stream = _sync_held(self.sync_stream)(response.stream, release)


class _SyncRelease:
    """Over another sync byte stream, calling ``release`` once when closed.
    Mixed into the package's own SyncByteStream (httpx checks the class)."""

    def __init__(self, stream: Any, release: Callable[[], None]) -> None:
        self._stream = stream
        self._release: Callable[[], None] | None = release

    def __iter__(self) -> Iterator[bytes]:
        yield from self._stream

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


class _AsyncRelease:
    """``_SyncRelease`` for the package's AsyncByteStream."""

    def __init__(self, stream: Any, release: Callable[[], None]) -> None:
        self._stream = stream
        self._release: Callable[[], None] | None = release

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


_HELD: dict[tuple[type, type], type] = {}


def _held(mixin: type, base: type) -> Any:
    """The class ``mixin`` over ``base``, made once per pair."""
    held = _HELD.get((mixin, base))
    if held is None:
        held = _HELD[(mixin, base)] = type(f"Held{base.__name__}", (mixin, base), {})
    return held


def _sync_held(base: type) -> Any:
    """A ``base`` (the package's SyncByteStream) over another one, calling
    ``release`` once when closed; httpx checks the stream's class."""
    return _held(_SyncRelease, base)


def _async_held(base: type) -> Any:
    """``_sync_held`` for the package's AsyncByteStream."""
    return _held(_AsyncRelease, base)


_LIBRARIES: dict[type, Library] = {}


def library_of(request: httpx.Request) -> Library:
    """The ``Library`` of the package ``request`` comes from."""
    kind = type(request)
    found = _LIBRARIES.get(kind)
    if found is None:
        found = _LIBRARIES[kind] = Library(sys.modules[kind.__module__.partition(".")[0]])
    return found


class _Head:
    """A request seen as ``chash.routing.keys.KeyedRequest``."""

    __slots__ = ("_request",)

    def __init__(self, request: httpx.Request) -> None:
        self._request = request

    @property
    def target(self) -> bytes:
        return bytes(self._request.url.raw_path)

    @property
    def fields(self) -> list[tuple[bytes, bytes]]:
        return [(name.lower(), value) for name, value in self._request.headers.raw]

    def get(self, name: bytes) -> bytes | None:
        for field, value in self._request.headers.raw:
            if field.lower() == name:
                return bytes(value)
        return None


def reader_for(key: KeySpec) -> KeyReader:
    """The function giving a request's key, from a key spec or a callable;
    it raises ValueError for a request without one.  A request's
    ``extensions["chash.key"]`` comes first."""
    extract: Callable[[httpx.Request], str | bytes | None]
    if isinstance(key, str):
        rule = request_rule(key, "chash.httpx")

        def extract(request: httpx.Request) -> str | bytes | None:
            return rule.extract(_Head(request))

        what = f"{rule} is absent or empty"
    elif callable(key):
        extract = key
        what = f"{getattr(key, '__name__', 'the key function')} returned none"
    else:
        raise TypeError(f"key must be a key spec such as 'header:X-User-Id' or a callable "
                        f"taking the request, not {type(key).__name__}")

    def read(request: httpx.Request) -> str | bytes:
        found: Any = request.extensions.get(KEY_EXTENSION)
        value = key_of(found) if found is not None else key_of(extract(request))
        if value is None:
            raise missing_key(what)
        return value

    return read


def describe(exc: Exception) -> str:
    """A failure's reason, as passive health records it."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class Attempts:
    """One request's way along its nodes: both transports loop over it.

    ``node`` is the node to try now, the request's URL pointing at it;
    ``retry(exc)`` judges a failed attempt (passive health, the retry
    policy) and says whether to try ``node`` again, now the next one;
    ``close()`` gives the request its own URL back.
    """

    __slots__ = ("_index", "_lib", "_method", "_nodes", "_request", "_routes", "_url", "node")

    def __init__(self, routes: StickyRoutes, lib: Library, request: httpx.Request,
                 nodes: list[str]) -> None:
        self._routes = routes
        self._lib = lib
        self._request = request
        self._nodes = nodes
        self._url = request.url
        self._method = request.method
        self._index = 0
        self.node = ""
        self._aim(0)

    def _aim(self, index: int) -> None:
        self._index = index
        self.node = node = self._nodes[index]
        host, port = self._routes.address(node)
        self._request.url = self._lib.retarget(self._url, host, port)

    def retry(self, exc: Exception) -> bool:
        """After ``exc``: True to try again (``node`` is the next node)."""
        outcome = self._lib.outcome(exc)
        if outcome is None:
            return False
        if not isinstance(exc, self._lib.pool_timeout):  # a local shortage, not the node
            self._routes.failed(self.node, describe(exc))
        index = next_attempt(self._nodes, self._index, self._method, outcome,
                             replayable=self._lib.replayable(self._request))
        if index is None:
            return False
        self._aim(index)
        return True

    def answered(self) -> None:
        """The node answered."""
        self._routes.answered(self.node)

    def close(self) -> None:
        """The request's URL as it was given (cookies and redirects read it)."""
        self._request.url = self._url
