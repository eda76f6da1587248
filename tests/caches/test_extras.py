"""Without their library, the cache clients' packages say which extra installs it."""
from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(("library", "package", "message"), [
    ("pymemcache", "chash.pymemcache", "chash.pymemcache needs pymemcache: pip install 'chash-router[pymemcache]'"),
    ("redis", "chash.redis", "chash.redis needs redis-py: pip install 'chash-router[redis]'"),
])
def test_a_missing_library_names_the_extra(library: str, package: str, message: str) -> None:
    code = (f"import sys; sys.modules[{library!r}] = None\n"
            "try:\n"
            f"    import {package}\n"
            "except ImportError as exc:\n"
            "    print(type(exc).__name__, exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         check=True).stdout.strip()
    assert out == f"MissingExtra {message}"
