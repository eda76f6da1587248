"""``chash gateway`` as a real process, and what the tests ask of one
(aiohttp; import after ``pytest.importorskip("aiohttp")``).

- ``gateway_process(*argv)``: ``python -m chash gateway ARGV`` on a free
  port, yielding a ``Running`` (its URL, its admin URL or None, the
  process); at the end it is stopped with SIGTERM and must exit 0 (unless
  the test killed it);
- ``route``: the backend each key reaches through a gateway;
- ``status``: a gateway's ``/-/status`` page.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

import aiohttp

from _support.gateways import CHASH_ROOT

__all__ = ["Running", "gateway_process", "route", "status"]


class Running(NamedTuple):
    """A started gateway process."""

    url: str
    admin: str | None
    process: asyncio.subprocess.Process


@asynccontextmanager
async def gateway_process(*argv: str) -> AsyncIterator[Running]:
    """``chash gateway ARGV`` on a free port, until the block ends."""
    env = {**os.environ, "PYTHONPATH": str(CHASH_ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "chash", "gateway", "--listen", "127.0.0.1:0",
        "--log-level", "warning", "--duration", "120", *argv,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        lines = [(await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
                 for _ in range(3)]
        assert re.match(r"chash gateway listening on https?://127\.0\.0\.1:", lines[0]), lines
        url = lines[0].split()[4]
        admin = re.search(r"status (http://\S+)/-/status", lines[2])
        yield Running(url, admin.group(1) if admin else None, proc)
    finally:
        if proc.returncode is None:
            proc.terminate()
        _, err = await proc.communicate()
        if proc.returncode != -signal.SIGKILL:  # killed by the test: no exit status
            assert proc.returncode == 0, err.decode()[-2000:]


async def route(url: str, keys: list[str], fresh: bool = True) -> dict[str, str]:
    """The backend each key reaches (a new connection per request if ``fresh``)."""
    seen = {}
    connector = aiohttp.TCPConnector(force_close=fresh)
    async with aiohttp.ClientSession(connector=connector) as session:
        for key in keys:
            async with session.get(f"{url}/x", headers={"X-User-Id": key}) as resp:
                assert resp.status == 200
                seen[key] = (await resp.json())["backend"]
    return seen


async def status(admin: str) -> dict[str, Any]:
    """The gateway's ``/-/status`` page."""
    async with aiohttp.ClientSession() as session, session.get(f"{admin}/-/status") as resp:
        page: dict[str, Any] = json.loads(await resp.text())
        return page
