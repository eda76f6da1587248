#!/usr/bin/env python3
"""chash.compat.uhashring against uhashring 2.5, side by side in one process.

    python benchmarks/bench_uhashring.py [--nodes 10,100] [--repeat N]
                                         [--keys N] [--json FILE]

Both are ``HashRing(nodes)`` with uhashring's defaults (160 points a node,
128-bit MD5 points) and place every key on the same node (checked before
timing).  Rows, at every node count:

* ``get_node``: a Python loop of ``ring.get_node(key)`` over str keys;
* build the ring: ``HashRing(nodes)``;
* add one node, remove one node: ``add_node`` / ``remove_node`` on a ring
  of N nodes (put back untimed), each straight after an untimed change
  of the same ring (for a remove, the add of the node it removes; for an
  add, an add and remove of another name), as in a run of changes;
* add one node, cold (no target): the first change of the ring in the
  round, timed after the collector's pass and the lookups (in every other
  round also after the other contender's cold add), with the change's
  code and the ring's arrays out of cache;
* and the same lookups, build and changes with ``hash_fn="ketama"`` (40
  points a node, 4 a hash; uhashring rebuilds the whole continuum on
  every change, as does chash here), without targets;
* below any ``get_node``, without targets: one MD5 of each key in C alone
  (benchmarks/c/md5_alone.c, built with the extension's release flags:
  chash's MD5 and, where its headers are installed, OpenSSL's), and a
  Python loop calling ``len(key)`` (the loop and a call, no work); their
  sum is the least a ``get_node`` called from Python can take, printed
  beside what 15x uhashring's ``get_node`` leaves.

Ratios are uhashring / chash (above 1: chash is faster).  Targets:
``get_node`` >= 15x, building 100 nodes >= 15x, ``add_node`` and
``remove_node`` >= 20x (the default mode).  Same method as bench_router.py
(benchmarks/_bench.py): interleaved rounds, rotating order, wall-clock
medians beside CPU time, preempted short samples retaken.
"""
from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from _bench import (
    BLOCK,
    ROOT,
    SINGLE,
    Group,
    Key,
    Measure,
    Obs,
    Row,
    add_target,
    lookup_measures,
    machine_info,
    make_row,
    node_counts,
    node_names,
    progress,
    report,
    request_keys,
    run_schedule,
    timed,
    write_json,
)

from chash.compat.uhashring import HashRing

try:
    import uhashring
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise SystemExit("the benchmark needs uhashring 2.5: pip install uhashring==2.5") from exc

CHASH, UHASHRING = "chash", "uhashring"
BUILD, ADD, REMOVE = "build the ring", "add one node", "remove one node"
ADD_COLD = "add one node, cold"
MODES = {"md5": {}, "ketama": {"hash_fn": "ketama"}}
SECTIONS = {
    "md5": "HashRing(nodes), md5: chash.compat.uhashring against uhashring 2.5; ratios are uhashring / chash",
    "ketama": ('HashRing(nodes, hash_fn="ketama"): chash.compat.uhashring against uhashring 2.5;'
               " ratios are uhashring / chash"),
}
VS = [("uhashring/chash", UHASHRING, CHASH)]
CLASSES = {CHASH: HashRing, UHASHRING: uhashring.HashRing}
#: The targets of the default mode: row -> (node counts, at least).
TARGETS = {SINGLE: ((10, 100), 15.0), BUILD: ((100,), 15.0), ADD: ((10, 100), 20.0),
           REMOVE: ((10, 100), 20.0)}


def build_group(mode: str, n: int, nodes: Sequence[str]) -> Group:
    def build(name: str) -> Measure:
        make = CLASSES[name]
        kwargs = MODES[mode]

        def sample(_seq: int) -> dict[Key, Obs]:
            obs, _ = timed(lambda: make(list(nodes), **kwargs))
            return {(BUILD, (mode, n), name): obs}

        return Measure(f"{mode} {n} {name} build", sample, lambda: make(list(nodes[:3]), **kwargs))

    return Group(f"build {mode} {n}", [build(CHASH), build(UHASHRING)])


