"""Fixtures of the partition scenarios: a network of namespaces made for
each test and removed after it, whatever fails (tests/_support/netns.py).

Needs root and ``ip netns``: without them the scenarios skip, saying why
(in CI they fail instead).
"""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from _support.netns import Network, require_netns


@pytest.fixture
def network() -> Iterator[Network]:
    """A fresh network; at the end every process it started is killed and
    every namespace it made is gone (checked)."""
    require_netns()
    made = Network()
    try:
        yield made
    finally:
        made.close()
        assert made.namespaces() == [], f"namespaces left: {made.namespaces()}"
