"""Fixtures of the gateway tests (tests/gateway/).

The gateway tests run their own event loops (``_support.waiting.run``), so
servers are started inside each test; the helpers that do so live in
``_support.gateways``, ``_support.echo_backends`` and
``_support.raw_backends``.  What is left for fixtures here is the
environment of the ``chash`` subprocesses these tests start.
"""

from __future__ import annotations

import os

import pytest

from _support.gateways import CHASH_ROOT


@pytest.fixture
def chash_env() -> dict[str, str]:
    """The environment for a Python subprocess that imports chash: this
    process's, with the chash under test (``CHASH_ROOT``) on PYTHONPATH."""
    return {**os.environ, "PYTHONPATH": str(CHASH_ROOT)}
