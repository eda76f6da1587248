"""Fixtures of the chash.simulate tests: one simulation shared by a module."""
from __future__ import annotations

from typing import Any

import pytest

from chash.simulate import SimulationConfig, simulate


@pytest.fixture(scope="module")
def result(request: pytest.FixtureRequest) -> dict[str, Any]:
    """One ``simulate()`` of the requesting module's ``KEYS`` keys (default
    settings otherwise), computed once for all its tests."""
    keys: int = request.module.KEYS
    return simulate(SimulationConfig(keys=keys))
