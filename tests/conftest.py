"""Which chash the tests import, shared fixtures (HTTP backends), and the
hypothesis profiles: "ci" (reproducible, bounded) when CI is set, else
"dev".

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

from _support.http_backends import Backend  # noqa: E402

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


def pytest_addoption(parser: pytest.Parser) -> None:
    """The randomized partition run's replay and length
    (tests/partitions/test_randomized.py)."""
    group = parser.getgroup("chash partitions")
    group.addoption("--partitions-seed", type=int, default=None, metavar="SEED",
                    help="replay the randomized partition run with this seed (it prints the "
                         "seed of every run; default: a new one)")
    group.addoption("--partitions-seconds", type=float, default=60.0, metavar="S",
                    help="how long the randomized partition run lasts, half with each store "
                         "(default 60)")


def _skipped(config: pytest.Config) -> list[pytest.TestReport]:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    return list(reporter.stats.get("skipped", [])) if reporter is not None else []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """In CI (``CI=true``) every test must run: a skip (a program or an
    extra missing, which outside CI only skips) fails the run."""
    if os.environ.get("CI") == "true" and exitstatus == pytest.ExitCode.OK \
            and _skipped(session.config):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    """Say why a CI run with skips failed, naming each skip's reason."""
    skipped = _skipped(config)
    if os.environ.get("CI") != "true" or not skipped:
        return
    terminalreporter.section("skipped in CI: every test must run here", red=True)
    for report in skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        terminalreporter.write_line(f"{report.nodeid}: {reason}")
