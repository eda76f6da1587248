#!/usr/bin/env bash
# Builds the ring engine's libFuzzer target and runs it for a bounded time.
#
#   bash tests/fuzz/run.sh [SECONDS]     (default 60)
#
# Two builds of tests/fuzz/fuzz_ring.c, both with ASan + UBSan (any report
# is fatal):
#   fuzz_ring        linked with the ring's files (RING_SOURCES of
#                    csrc/sources.mk) as shipped; replays the seed corpus once;
#   fuzz_ring_alloc  includes the ring's files with an allocator that fails
#                    on demand; fuzzes for SECONDS from a temporary copy of
#                    tests/fuzz/corpus/ (the committed corpus never grows).
# Both link the schemes and hash functions (SCHEME_SOURCES, HASH_SOURCES).
# Then tests/fuzz/fuzz_wide.c, the 64-bit ring, Envoy's rules, the
# weighted Maglev fill and the bounded-load table (it includes WIDE_SOURCES
# and the strategies with its own failing allocator, and links the hashes
# and the ring): its seeds of
# tests/fuzz/corpus_wide/ replayed, then fuzzed for a quarter of SECONDS
# (at least 5).  Then tests/fuzz/fuzz_diff.c, the diff of two rings
# (it includes engine/diff.c with its own failing allocator and links the
# rings and hashes) against routing both: its seeds of tests/fuzz/corpus_diff/
# replayed, then fuzzed for a quarter of SECONDS (at least 5).  Then
# tests/fuzz/fuzz_http.c, the gateway's request-head policy over any bytes
# (it links HTTP_SOURCES): its seeds of tests/fuzz/corpus_http/ replayed,
# then fuzzed for a quarter of SECONDS (at least 5).  Then
# tests/fuzz/fuzz_ids.c, the haproxy layout's server ids against a model (it
# includes HAPROXY_ID_SOURCES with its own failing allocator): its seeds of
# tests/fuzz/corpus_ids/ replayed, then fuzzed for a quarter of SECONDS
# (at least 5).  Then tests/fuzz/fuzz_rendezvous.c, the rendezvous node sets
# of every layout (it includes the rendezvous strategy with its own failing
# allocator and links HASH_SOURCES): its seeds of tests/fuzz/corpus_rendezvous/
# replayed, then fuzzed for a quarter of SECONDS (at least 5).  Then
# tests/fuzz/fuzz_affinity.c, prefix-cache affinity against a model (it
# includes the affinity strategy and the mixer with its own failing
# allocator and links HASH_SOURCES): its seeds of tests/fuzz/corpus_affinity/
# replayed, then fuzzed for a quarter of SECONDS (at least 5).
# tests/fuzz/fuzz_anchor.c, JumpBackHash and JumpBackAnchor, state parsing
# of any bytes among them (it includes both with its own failing
# allocator): its seeds of tests/fuzz/corpus_anchor/ replayed, then fuzzed
# for a quarter of SECONDS (at least 5).  Then tests/fuzz/fuzz_ring128.c,
# the sorted points of uhashring's continuums against a model of its dict
# (it includes engine/ring128.c with its own failing allocator and links
# HASH_SOURCES): its seeds of tests/fuzz/corpus_ring128/ replayed, then
# fuzzed for a quarter of SECONDS (at least 5).
# Every target but fuzz_ring takes that failing allocator and FZ_ASSERT
# from tests/fuzz/fuzz_support.h.
# Exits non-zero on any crash, sanitizer report, leak, timeout or model
# mismatch; the failing inputs are copied to $CHASH_FUZZ_ARTIFACTS (default
# ${TMPDIR:-/tmp}/chash-fuzz-artifacts) and printed in base64.
#
# Without clang or its fuzzer runtime (Debian: apt-get install clang
# libclang-rt-14-dev) it exits 1, or 0 when CHASH_FUZZ_OPTIONAL=1.
# CHASH_FUZZ_CC picks another clang.
set -euo pipefail

