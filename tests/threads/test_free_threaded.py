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

ROOT = Path(__file__).resolve().parents[2]


def test_import_leaves_the_gil_as_it_was() -> None:
    code = ("import sys, chash, chash._chash\n"
            "print(sys._is_gil_enabled() if hasattr(sys, '_is_gil_enabled') else True)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTHON_GIL", None)
    run = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", code],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    assert run.stdout.strip() == str(not free_threaded)
