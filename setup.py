"""Declares the C extension; all metadata lives in pyproject.toml.

Build switches (environment variables, read at build time):
  CHASH_SANITIZE=1  AddressSanitizer + UndefinedBehaviorSanitizer, -O1 -g
  CHASH_DEBUG=1     -O0 -g with asserts
  CHASH_WERROR=1    warnings are errors
The default (release) build carries no debug info: -g0, and debug sections
stripped at link time on ELF platforms; the sanitizer and debug builds keep -g.
"""
import os
import re
import sys
import sysconfig
from glob import glob

import setuptools
from setuptools import Extension, setup
from setuptools.command.sdist import sdist

# pyproject.toml states its licence as an SPDX expression (PEP 639), which
# setuptools reads from 77.0 on; older ones reject the file with a schema dump.
# Build frontends (pip, build) fetch a recent setuptools in an isolated
# environment; only a direct `setup.py ...` or --no-build-isolation uses the
# installed one, so say what to do instead.
if int(setuptools.__version__.split(".")[0]) < 77:
    sys.exit(
        f"chash: setuptools {setuptools.__version__} is too old to read pyproject.toml "
        "(licence as an SPDX expression needs setuptools>=77).\n"
        "Build with `pip install .` (it fetches a recent setuptools), or first run "
        "`pip install -U 'setuptools>=77'`."
    )


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


compile_args = ["-std=c11", "-Wall", "-Wextra", "-Wconversion", "-Wshadow"]
link_args: list[str] = []
undef: list[str] = []
if _flag("CHASH_SANITIZE"):
    sanitize = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
    compile_args += sanitize + ["-O1", "-g"]
    link_args += sanitize
elif _flag("CHASH_DEBUG"):
    compile_args += ["-O0", "-g"]
    undef.append("NDEBUG")
else:
    # Release: no debug info; -g0 overrides the -g in Python's own CFLAGS.
    compile_args += ["-O3", "-g0"]
    if sys.platform.startswith("linux"):
        link_args.append("-Wl,--strip-debug")
if _flag("CHASH_WERROR"):
    compile_args.append("-Werror")
if sysconfig.get_platform().startswith("win"):
    compile_args, link_args = [], []

# What a working tree collects by building and testing in place. MANIFEST.in
# grafts whole folders (so new files ship by themselves) and cannot exclude
# these without a "no files matching" warning from every clean build; the
# sdist drops them here instead.
_ARTEFACTS = re.compile(
    r"(^|/)(__pycache__|\.hypothesis|\.pytest_cache|\.mypy_cache|build)/"
    r"|\.(py[cod]|so|pyd|o|a|tmp)$")


class Sdist(sdist):
    """The sdist command, leaving build and test artefacts out."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        kept = [f for f in files if not _ARTEFACTS.search(f.replace(os.sep, "/"))]
        super().make_release_tree(base_dir, kept)


setup(
    cmdclass={"sdist": Sdist},
    ext_modules=[
        Extension(
            "chash._chash",
            sources=sorted(glob("csrc/*.c")),
            include_dirs=["csrc"],
            depends=sorted(glob("csrc/*.h")),
            extra_compile_args=compile_args,
            extra_link_args=link_args,
            undef_macros=undef,
        )
    ]
)