def mutation_groups(mode: str, n: int, rings: dict[str, Any]) -> tuple[Group, Group]:
    """Adding and removing one node, each change timed alone and undone
    untimed: the cold adds, then the others.  Each of the others comes
    straight after an untimed change of the same ring, so its code and the
    ring's arrays are in cache as in a run of changes: for a remove the
    add of the node it removes, for an add one add and remove of another
    name.  A cold add (no target) is the first change of its ring in the
    round: its group comes after the collector's pass and the lookups'."""
    def mutation(name: str, op: str) -> Measure:
        add: Callable[[str], object] = rings[name].add_node
        remove: Callable[[str], object] = rings[name].remove_node

        def sample(seq: int) -> dict[Key, Obs]:
            spare = f"backend-spare-{seq}.svc:8080"
            if op == REMOVE:
                add(spare)
                obs, _ = timed(lambda: remove(spare))
                return {(op, (mode, n), name): obs}
            if op == ADD:
                add(f"backend-primer-{seq}.svc:8080")
                remove(f"backend-primer-{seq}.svc:8080")
            obs, _ = timed(lambda: add(spare))
            remove(spare)
            return {(op, (mode, n), name): obs}

        def warmup() -> None:
            add("backend-warmup.svc:8080")
            remove("backend-warmup.svc:8080")

        return Measure(f"{mode} {n} {op} {name}", sample, warmup)

    changes = Group(f"add/remove {mode} {n}", [mutation(name, op) for op in (ADD, REMOVE)
                                                for name in (CHASH, UHASHRING)])
    cold = Group(f"cold add {mode} {n}", [mutation(name, ADD_COLD) for name in (CHASH, UHASHRING)])
    return cold, changes


FLOOR_SECTION = "Below any get_node: one MD5 of the key in C alone, and a Python loop calling a C function"
MD5_ALONE, LOOP_ALONE = "MD5 of the key, C alone", "loop calling len(key)"
CHASH_MD5, OPENSSL_MD5, PYTHON = "chash_md5", "OpenSSL MD5", "Python"


def build_md5_alone(folder: str) -> list[str]:
    """Compiles benchmarks/c/md5_alone.c with the extension's release flags
    (with OpenSSL's MD5 beside chash's when its headers are there); the
    command that runs it."""
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    exe = os.path.join(folder, "md5_alone")
    base = [*cc, "-std=c11", "-O3", "-g0", "-falign-functions=64", "-I", str(ROOT / "csrc"),
            str(ROOT / "benchmarks" / "c" / "md5_alone.c"), str(ROOT / "csrc" / "hash" / "md5.c"),
            "-o", exe]
    for extra in (["-DCHASH_WITH_OPENSSL", "-lcrypto"], []):
        if subprocess.run(base + extra, capture_output=True).returncode == 0:
            return [exe]
    raise SystemExit(f"cannot build benchmarks/c/md5_alone.c with {' '.join(cc)}")


