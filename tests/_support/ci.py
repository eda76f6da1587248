"""What "in CI" means for the tests, written once, and the CI guard.

In CI means ``CI=true`` in the environment (as CI services set it), and
nothing else: ``CI=1`` or ``CI=yes`` is not CI.
In CI every test must run and pass as written:

- ``missing(why)``: a program, extra or privilege a test needs is missing:
  the test skips outside CI and fails in CI, saying what is missing;
- the hypothesis profile is "ci" (derandomized, bounded) in CI, else "dev"
  (``tests/conftest.py``); the fuzz budgets likewise
  (``tests/ring/test_fuzz_binding.py``);
- the guard (``pytest_sessionfinish`` and ``pytest_terminal_summary``,
  hooks that ``tests/conftest.py`` takes in): a run in CI with a skipped,
  xfailed or xpassed test fails, and the summary names each with its
  reason.  ``xfail_strict`` (pyproject.toml) already fails an unexpected
  pass of a strict mark; the guard also catches ``strict=False`` marks and
  expected failures, which would otherwise pass a run quietly.
"""
from __future__ import annotations

import os
from typing import NoReturn

import pytest

#: The outcomes that fail a run in CI (the terminal reporter's stats keys).
NOT_RUN_AS_WRITTEN = ("skipped", "xfailed", "xpassed")


def in_ci() -> bool:
    """Whether the tests run in CI: ``CI=true`` in the environment."""
    return os.environ.get("CI") == "true"


def missing(why: str) -> NoReturn:
    """Skip the calling test because of ``why`` (what is missing and how to
    get it); in CI fail it instead."""
    if in_ci():
        pytest.fail(why)
    pytest.skip(why)


def not_run_as_written(config: pytest.Config) -> list[tuple[str, pytest.TestReport]]:
    """Every (outcome, report) of this run in ``NOT_RUN_AS_WRITTEN``."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return []
    return [(outcome, report) for outcome in NOT_RUN_AS_WRITTEN
            for report in reporter.stats.get(outcome, [])]


def _reason(report: pytest.TestReport) -> str:
    wasxfail = getattr(report, "wasxfail", None)
    if wasxfail is not None:
        return str(wasxfail) or "(no reason given)"
    longrepr = report.longrepr
    return str(longrepr[2] if isinstance(longrepr, tuple) else longrepr)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """In CI a run with a skip, an xfail or an xpass fails."""
    if in_ci() and exitstatus == pytest.ExitCode.OK and not_run_as_written(session.config):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    """Say why a CI run failed for skips, xfails or xpasses: each one and
    its reason."""
    found = not_run_as_written(config)
    if not in_ci() or not found:
        return
    terminalreporter.section("skipped, xfailed or xpassed in CI: every test must run and pass "
                             "here", red=True)
    for outcome, report in found:
        terminalreporter.write_line(f"{outcome} {report.nodeid}: {_reason(report)}")
