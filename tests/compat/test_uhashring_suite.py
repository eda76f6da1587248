"""uhashring's own test suite, run with ``uhashring`` resolved to
chash.compat.uhashring.

The suite is not kept here: the test downloads uhashring's sdist from PyPI
(``uhashring==2.1``, the last release that ships its ``tests/``; they are
the repository's tests of today but for ``test_distribution``, which there
draws its keys with ``randint`` and here with a seeded ``random``), copies
its ``tests/`` (not its package) into a temporary folder, and runs pytest
on them in a child interpreter whose ``uhashring`` is a two-line shim over
chash.compat.uhashring.

What their tests reach beyond the public API, and how it is served here:
``ring._keys``, ``ring._ring``, ``ring._nodes`` (properties of HashRing, as
in uhashring), ``ring.runtime._replicas`` (``runtime`` is a read-only view
of those internals), ``ring.hashi`` (an attribute, as in uhashring), and
the aliases compared by identity of their bound methods (``add_node`` and
``__setitem__``, ``get_node_instance`` and ``__getitem__``, which share one
function each).  Their ``test_range`` is marked by them to run only on
Python 2, and their ketama-compatibility tests return early without the
``ketama`` C module (never on PyPI): those count as their suite's own skip
and passes, the same as with uhashring itself.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import chash
from _support.ci import missing

#: The release whose sdist holds uhashring's tests.
SUITE_RELEASE = "uhashring==2.1"
#: Their test functions: 17 in test_implementation.py (test_range runs on
#: Python 2 only), 2 ketama-compatibility, 1 distribution, 1 monkey.
EXPECTED_PASSED = 20

SHIM = '''"""uhashring, resolved to chash.compat.uhashring for uhashring's tests."""
from chash.compat.uhashring import HashRing, monkey  # noqa: F401
'''

DRIVER = '''import random, sys
import pytest
import uhashring
import chash.compat.uhashring as ours
assert uhashring.HashRing is ours.HashRing and uhashring.monkey is ours.monkey, uhashring.__file__
random.seed(20260101)
sys.exit(pytest.main(sys.argv[1:]))
'''


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("uhashring-suite")
    download = subprocess.run(
        [sys.executable, "-m", "pip", "download", SUITE_RELEASE, "--no-deps", "--no-binary", ":all:",
         "--disable-pip-version-check", "-q", "-d", str(root / "sdist")],
        capture_output=True, text=True, timeout=300, check=False)
    if download.returncode != 0:
        missing(f"pip could not download {SUITE_RELEASE}'s sdist from PyPI: {download.stderr[-500:]}")
    (sdist,) = (root / "sdist").glob("uhashring-*.tar.gz")
    tests = root / "run" / "tests"
    tests.mkdir(parents=True)
    with tarfile.open(sdist) as archive:
        for member in archive.getmembers():
            parts = Path(member.name).parts
            if len(parts) == 3 and parts[1] == "tests" and member.isfile() and parts[2].endswith(".py"):
                source = archive.extractfile(member)
                assert source is not None
                (tests / parts[2]).write_bytes(source.read())
    assert (tests / "test_implementation.py").is_file(), sorted(p.name for p in tests.iterdir())
    shim = root / "shim" / "uhashring"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(SHIM)
    (root / "driver.py").write_text(DRIVER)
    (root / "run" / "pytest.ini").write_text("[pytest]\n")
    return root


def test_uhashrings_own_suite_passes_on_chash(suite: Path) -> None:
    try:
        import memcache  # noqa: F401
    except ImportError:
        missing("uhashring's test_monkey needs python-memcached (the test extra)")
    source_root = Path(chash.__file__).resolve().parents[1]
    run = subprocess.run(
        [sys.executable, str(suite / "driver.py"), "-q", "-p", "no:cacheprovider", "-rs", str(suite / "run" / "tests")],
        cwd=suite / "run", capture_output=True, text=True, timeout=300, check=False,
        env={"PYTHONPATH": f"{suite / 'shim'}:{source_root}", "PATH": "/usr/bin:/bin", "HOME": str(suite),
             # A sanitized build's runtime and options (the ASan suite) go along.
             **{key: value for key, value in os.environ.items()
                if key == "LD_PRELOAD" or key.endswith("SAN_OPTIONS")}})
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    summary = run.stdout.strip().splitlines()[-1]
    passed = int(re.search(r"(\d+) passed", summary).group(1))  # type: ignore[union-attr]
    assert passed == EXPECTED_PASSED, summary
    assert "failed" not in summary and "error" not in summary, summary
