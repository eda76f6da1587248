"""The suite's CI guard (tests/_support/ci.py), run on planted tests in a
pytest of their own: in CI (``CI=true``, and only that) a skip, an xfail or
an xpass fails the run and the summary names each; outside CI they pass it.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

PLANTED = {
    "passes": "def test_passes():\n    assert True\n",
    "skips": "import pytest\n\n\ndef test_skips():\n    pytest.skip('no frobnicator here')\n",
    "skips_module": "import pytest\n\npytest.importorskip('no_such_module_at_all')\n\n\n"
                    "def test_never():\n    pass\n",
    "xfails": "import pytest\n\n\n@pytest.mark.xfail(reason='a known bug')\n"
              "def test_xfails():\n    assert False\n",
    "xpasses": "import pytest\n\n\n@pytest.mark.xfail(reason='fixed by now', strict=False)\n"
               "def test_xpasses():\n    assert True\n",
}


def run(tmp_path: Path, planted: str, ci: str | None) -> subprocess.CompletedProcess[str]:
    """pytest over the planted test file beside a passing one, with the
    guard as its only plugin and ``CI`` set to ``ci`` (None: unset)."""
    for name in {"passes", planted}:
        (tmp_path / f"test_{name}.py").write_text(PLANTED[name], encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    env = {name: value for name, value in os.environ.items() if name != "CI"}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "-p", "_support.ci", "-rN", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)


@pytest.mark.parametrize("planted,outcome,reason", [
    ("skips", "skipped", "no frobnicator here"),
    ("skips_module", "skipped", "no_such_module_at_all"),
    ("xfails", "xfailed", "a known bug"),
    ("xpasses", "xpassed", "fixed by now"),
])
def test_in_ci_a_skip_xfail_or_xpass_fails_the_run(tmp_path: Path, planted: str, outcome: str,
                                                   reason: str) -> None:
    done = run(tmp_path, planted, "true")
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr
    assert "skipped, xfailed or xpassed in CI" in done.stdout
    [line] = [line for line in done.stdout.splitlines() if line.startswith(f"{outcome} ")]
    assert f"test_{planted}.py" in line and reason in line, line


@pytest.mark.parametrize("planted", ["passes", "skips", "skips_module", "xfails", "xpasses"])
@pytest.mark.parametrize("ci", [None, "1"])
def test_outside_ci_they_pass_the_run(tmp_path: Path, planted: str, ci: str | None) -> None:
    # Only CI=true is CI: CI=1 is not.
    done = run(tmp_path, planted, ci)
    assert done.returncode == pytest.ExitCode.OK, done.stdout + done.stderr
    assert "in CI" not in done.stdout


def test_in_ci_a_run_that_only_passes_passes(tmp_path: Path) -> None:
    done = run(tmp_path, "passes", "true")
    assert done.returncode == pytest.ExitCode.OK, done.stdout + done.stderr
    assert "1 passed" in done.stdout and "in CI" not in done.stdout


def test_an_xfail_that_passes_fails_the_suite_anywhere(pytestconfig: pytest.Config) -> None:
    # pyproject.toml: an xfail mark without strict= is strict.
    assert pytestconfig.getini("xfail_strict") is True
