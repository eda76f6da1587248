"""Declares the C extension; all metadata lives in pyproject.toml.

Build switches (environment variables, read at build time):
  CHASH_SANITIZE=1  AddressSanitizer + UndefinedBehaviorSanitizer, -O1 -g
  CHASH_DEBUG=1     -O0 -g with asserts
  CHASH_WERROR=1    warnings are errors
The default (release) build carries no debug info: -g0, and debug sections
stripped at link time on ELF platforms; the sanitizer and debug builds keep -g.
A free-threaded interpreter (3.13t) needs no switch: Py_GIL_DISABLED comes from
its pyconfig.h, and the flags above compile cleanly against its headers.
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
    # Functions start on a 64-byte line, so a hot engine loop (Maglev's
    # table fill) runs at one speed whatever code comes before it in the
    # binary: measured at +6 % for an unchanged function moved 32 bytes.
    compile_args += ["-O3", "-g0", "-falign-functions=64"]
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


def _make_lists(path: str) -> dict[str, list[str]]:
    """The `NAME := words` lists of a make file (csrc/sources.mk): comments,
    backslash continuations and $(NAME) references to earlier lists, no
    other make syntax."""
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"\\\n", " ", re.sub(r"#.*", "", f.read()))
    lists: dict[str, list[str]] = {}
    for line in filter(str.strip, text.splitlines()):
        match = re.fullmatch(r"\s*(\w+)\s*:=(.*)", line)
        if not match:
            raise SystemExit(f"setup.py: {path}: cannot read {line.strip()!r}")
        words: list[str] = []
        for word in match.group(2).split():
            ref = re.fullmatch(r"\$\((\w+)\)", word)
            words += lists[ref.group(1)] if ref else [word]
        lists[match.group(1)] = words
    return lists


# The sources, listed once in csrc/sources.mk: the engine (plain C: ring,
# schemes, hash functions, strategies) and the binding over it, compiled
# together into the one extension.  Every csrc/**/*.c belongs to a list.
_SOURCES = _make_lists("csrc/sources.mk")
SOURCES = [f"csrc/{src}" for src in _SOURCES["BINDING_SOURCES"] + _SOURCES["ENGINE_SOURCES"]]
_unlisted = set(glob("csrc/**/*.c", recursive=True)) - set(SOURCES)
if _unlisted:
    raise SystemExit(f"setup.py: csrc files in no list of csrc/sources.mk: {sorted(_unlisted)}")

setup(
    cmdclass={"egg_info": EggInfo},
    ext_modules=[
        Extension(
            "chash._chash",
            sources=SOURCES,
            include_dirs=["csrc"],
            depends=sorted(glob("csrc/**/*.h", recursive=True)) + ["csrc/sources.mk"],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
            undef_macros=undef,
        )
    ]
)