seconds=${1:-60}
if ! [[ $seconds =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: bash tests/fuzz/run.sh [SECONDS]  (a whole number >= 1)" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cc=${CHASH_FUZZ_CC:-clang}
artifacts=${CHASH_FUZZ_ARTIFACTS:-${TMPDIR:-/tmp}/chash-fuzz-artifacts}

unavailable() {
  echo "fuzz: $1" >&2
  echo "fuzz: on Debian: apt-get install clang libclang-rt-14-dev" >&2
  if [ "${CHASH_FUZZ_OPTIONAL:-0}" = 1 ]; then
    echo "fuzz: skipped (CHASH_FUZZ_OPTIONAL=1)"
    exit 0
  fi
  exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/chash-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

command -v "$cc" >/dev/null 2>&1 || unavailable "$cc not found"
san=(-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)\n{ (void)d; (void)n; return 0; }\n' \
  >"$work/probe.c"
if ! "$cc" "${san[@]}" "$work/probe.c" -o "$work/probe" >"$work/probe.log" 2>&1; then
  sed 's/^/  /' "$work/probe.log" >&2
  unavailable "$cc cannot link -fsanitize=fuzzer,address,undefined (no libFuzzer runtime?)"
fi

cd "$root"
# Lists of csrc/sources.mk, the one place they are written, as csrc/
# paths on one line; make reads the file, as the C tests' Makefile does.
sources() {
  local refs="" words
  for name in "$@"; do refs+=" \$($name)"; done
  words=$(printf 'include csrc/sources.mk\n$(info%s)\nall: ;\n' "$refs" | make -s -f - all)
  [ -n "$words" ] || { echo "fuzz: csrc/sources.mk gives no $*" >&2; return 1; }
  printf 'csrc/%s ' $words
}
ring_list=$(sources RING_SOURCES)
scheme_list=$(sources SCHEME_SOURCES HASH_SOURCES)
read -ra ring <<<"$ring_list"
read -ra hashes <<<"$scheme_list"
wide_list=$(sources WIDE_SOURCES)
read -ra wide <<<"$wide_list"
# chash_ring_check() runs after every step; its loops only compare, so they
# stay out of the coverage feedback (sanitizers still check them).
printf 'fun:chash_ring_check\n' >"$work/coverage-ignore.txt"
flags=(-g -O1 "${san[@]}" -fsanitize-coverage-ignorelist="$work/coverage-ignore.txt"
       -std=c11 -Wall -Wextra -Icsrc)
echo "fuzz: building with $("$cc" --version | head -n 1)"
"$cc" "${flags[@]}" tests/fuzz/fuzz_ring.c "${ring[@]}" "${hashes[@]}" -lm -o "$work/fuzz_ring"
"$cc" "${flags[@]}" -DFUZZ_FAILING_ALLOC tests/fuzz/fuzz_ring.c "${hashes[@]}" -lm -o "$work/fuzz_ring_alloc"

"$cc" "${flags[@]}" tests/fuzz/fuzz_wide.c "${ring[@]}" "${hashes[@]}" -lm -o "$work/fuzz_wide"
"$cc" "${flags[@]}" tests/fuzz/fuzz_diff.c "${ring[@]}" "${wide[@]}" "${hashes[@]}" -lm -o "$work/fuzz_diff"
http_list=$(sources HTTP_SOURCES)
read -ra http <<<"$http_list"
"$cc" "${flags[@]}" tests/fuzz/fuzz_http.c "${http[@]}" -o "$work/fuzz_http"
"$cc" "${flags[@]}" tests/fuzz/fuzz_ids.c -o "$work/fuzz_ids"
hash_list=$(sources HASH_SOURCES)
read -ra hash_only <<<"$hash_list"
"$cc" "${flags[@]}" tests/fuzz/fuzz_rendezvous.c "${hash_only[@]}" -lm -o "$work/fuzz_rendezvous"
"$cc" "${flags[@]}" tests/fuzz/fuzz_affinity.c "${hash_only[@]}" -lm -o "$work/fuzz_affinity"
"$cc" "${flags[@]}" tests/fuzz/fuzz_anchor.c -o "$work/fuzz_anchor"
"$cc" "${flags[@]}" tests/fuzz/fuzz_ring128.c "${hash_only[@]}" -lm -o "$work/fuzz_ring128"

mkdir -p "$work/corpus" "$work/crashes" "$work/corpus_wide" "$work/corpus_diff" "$work/corpus_http" \
         "$work/corpus_ids" "$work/corpus_rendezvous" "$work/corpus_affinity" "$work/corpus_anchor" \
         "$work/corpus_ring128"
cp tests/fuzz/corpus/* "$work/corpus/"
cp tests/fuzz/corpus_wide/* "$work/corpus_wide/"
cp tests/fuzz/corpus_diff/* "$work/corpus_diff/"
cp tests/fuzz/corpus_http/* "$work/corpus_http/"
cp tests/fuzz/corpus_ids/* "$work/corpus_ids/"
cp tests/fuzz/corpus_rendezvous/* "$work/corpus_rendezvous/"
cp tests/fuzz/corpus_affinity/* "$work/corpus_affinity/"
cp tests/fuzz/corpus_anchor/* "$work/corpus_anchor/"
cp tests/fuzz/corpus_ring128/* "$work/corpus_ring128/"
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

status=0
failed_seeds=()
echo "fuzz: replaying $(ls "$work/corpus" | wc -l) seeds through the shipped allocator"
for seed in "$work"/corpus/*; do
  if ! "$work/fuzz_ring" -rss_limit_mb=2048 -timeout=60 -artifact_prefix="$work/crashes/" \
      "$seed" >"$work/replay.log" 2>&1; then
    status=1
    failed_seeds+=("$(basename "$seed")")
    echo "fuzz: seed $(basename "$seed") FAILED:" >&2
    grep -E '^fuzz_ring: |runtime error|ERROR: |SUMMARY: ' "$work/replay.log" | head -n 5 | sed 's/^/  /' >&2
    cp "$seed" "$work/crashes/seed-$(basename "$seed")"
  fi
done
if [ "$status" -eq 0 ]; then
  echo "fuzz: fuzzing for ${seconds}s with failing allocations"
  "$work/fuzz_ring_alloc" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=60 \
    -max_len=4096 -print_final_stats=1 -artifact_prefix="$work/crashes/" \
    "$work/corpus" >"$work/fuzz.log" 2>&1 || status=$?
  grep -E '^#[0-9]+[[:space:]]+DONE' "$work/fuzz.log" || tail -n 1 "$work/fuzz.log" | cut -c1-200
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$work/fuzz.log" || true
  if [ "$status" -ne 0 ]; then
    echo "fuzz: FAILED (exit $status); the end of the log:" >&2
    grep -v -E '^#[0-9]+[[:space:]]' "$work/fuzz.log" | tail -n 60 >&2
  fi
else
  echo "fuzz: ${#failed_seeds[@]} seed(s) failed: ${failed_seeds[*]}; not fuzzing" >&2
fi

# A second target: its seeds of corpus_NAME replayed, then fuzzed for a
# quarter of SECONDS (at least 5).  Sets status non-zero on any failure.
replay_and_fuzz() {  # NAME MAX_LEN
  local name=$1 max_len=$2 seed
  local secs=$(( seconds / 4 > 5 ? seconds / 4 : 5 ))
  echo "fuzz: fuzz_$name: replaying $(ls "$work/corpus_$name" | wc -l) seeds, then ${secs}s"
  for seed in "$work"/corpus_"$name"/*; do
    if ! "$work/fuzz_$name" -timeout=60 -artifact_prefix="$work/crashes/" "$seed" \
        >"$work/replay.log" 2>&1; then
      status=1
      echo "fuzz: fuzz_$name seed $(basename "$seed") FAILED:" >&2
      grep -E "^fuzz_$name: |runtime error|ERROR: |SUMMARY: " "$work/replay.log" | head -n 5 | sed 's/^/  /' >&2
      cp "$seed" "$work/crashes/$name-seed-$(basename "$seed")"
    fi
  done
  [ "$status" -eq 0 ] || return 0
  "$work/fuzz_$name" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=60 \
    -max_len="$max_len" -print_final_stats=1 -artifact_prefix="$work/crashes/" \
    "$work/corpus_$name" >"$work/fuzz_$name.log" 2>&1 || status=$?
  grep -E '^#[0-9]+[[:space:]]+DONE' "$work/fuzz_$name.log" || tail -n 1 "$work/fuzz_$name.log" | cut -c1-200
  if [ "$status" -ne 0 ]; then
    echo "fuzz: fuzz_$name FAILED (exit $status); the end of the log:" >&2
    grep -v -E '^#[0-9]+[[:space:]]' "$work/fuzz_$name.log" | tail -n 60 >&2
  fi
}

[ "$status" -eq 0 ] && replay_and_fuzz wide 4096
[ "$status" -eq 0 ] && replay_and_fuzz diff 1024
[ "$status" -eq 0 ] && replay_and_fuzz http 2048
[ "$status" -eq 0 ] && replay_and_fuzz ids 1024
[ "$status" -eq 0 ] && replay_and_fuzz rendezvous 2048
[ "$status" -eq 0 ] && replay_and_fuzz affinity 2048
[ "$status" -eq 0 ] && replay_and_fuzz anchor 2048
[ "$status" -eq 0 ] && replay_and_fuzz ring128 1024

if [ "$status" -ne 0 ]; then
  mkdir -p "$artifacts"
  cp "$work/fuzz_ring" "$work/fuzz_ring_alloc" "$work/fuzz_wide" "$work/fuzz_diff" "$work/fuzz_http" \
     "$work/fuzz_ids" "$work/fuzz_rendezvous" "$work/fuzz_affinity" "$work/fuzz_anchor" \
     "$work/fuzz_ring128" "$artifacts/"
  for f in "$work"/crashes/*; do
    [ -e "$f" ] || continue
    cp "$f" "$artifacts/"
    echo "fuzz: failing input $artifacts/$(basename "$f") (base64 $(base64 -w0 "$f"))" >&2
  done
  echo "fuzz: replay with $artifacts/fuzz_NAME INPUT (the target named above; FUZZ_RING_TRACE=1 $artifacts/fuzz_ring_alloc INPUT traces the ring's)" >&2
  exit 1
fi
echo "fuzz: passed"