def involuntary_switches(pid: int) -> int:
    """A process's involuntary context switches so far (0 off Linux)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("nonvoluntary_ctxt_switches:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def floor_group(keys: list[str], command: list[str]) -> tuple[Group, subprocess.Popen[str]]:
    """The MD5 alone (chash's and OpenSSL's, in the coprocess) and the loop
    calling len(key), each warm as the lookups are: a block of BLOCK keys
    hashed once untimed, then passes over it lasting about 1 ms."""
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write("\n".join(keys) + "\n\n")
    block = min(BLOCK, len(keys))

    def ask(which: str, start: int, passes: int) -> tuple[int, int] | None:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(f"{which} {start} {block} {passes}\n")
        child.stdin.flush()
        answer = child.stdout.readline().split()
        if not answer:
            raise SystemExit("benchmarks/c/md5_alone.c stopped")
        return None if answer == ["none"] else (int(answer[0]), int(answer[1]))

    def md5_measure(which: str, label: str) -> Measure:
        passes = 1

        def sample(seq: int) -> dict[Key, Obs]:
            start = seq * block
            ask(which, start, 1)
            switched = involuntary_switches(child.pid)
            timing = ask(which, start, passes)
            assert timing is not None
            ops = passes * block
            preempted = involuntary_switches(child.pid) - switched
            return {(MD5_ALONE, "floor", label): Obs(timing[0] / ops, timing[1] / ops, preempted, timing[0])}

        def warmup() -> None:
            nonlocal passes
            timing = ask(which, 0, 20)
            assert timing is not None
            passes = max(1, -(-1_000_000 * 20 // max(1, timing[0])))

        return Measure(f"floor {label}", sample, warmup)

    measures = [lookup_measures("floor", PYTHON, len, None, keys, 1_000_000)[0]]
    measures += [md5_measure(which, label) for which, label in (("chash", CHASH_MD5), ("openssl", OPENSSL_MD5))
                 if ask(which, 0, 1) is not None]
    return Group("below any get_node", measures), child


def floor_rows(obs: dict[Key, list[Obs]]) -> list[Row]:
    loop = make_row(FLOOR_SECTION, SINGLE, "floor", "", "ns/key", 1, obs, [PYTHON], [])
    loop.row = LOOP_ALONE
    md5 = make_row(FLOOR_SECTION, MD5_ALONE, "floor", "", "ns/key", 1, obs, [CHASH_MD5, OPENSSL_MD5],
                   [("OpenSSL/chash", OPENSSL_MD5, CHASH_MD5)])
    return [md5, loop]


def floor_text(rows: list[Row]) -> str:
    """The least a get_node from Python can take, beside 15x's budget."""
    md5 = next(r for r in rows if r.row == MD5_ALONE)
    loop = next(r for r in rows if r.row == LOOP_ALONE)
    least = md5.median[CHASH_MD5] + loop.median[PYTHON]
    lines = [f"below any get_node: the MD5 alone ({md5.median[CHASH_MD5]:.1f} ns) + the loop calling"
             f" len(key) ({loop.median[PYTHON]:.1f} ns) = {least:.1f} ns a key"]
    for r in rows:
        if r.section == SECTIONS["md5"] and r.row == SINGLE:
            budget = r.median[UHASHRING] / TARGETS[SINGLE][1]
            verdict = "fits" if least <= budget else "does not fit"
            lines.append(f"  at {r.nodes} nodes, 15x uhashring's get_node ({r.median[UHASHRING]:,.0f} ns)"
                         f" leaves {budget:.1f} ns: the floor {verdict}; chash's get_node takes"
                         f" {r.median[CHASH]:.1f} ns")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--nodes", type=node_counts, default="10,100", help="node counts (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=9, help="rounds (default 9)")
    parser.add_argument("--keys", type=int, default=20000, help="lookup keys (default 20000)")
    parser.add_argument("--json", metavar="FILE", help="write every sample, median and ratio")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.repeat < 1 or args.keys < 1:
        raise SystemExit("--repeat and --keys must be at least 1")
    info = machine_info(["uhashring"])
    started, load_start = time.perf_counter(), os.getloadavg()
    keys = request_keys(args.keys)
    all_nodes = node_names(max(args.nodes))
    groups: list[Group] = []
    progress("building the rings")
    for mode, kwargs in MODES.items():
        for n in args.nodes:
            rings = {name: cls(all_nodes[:n], **kwargs) for name, cls in CLASSES.items()}
            # Same placement, key for key, before anything is timed.
            assert [rings[CHASH].get_node(k) for k in keys] == [rings[UHASHRING].get_node(k) for k in keys]
            groups.append(build_group(mode, n, all_nodes[:n]))
            # lookup_measures gives [single, batch]; uhashring has no batch call.
            groups.append(Group(f"lookups {mode} {n}", [
                lookup_measures((mode, n), name, rings[name].get_node, None, keys, 1_000_000)[0]
                for name in (CHASH, UHASHRING)]))
            groups += mutation_groups(mode, n, rings)
    with tempfile.TemporaryDirectory(prefix="chash-md5-alone-") as folder:
        floor, child = floor_group(keys, build_md5_alone(folder))
        try:
            obs = run_schedule([*groups, floor], args.repeat, slow_rounds=3, budget_s=60.0)
        finally:
            assert child.stdin is not None
            child.stdin.close()
            child.wait(timeout=60)
    rows: list[Row] = []
    for mode in MODES:
        for n in args.nodes:
            for row, unit, scale in ((SINGLE, "ns/key", 1), (BUILD, "ms", 1e6), (ADD, "µs", 1e3),
                                     (REMOVE, "µs", 1e3), (ADD_COLD, "µs", 1e3)):
                r = make_row(SECTIONS[mode], row, (mode, n), n, unit, scale, obs, [CHASH, UHASHRING], VS)
                counts, at_least = TARGETS.get(row, ((), 0.0))
                if mode == "md5" and n in counts:
                    add_target(r, "uhashring/chash", ">=", at_least, ratio="uhashring/chash")
                rows.append(r)
    rows += floor_rows(obs)
    runtime, load_end = time.perf_counter() - started, os.getloadavg()
    header = [
        f"chash {info['chash']} ({info['commit']}) · uhashring {info['uhashring']}",
        f"{info['platform']} · {info['python']} · {info['cpu']} · {info['cpu_count']} CPUs",
        f"load average {load_start[0]:.2f} at start, {load_end[0]:.2f} at end; {runtime:.0f} s",
        f"wall-clock medians of {args.repeat} interleaved rounds; {args.keys:,} keys",
        "ratios: uhashring / chash, higher means chash is faster",
    ]
    text, met, total = report(rows, header)
    text += "\n\n" + floor_text(rows)
    if args.json:
        write_json(args.json, {
            "command": " ".join(["python", *sys.argv]), "machine": info,
            "load_average": {"start": load_start, "end": load_end}, "runtime_s": runtime,
            "config": {"nodes": args.nodes, "rounds": args.repeat, "keys": args.keys},
            "rows": [r.to_json() for r in rows], "targets_met": met, "targets_total": total,
        })
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
