"""Fixtures of the chash.metrics tests."""
from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def prom() -> Any:
    """The prometheus_client module (skips without the metrics extra)."""
    return pytest.importorskip("prometheus_client", reason="the metrics extra is not installed")
