"""The sharded cache clients' tests (chash.pymemcache, chash.redis): each
test starts its own memcached, redis-server and nutcracker processes on
ports the OS picked (tests/_support/compat_programs.py, redis_server.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from _support.compat_programs import nutcracker, require
from _support.redis_server import RedisServer, redis_server_path


@pytest.fixture(scope="module")
def trio() -> Iterator[list[RedisServer]]:
    """Three redis-servers for the module, emptied before each test that
    asks for ``servers``."""
    redis_server_path()
    servers = [RedisServer() for _ in range(3)]
    try:
        for server in servers:
            server.start()
        yield servers
    finally:
        for server in servers:
            server.close()


@pytest.fixture
def servers(trio: list[RedisServer]) -> list[RedisServer]:
    """The three redis-servers, running and empty."""
    for server in trio:
        server.start()
        client = server.connect()
        client.flushall()
        client.close()
    return trio


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[Callable[[str, int], int]]:
    """``start(yaml_text, listen) -> listen``: a nutcracker of the pool in
    ``yaml_text``, listening on ``listen``, stopped after the test."""
    require("nutcracker")
    with contextlib.ExitStack() as stack:
        def start(yaml_text: str, listen: int) -> int:
            workdir = tmp_path / f"nutcracker-{listen}"
            workdir.mkdir()
            stack.enter_context(nutcracker(yaml_text, listen, workdir))
            return listen
        yield start

