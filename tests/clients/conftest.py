"""Fixtures of the sticky-client tests (tests/clients/): three echo
backends for the whole folder, reset before each test, and a fresh ring of
them per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import chash
from _support.threaded_backends import EchoFarm


@pytest.fixture(scope="session")
def farm() -> Iterator[EchoFarm]:
    farm = EchoFarm(3)
    try:
        yield farm
    finally:
        farm.close()


@pytest.fixture
def echo(farm: EchoFarm) -> EchoFarm:
    """The backends, every one up and answering at once."""
    farm.reset()
    return farm


@pytest.fixture
def ring(echo: EchoFarm) -> chash.ConsistentHashRouter:
    """A ring of the three backends, node id = address."""
    router = chash.ConsistentHashRouter()
    router.add_service_nodes(echo.addresses)
    return router
