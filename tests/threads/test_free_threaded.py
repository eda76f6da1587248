"""What chash tells a free-threaded interpreter: importing it leaves the GIL
as it was (off on a free-threaded build, where a module that does not
declare itself safe without the GIL turns it back on with a
RuntimeWarning), in a fresh interpreter so no other import interferes."""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import chash


def test_import_leaves_the_gil_as_it_was(tmp_path: Path) -> None:
    code = ("import sys, chash, chash._chash\n"
            "print(sys._is_gil_enabled() if hasattr(sys, '_is_gil_enabled') else True)\n")
    # The chash these tests import (a checkout's, or an installed wheel's
    # beside an unpacked sdist), from a directory that shadows neither.
    source = Path(chash.__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(source))
    env.pop("PYTHON_GIL", None)
    run = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", code],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr
    free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    assert run.stdout.strip() == str(not free_threaded)
