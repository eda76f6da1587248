#!/usr/bin/env bash
# The thread tests (tests/threads/) under ThreadSanitizer: a free-threaded
# CPython 3.13 configured with --disable-gil --with-thread-sanitizer, and the
# extension built by it (its compiler flags carry -fsanitize=thread), in a
# scratch copy of this checkout so the checkout's own builds stay as they
# are.  Not part of CI (the interpreter takes its own build); run it after
# every change to the binding's concurrency (docs/reliability.md).
#
#   PYTHON_TSAN   the interpreter (default /opt/py313t-tsan/bin/python3.13t)
#   CPYTHON_SRC   its source tree, for CPython's own suppressions
#                 (Tools/tsan/suppressions_free_threading.txt): the races
#                 CPython knows of in itself, none of chash's
#   extra arguments go to pytest (default: tests/threads)
#
# Exits non-zero on the first report (halt_on_error=1) or a failing test.
set -euo pipefail
python="${PYTHON_TSAN:-/opt/py313t-tsan/bin/python3.13t}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
[ -x "$python" ] || { echo "tsan.sh: no interpreter at $python (set PYTHON_TSAN)" >&2; exit 1; }
"$python" -c 'import sys, sysconfig
sys.exit(0 if sysconfig.get_config_var("Py_GIL_DISABLED") and "-fsanitize=thread" in (sysconfig.get_config_var("CONFIG_ARGS") + sysconfig.get_config_var("CFLAGS")) else 1)' || {
  echo "tsan.sh: $python is not a free-threaded build with ThreadSanitizer" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The checkout as it is (tracked files, with their changes, and new ones).
(cd "$root" && git ls-files -z --cached --others --exclude-standard \
   | xargs -0 cp --parents -t "$work" 2>/dev/null || true)
rm -f "$work"/chash/_chash*.so
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --only-binary=hypothesis pytest 'hypothesis<=6.155.2' 'setuptools>=77'
(cd "$work" && CHASH_WERROR=1 "$work/venv/bin/python" setup.py -q build_ext --inplace)

options="halt_on_error=1 second_deadlock_stack=1"
if [ -n "${CPYTHON_SRC:-}" ]; then
  options="$options suppressions=$CPYTHON_SRC/Tools/tsan/suppressions_free_threading.txt"
fi
cd "$work"
TSAN_OPTIONS="$options" "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "${@:-tests/threads}"
