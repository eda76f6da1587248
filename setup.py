"""Declares the C extensions; all metadata lives in pyproject.toml.

Build switches (environment variables, read at build time):
  CHASH_SANITIZE=1  AddressSanitizer + UndefinedBehaviorSanitizer, -O1 -g
  CHASH_DEBUG=1     -O0 -g with asserts
  CHASH_WERROR=1    warnings are errors
"""
import os
import sysconfig
from glob import glob

from setuptools import Extension, setup


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
    compile_args += ["-O3"]
if _flag("CHASH_WERROR"):
    compile_args.append("-Werror")
if sysconfig.get_platform().startswith("win"):
    compile_args, link_args = [], []

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
