"""A gateway in front of echo backends, and the requests the gateway tests
send through it (aiohttp; import after ``pytest.importorskip("aiohttp")``).

- ``cluster(names, **options)``: echo backends named by the letters of
  ``names``, a ``Gateway`` in front of them and a client session, all
  stopped on exit; ``options`` are ``GatewayConfig`` settings or
  ``Gateway`` keywords;
- ``get``: one request through the gateway, its status and its body
  (decoded JSON when it is JSON);
- ``served_by``: which backend answered each of many users at once;
- ``owner_of``: the node the gateway's ring gives a key;
- ``raw``, ``split``: bytes sent on a connection of their own, what comes
  back, and an answer split into status, fields and body;
- ``CHASH_ROOT``: the folder of the chash under test, for the
  ``PYTHONPATH`` of subprocesses.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

import chash
from _support.echo_backends import EchoBackend
from chash.gateway import Gateway, GatewayConfig

# Where the chash under test comes from (the checkout, or site-packages).
CHASH_ROOT = Path(chash.__file__).resolve().parent.parent


@contextlib.asynccontextmanager
async def cluster(names: str = "abc", **options: Any,
                  ) -> AsyncIterator[tuple[Gateway, dict[str, EchoBackend], Any]]:
    """Backends named by the letters of ``names``, a gateway in front of
    them (health rounds only on demand unless ``health_interval`` is given),
    and a client session."""
    backends = {name: await EchoBackend(name).start() for name in names}
    options.setdefault("health_interval", 3600.0)
    options.setdefault("admin_listen", ("127.0.0.1", 0))
    settings = {f.name for f in dataclasses.fields(GatewayConfig)}
    config = GatewayConfig(**{k: v for k, v in options.items() if k in settings})
    gateway = Gateway({b.name: b.address for b in backends.values()}, config,
                      **{k: v for k, v in options.items() if k not in settings})
    try:
        await gateway.start()
        async with aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=30)) as session:
            yield gateway, backends, session
    finally:
        await gateway.stop()
        for backend in backends.values():
            await backend.stop()


async def get(session: Any, gateway: Gateway, user: str | None, path: str = "/page",
              method: str = "GET", **kwargs: Any) -> tuple[int, Any]:
    """One request through ``gateway`` with ``X-User-Id: user`` (none if
    None): its status and body (parsed JSON, else text)."""
    headers = kwargs.pop("headers", {})
    if user is not None:
        headers["X-User-Id"] = user
    async with session.request(method, gateway.url + path, headers=headers, **kwargs) as resp:
        body = await resp.read()
        try:
            return resp.status, json.loads(body)
        except ValueError:
            return resp.status, body.decode()


async def served_by(session: Any, gateway: Gateway, users: list[str]) -> dict[str, str]:
    """Send one request per user, all at once; every one must succeed."""
    answers = await asyncio.gather(*(get(session, gateway, user) for user in users))
    assert [status for status, _ in answers] == [200] * len(users), answers
    return {user: body["backend"] for user, (_, body) in zip(users, answers, strict=True)}


def owner_of(gateway: Gateway, key: str) -> str:
    """The node ``gateway``'s ring routes ``key`` to."""
    node = gateway.router.get_target_node(key)
    assert node is not None
    return node


async def raw(url: str, data: bytes, read_until_close: bool = True,
              timeout: float = 20.0) -> bytes:
    """Send ``data`` on a new connection; everything answered until the
    gateway closes it (or the first answer's head, without ``read_until_close``)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(data)
        await writer.drain()
        if read_until_close:
            return await asyncio.wait_for(reader.read(), timeout)
        return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    finally:
        writer.close()


def split(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    """An answer's status, its header fields (lower-case names) and the rest."""
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body
