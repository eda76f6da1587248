"""Fixtures of the chash.health tests: a checker of either runner, driven
round by round, and the Python examples of docs/health.md."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from _support.health_checks import HAVE_AIOHTTP, AsyncDriver, Driver, SyncDriver

DOCS = Path(__file__).resolve().parent.parent.parent / "docs" / "health.md"


@pytest.fixture(params=[
    SyncDriver,
    pytest.param(AsyncDriver, marks=pytest.mark.skipif(
        not HAVE_AIOHTTP, reason="the async runner needs aiohttp (chash-router[async])")),
], ids=["thread", "asyncio"])
def make_driver(request: pytest.FixtureRequest) -> Iterator[Callable[..., Driver]]:
    """Build a checker of either runner; closed at teardown."""
    made: list[Driver] = []

    def make(router: Any, **kwargs: Any) -> Driver:
        driver = request.param(router, **kwargs)
        made.append(driver)
        return driver

    yield make
    for driver in made:
        driver.close()


@pytest.fixture
def health_doc_examples() -> list[str]:
    """The ```python blocks of docs/health.md, in order."""
    text = DOCS.read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
