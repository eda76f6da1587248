"""Fixtures of the membership tests: redis-servers, clients of them, and
gateway processes with either driver.

The servers and processes are real (tests/_support/redis_server.py,
tests/_support/membership_procs.py); each fixture stops what it started.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _support.membership_procs import Gateways, driver_factory
from _support.redis_server import RedisServer, emptied_client, running_server


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    """One redis-server for a module's tests that do not restart or pause it
    (skips without redis-server)."""
    yield from running_server()


@pytest.fixture
def own_server() -> Iterator[RedisServer]:
    """A redis-server of the test's own, which it may stop, restart or pause."""
    yield from running_server()


@pytest.fixture
def client(server: RedisServer) -> Iterator[Any]:
    """A ``redis.Redis`` of the shared server, which starts empty; replies
    are bytes, and the client gives up on a dead server within seconds."""
    pytest.importorskip("redis", reason="redis-py not installed: pip install 'chash-router[redis]'")
    yield from emptied_client(server, **server.client_kwargs())


@pytest.fixture
def text_client(server: RedisServer) -> Iterator[Any]:
    """As ``client``, with replies decoded to str and a patient timeout
    (for tests that compare what they read with what the gateways report)."""
    pytest.importorskip("redis", reason="redis-py not installed: pip install 'chash-router[redis]'")
    yield from emptied_client(server, decode_responses=True, socket_timeout=10.0)


@pytest.fixture(params=["sync", "async"])
def gateways(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Gateways]:
    """Start gateway processes (``start(port, count, options=...)``) with
    the driver of the parameter; quit at teardown, checking that no lookup
    failed in any of them."""
    yield from driver_factory(request.param, tmp_path)
