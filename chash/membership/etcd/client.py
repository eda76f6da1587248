"""Clients of etcd's v3 JSON gateway over httpx, blocking and asyncio.

``EtcdClient`` and ``AsyncEtcdClient`` post a ``Request``
(``chash.membership.etcd.wire``) to one endpoint of the cluster and return
the decoded reply.  An endpoint that does not answer (refused, timed out)
or cannot serve (no leader) is left for the next one, in turn; only when
every endpoint failed does the call raise ``EtcdUnavailable``.  With a user
and password, the client authenticates (``/v3/auth/authenticate``) and
sends the token with every request, authenticating again when etcd says
the token expired.  Both clients share everything but the I/O (``_Cluster``).
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.parse
from collections.abc import Sequence
from typing import Any

from chash._optional import require
from chash.membership.etcd.wire import EtcdAuthError, EtcdError, EtcdUnavailable, Request, error_for

__all__ = ["AsyncEtcdClient", "EtcdClient", "import_httpx", "parse_endpoints"]


def import_httpx() -> Any:
    """httpx; ImportError naming the extra."""
    return require("httpx", user="EtcdMembership", extra="etcd", package="httpx")


def parse_endpoints(endpoints: str | Sequence[str]) -> tuple[list[str], str | None, str | None]:
    """The endpoint base URLs, and a user and password given in them
    (``http://user:password@host:2379``); ValueError for a bad URL."""
    items = [endpoints] if isinstance(endpoints, str) else list(endpoints)
    if not items:
        raise ValueError("endpoints must name at least one etcd URL")
    urls: list[str] = []
    user = password = None
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"an etcd endpoint must be a str URL, not {item!r}")
        for part in item.split(","):
            parsed = urllib.parse.urlsplit(part.strip())
            if parsed.scheme not in ("http", "https") or not parsed.hostname:
                raise ValueError(f"etcd endpoint {part!r} is not an http(s)://HOST:PORT URL")
            if parsed.username is not None:
                user = urllib.parse.unquote(parsed.username)
                password = urllib.parse.unquote(parsed.password or "")
            host = f"[{parsed.hostname}]" if ":" in parsed.hostname else parsed.hostname
            port = f":{parsed.port}" if parsed.port else ""
            urls.append(f"{parsed.scheme}://{host}{port}")
    return urls, user, password


def _decode(status: int, content: bytes) -> dict[str, Any]:
    """A reply's JSON, or the error it carries."""
    try:
        body = json.loads(content) if content else {}
    except ValueError:
        body = None
    if status != 200 or not isinstance(body, dict):
        raise error_for(status, body)
    if "error" in body and "code" in body:
        raise error_for(status, body)
    return body


def _expired(exc: EtcdError) -> bool:
    return isinstance(exc, EtcdAuthError) and "invalid auth token" in str(exc)


#: Sent with every request: a member that lost its leader (a minority after a
#: partition) answers "etcdserver: no leader" at once instead of waiting for
#: one until the request times out, and cancels its watches (etcd reads it
#: as the gRPC metadata ``hasleader``, which its JSON gateway passes on).
REQUIRE_LEADER = {"Grpc-Metadata-hasleader": "true"}

class _Cluster:
    """Endpoints tried in turn from the last one that answered, and the
    credentials: the part both clients share."""

    def __init__(self, endpoints: str | Sequence[str], username: str | None,
                 password: str | None, timeout: float) -> None:
        self.urls, url_user, url_password = parse_endpoints(endpoints)
        self.username = username if username is not None else url_user
        self.password = password if password is not None else url_password
        if (self.username is None) != (self.password is None):
            raise ValueError("give both username and password, or neither")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self.timeout = float(timeout)
        self.token: str | None = None
        self.current = 0
        self.lock = threading.Lock()

    def order(self) -> list[int]:
        """Endpoint indexes to try, the last good one first."""
        start = self.current
        return [(start + i) % len(self.urls) for i in range(len(self.urls))]

    def headers(self) -> dict[str, str]:
        if self.token:
            return {**REQUIRE_LEADER, "Authorization": self.token}
        return dict(REQUIRE_LEADER)

    def auth_request(self) -> Request:
        return Request("/v3/auth/authenticate",
                       {"name": self.username, "password": self.password})

    def unavailable(self, errors: list[str]) -> EtcdUnavailable:
        return EtcdUnavailable("no etcd endpoint answered: " + "; ".join(errors), 14)


