"""Declares the C extensions; all metadata lives in pyproject.toml.

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
from setuptools.command.egg_info import egg_info

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
    compiler = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    if "gcc" in os.path.basename(compiler.split()[0]):
        # The unrolled four-lane MD5 overflows GCC's variable-tracking budget
        # at -O1 -g, which it reports on every build; the debug info is still
        # complete for what a sanitizer report needs (lines, frames).
        compile_args.append("-fno-var-tracking-assignments")
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
# grafts whole folders (so new files ship by themselves) but cannot exclude
# these without a "no files matching" warning from every clean build; the
# file list (SOURCES.txt, which the sdist copies) drops them here instead.
_ARTEFACTS = re.compile(
    r"(^|/)(__pycache__|\.hypothesis|\.pytest_cache|\.mypy_cache|build)/"
    r"|\.(py[cod]|so|pyd|o|a|tmp)$")


class EggInfo(egg_info):
    """egg_info whose file list leaves build and test artefacts out."""

    def find_sources(self) -> None:
        super().find_sources()
        if self.filelist.exclude_pattern(_ARTEFACTS, is_regex=True):
            self.write_file("SOURCES", os.path.join(self.egg_info, "SOURCES.txt"),
                            "".join(f"{name}\n" for name in self.filelist.files))


# The engine: the ring, the schemes and the hash functions (plain C).
ENGINE = ["csrc/chash_ring.c", "csrc/chash_ring_index.c", "csrc/chash_ring_bulk.c", "csrc/chash_scheme.c", "csrc/chash_md5.c", "csrc/chash_sha1.c",
          "csrc/chash_murmur.c", "csrc/chash_xxhash.c", "csrc/chash_fnv_crc.c"]
# Each extension: its binding file(s) over the engine; both include
# csrc/_chash_binding.h.  Every csrc/*.c belongs to one of these lists.
EXTENSIONS = {
    "chash._chash": ["csrc/_chashmodule.c", "csrc/_chash_points.c", "csrc/_chash_mutate.c",
                     "csrc/_chash_ketama.c", "csrc/_chash_lookup.c", "csrc/_chash_inspect.c", *ENGINE],
    "chash._strategies": ["csrc/_chash_strategies.c", "csrc/chash_strategies.c", *ENGINE],
}
_unlisted = set(glob("csrc/*.c")) - {src for srcs in EXTENSIONS.values() for src in srcs}
if _unlisted:
    raise SystemExit(f"setup.py: csrc files in no extension: {sorted(_unlisted)}")

setup(
    cmdclass={"egg_info": EggInfo},
    ext_modules=[
        Extension(
            name,
            sources=sources,
            include_dirs=["csrc"],
            depends=sorted(glob("csrc/*.h")),
            extra_compile_args=compile_args,
            extra_link_args=link_args,
            undef_macros=undef,
        )
        for name, sources in EXTENSIONS.items()
    ]
)
