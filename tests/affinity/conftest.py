"""Fixtures of the chash.affinity tests: a ring of eight engines."""
from __future__ import annotations

import pytest

from chash import ConsistentHashRouter


@pytest.fixture
def ring() -> ConsistentHashRouter:
    """A default ring holding w0 .. w7, added in that order."""
    router = ConsistentHashRouter()
    for j in range(8):
        router.add_service_node(f"w{j}")
    return router