class EtcdClient:
    """A blocking client of an etcd cluster's JSON gateway (thread-safe)."""

    def __init__(self, endpoints: str | Sequence[str], *, username: str | None = None,
                 password: str | None = None, timeout: float = 2.0) -> None:
        """ValueError for bad endpoints or credentials; ImportError without httpx."""
        self._httpx = import_httpx()
        self._cluster = _Cluster(endpoints, username, password, timeout)
        self._http = self._httpx.Client(timeout=self._cluster.timeout)

    @property
    def endpoints(self) -> list[str]:
        """The endpoints' base URLs."""
        return list(self._cluster.urls)

    @property
    def timeout(self) -> float:
        """Seconds one endpoint is given to answer."""
        return self._cluster.timeout

    def headers(self) -> dict[str, str]:
        """Headers of a request (the auth token), authenticating first if needed."""
        cluster = self._cluster
        if cluster.username is not None and cluster.token is None:
            self._authenticate()
        return cluster.headers()

    def _authenticate(self) -> None:
        cluster = self._cluster
        reply = self._post_any(cluster.auth_request(), {})
        cluster.token = str(reply.get("token", ""))

    def post(self, request: Request) -> dict[str, Any]:
        """Perform ``request``; its reply.  EtcdUnavailable if no endpoint
        answered, EtcdAuthError if etcd refused us, EtcdError otherwise."""
        try:
            return self._post_any(request, self.headers())
        except EtcdError as exc:
            if not _expired(exc):
                raise
            self._cluster.token = None
            return self._post_any(request, self.headers())

    def _post_any(self, request: Request, headers: dict[str, str]) -> dict[str, Any]:
        cluster, errors = self._cluster, []
        for index in cluster.order():
            url = cluster.urls[index] + request.path
            try:
                response = self._http.post(url, json=request.body, headers=headers)
                reply = _decode(response.status_code, response.content)
            except self._httpx.TransportError as exc:
                errors.append(f"{cluster.urls[index]}: {type(exc).__name__}: {exc}")
                continue
            except EtcdUnavailable as exc:
                errors.append(f"{cluster.urls[index]}: {exc}")
                continue
            cluster.current = index
            return reply
        raise cluster.unavailable(errors)

    def watch_stream(self, body: dict[str, Any]) -> tuple[Any, Any]:
        """Open a watch on the first endpoint that answers: (an httpx client
        of its own, the streaming response); the caller closes both."""
        cluster, errors = self._cluster, []
        headers = self.headers()
        for index in cluster.order():
            http = self._httpx.Client(timeout=self._httpx.Timeout(cluster.timeout, read=None))
            try:
                request = http.build_request("POST", cluster.urls[index] + "/v3/watch",
                                             json=body, headers=headers)
                response = http.send(request, stream=True)
                if response.status_code != 200:
                    response.read()
                    _decode(response.status_code, response.content)
                return http, response
            except (self._httpx.TransportError, EtcdUnavailable) as exc:
                http.close()
                errors.append(f"{cluster.urls[index]}: {type(exc).__name__}: {exc}")
            except BaseException:
                http.close()
                raise
        raise cluster.unavailable(errors)

    def close(self) -> None:
        """Close the connections."""
        self._http.close()


class AsyncEtcdClient:
    """An asyncio client of an etcd cluster's JSON gateway."""

    def __init__(self, endpoints: str | Sequence[str], *, username: str | None = None,
                 password: str | None = None, timeout: float = 2.0) -> None:
        """As ``EtcdClient``."""
        self._httpx = import_httpx()
        self._cluster = _Cluster(endpoints, username, password, timeout)
        self._http: Any = None  # made in the running loop, on first use
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def endpoints(self) -> list[str]:
        """The endpoints' base URLs."""
        return list(self._cluster.urls)

    def _client(self) -> Any:
        # An httpx.AsyncClient belongs to the loop it first ran in: a new
        # one for each loop the membership is used from.
        loop = asyncio.get_running_loop()
        if self._http is None or self._loop is not loop:
            self._http = self._httpx.AsyncClient(timeout=self._cluster.timeout)
            self._loop = loop
        return self._http

    async def headers(self) -> dict[str, str]:
        """As ``EtcdClient.headers``."""
        cluster = self._cluster
        if cluster.username is not None and cluster.token is None:
            reply = await self._post_any(cluster.auth_request(), {})
            cluster.token = str(reply.get("token", ""))
        return cluster.headers()

    async def post(self, request: Request) -> dict[str, Any]:
        """As ``EtcdClient.post``."""
        try:
            return await self._post_any(request, await self.headers())
        except EtcdError as exc:
            if not _expired(exc):
                raise
            self._cluster.token = None
            return await self._post_any(request, await self.headers())

    async def _post_any(self, request: Request, headers: dict[str, str]) -> dict[str, Any]:
        cluster, errors = self._cluster, []
        for index in cluster.order():
            url = cluster.urls[index] + request.path
            try:
                response = await self._client().post(url, json=request.body, headers=headers)
                reply = _decode(response.status_code, response.content)
            except self._httpx.TransportError as exc:
                errors.append(f"{cluster.urls[index]}: {type(exc).__name__}: {exc}")
                continue
            except EtcdUnavailable as exc:
                errors.append(f"{cluster.urls[index]}: {exc}")
                continue
            cluster.current = index
            return reply
        raise cluster.unavailable(errors)

    async def watch_stream(self, body: dict[str, Any]) -> tuple[Any, Any]:
        """As ``EtcdClient.watch_stream``, with an ``httpx.AsyncClient``."""
        cluster, errors = self._cluster, []
        headers = await self.headers()
        for index in cluster.order():
            http = self._httpx.AsyncClient(
                timeout=self._httpx.Timeout(cluster.timeout, read=None))
            try:
                request = http.build_request("POST", cluster.urls[index] + "/v3/watch",
                                             json=body, headers=headers)
                response = await http.send(request, stream=True)
                if response.status_code != 200:
                    await response.aread()
                    _decode(response.status_code, response.content)
                return http, response
            except (self._httpx.TransportError, EtcdUnavailable) as exc:
                await http.aclose()
                errors.append(f"{cluster.urls[index]}: {type(exc).__name__}: {exc}")
            except BaseException:
                await http.aclose()
                raise
        raise cluster.unavailable(errors)

    async def aclose(self) -> None:
        """Close the connections."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None
