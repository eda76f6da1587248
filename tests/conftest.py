"""Which chash the tests import, shared fixtures (HTTP backends), the
hypothesis profiles: "ci" (reproducible, bounded) in CI, else "dev", and
the CI guard (a skip, xfail or xpass fails a run in CI); "in CI" is
``_support.ci.in_ci()``.

The suite tests whichever chash is installed: an editable install of this
checkout, or a wheel (from an unpacked sdist, say). ``python -m pytest`` puts
the current folder first on ``sys.path``, so from a source folder whose C
extension is not built in place, ``import chash`` would find that folder and
fail; then the folder is taken off ``sys.path`` (and ``PYTHONSAFEPATH`` keeps
it off for the Python subprocesses the tests start), and the installed chash
is imported. With nothing installed either, chash's own ImportError says what
to run.

Helpers that are not fixtures live in the ``_support`` package beside this
file (this folder is on ``sys.path`` while the tests run).
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings


def _prefer_installed_chash() -> None:
    source = Path(__file__).resolve().parent.parent
    package = source / "chash"
    built = any(path.name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
                for path in package.glob("_chash*"))
    if built or not package.is_dir():
        return

    def is_source(entry: str) -> bool:
        return Path(entry or os.curdir).resolve() == source

    kept = [entry for entry in sys.path if not is_source(entry)]
    saved, sys.path[:] = sys.path[:], kept
    if importlib.util.find_spec("chash") is None:
        sys.path[:] = saved
        return
    os.environ["PYTHONSAFEPATH"] = "1"


# Before anything imports chash (the _support helpers do).
_prefer_installed_chash()

from _support import ci  # noqa: E402
from _support.http_backends import Backend  # noqa: E402

settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    print_blob=True,
    max_examples=25,
)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if ci.in_ci() else "dev")

# The CI guard: in CI a skip, an xfail or an xpass fails the run.
pytest_sessionfinish = ci.pytest_sessionfinish
pytest_terminal_summary = ci.pytest_terminal_summary


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


def pytest_addoption(parser: pytest.Parser) -> None:
    """The randomized partition run's seeds and length
    (tests/partitions/test_randomized.py)."""
    group = parser.getgroup("chash partitions")
    group.addoption("--partitions-seed", type=int, action="append", default=None,
                    metavar="SEED",
                    help="run the randomized partition run with this seed (repeatable), to "
                         "replay a run: every run prints its seed (default: the test's fixed "
                         "seeds)")
    group.addoption("--partitions-fresh", type=int, default=0, metavar="N",
                    help="run the randomized partition run with N fresh random seeds instead "
                         "of its fixed ones (each printed)")
    group.addoption("--partitions-rounds", type=int, default=4, metavar="N",
                    help="rounds (a fault, changes, the heal) of the randomized partition run "
                         "with each store, for each seed (default 4)")
