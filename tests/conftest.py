"""Which chash the tests import, and the hypothesis profiles.

The suite tests whichever chash is installed: an editable install of this
checkout, or a wheel (from an unpacked sdist, say). ``python -m pytest`` puts
the current folder first on ``sys.path``, so from a source folder whose C
extension is not built in place, ``import chash`` would find that folder and
fail; then the folder is taken off ``sys.path`` (and ``PYTHONSAFEPATH`` keeps
it off for the Python subprocesses the tests start), and the installed chash
is imported. With nothing installed either, chash's own ImportError says what
to run.

Hypothesis profiles: "ci" (reproducible, bounded) when CI is set, else "dev".
"""
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

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


_prefer_installed_chash()

settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    print_blob=True,
    max_examples=25,
)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
