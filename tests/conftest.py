"""Shared fixtures (HTTP backends, redis-servers), and the hypothesis
profiles: "ci" (reproducible, bounded) when CI is set, else "dev".

Helpers that are not fixtures live in the ``_support`` package beside this
file (this folder is on ``sys.path`` while the tests run).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest
from hypothesis import settings

from _support.http_backends import Backend
from _support.redis_server import RedisServer, running_server

settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    print_blob=True,
    max_examples=25,
)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture
def backends() -> Iterator[Callable[..., Backend]]:
    """A factory of HTTP Backends on 127.0.0.1, all stopped at teardown."""
    made: list[Backend] = []

    def make(code: int = 200) -> Backend:
        backend = Backend(code)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.stop()


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    """One redis-server for a module's tests that do not restart or pause it
    (skips without redis-server)."""
    yield from running_server()


@pytest.fixture
def own_server() -> Iterator[RedisServer]:
    """A redis-server of the test's own, which it may stop, restart or pause."""
    yield from running_server()
