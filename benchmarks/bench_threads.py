"""One router shared by 1 and by 2 threads: lookups a second, beside the
interpreter's own baseline (each thread looking keys up in its own dict).

For every family (the ring's python and envoy layouts, Maglev, jump,
rendezvous) at 10 and 1,000 nodes: single lookups (get_target_node over
1,000 keys made by each thread) and batches (get_target_nodes of 10,000
keys). Each sample runs the same work per thread, so 2 threads do twice
the work of 1; the scaling is lookups a second with 2 threads over those
with 1, as both ratios of _ratios.py (of medians / of rounds, rounds
interleaved), the dict's scaling beside it. CPU time is each thread's own
(time.thread_time), as nanoseconds a lookup. Then, with a writer thread
changing the router 10 times a second (a node added, then removed), the
readers' lookups a second over those without it.

Targets (issue 42; a free-threaded build on 2 cores): batches from 2
threads >= 1.7x the throughput of 1, single lookups >= 1.4x; readers keep
>= 0.9x with the writer. On a machine shared with other work, the wall
clock scaling says how many cores were free as much as what chash does:
the dict's scaling in the same rounds is the yardstick (and, for batches,
the scaling of each thread copying its own list of 10,000 items: the
answer list every batch call makes), and the CPU time a
lookup (which does not count the time a thread waited for a core) says
whether sharing the router made each lookup dearer.

Usage: python benchmarks/bench_threads.py [--rounds N] [--out FILE]
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from pathlib import Path

import _ratios

import chash

ROOT = Path(__file__).resolve().parent.parent
SINGLE_KEYS = 1000
SINGLE_PASSES = 200
BATCH_KEYS = 10_000
BATCHES = 20

Router = object
Work = Callable[[int], int]  # a thread's work, given its number: lookups done


def families() -> dict[str, Callable[[], object]]:
    return {
        "ring python": lambda: chash.ConsistentHashRouter(layout="python"),
        "ring envoy": lambda: chash.ConsistentHashRouter(layout="envoy"),
        "maglev": chash.MaglevRouter,
        "jump": chash.JumpRouter,
        "rendezvous": chash.RendezvousRouter,
    }


def make(factory: Callable[[], object], nodes: int) -> object:
    router = factory()
    router.add_service_nodes([f"10.{i // 250}.{i % 250}.1:80" for i in range(nodes)])  # type: ignore[attr-defined]
    return router


def keys_of(thread: int, count: int) -> list[str]:
    return [f"t{thread}-user-{i}" for i in range(count)]


def single_work(router: object) -> Work:
    def work(thread: int) -> int:
        keys = keys_of(thread, SINGLE_KEYS)
        get = router.get_target_node  # type: ignore[attr-defined]
        for _ in range(SINGLE_PASSES):
            for key in keys:
                get(key)
        return SINGLE_PASSES * SINGLE_KEYS
    return work


def batch_work(router: object) -> Work:
    def work(thread: int) -> int:
        keys = keys_of(thread, BATCH_KEYS)
        for _ in range(BATCHES):
            router.get_target_nodes(keys)  # type: ignore[attr-defined]
        return BATCHES * BATCH_KEYS
    return work


def dict_work(thread: int) -> int:
    keys = keys_of(thread, SINGLE_KEYS)
    table = {key: "node" for key in keys}
    get = table.get
    for _ in range(SINGLE_PASSES):
        for key in keys:
            get(key)
    return SINGLE_PASSES * SINGLE_KEYS


def list_work(thread: int) -> int:
    """The interpreter's own part of a batch: a list of BATCH_KEYS items
    made (and dropped) per call, as every get_target_nodes answer is; on a
    free-threaded build its 80 KB block is a large allocation."""
    keys = keys_of(thread, BATCH_KEYS)
    for _ in range(BATCHES):
        list(keys)
    return BATCHES * BATCH_KEYS


def sample(work: Work, threads: int, seconds: float = 0.0) -> tuple[float, float]:
    """(lookups a second by the wall clock, CPU ns a lookup) of threads
    running work at once, each repeating it until seconds have passed."""
    start = threading.Barrier(threads + 1)
    done: list[tuple[int, float]] = []
    lock = threading.Lock()

    def run(number: int) -> None:
        start.wait()
        cpu = time.thread_time()
        until = time.perf_counter() + seconds
        count = work(number)
        while time.perf_counter() < until:
            count += work(number)
        cpu = time.thread_time() - cpu
        with lock:
            done.append((count, cpu))

    pool = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for thread in pool:
        thread.start()
    start.wait()
    wall = time.perf_counter()
    for thread in pool:
        thread.join()
    wall = time.perf_counter() - wall
    lookups = sum(count for count, _ in done)
    return lookups / wall, sum(cpu for _, cpu in done) / lookups * 1e9


def with_writer(router: object, work: Work, threads: int) -> tuple[float, float]:
    """sample() for a second while a writer adds and removes a node 10
    times a second."""
    stop = threading.Event()

    def write() -> None:
        while not stop.wait(0.1):
            router.add_service_node("writer-node")  # type: ignore[attr-defined]
            if stop.wait(0.1):
                break
            router.remove_service_node("writer-node")  # type: ignore[attr-defined]

    writer = threading.Thread(target=write)
    writer.start()
    try:
        return sample(work, threads, 1.0)
    finally:
        stop.set()
        writer.join()
        router.discard_service_node("writer-node")  # type: ignore[attr-defined]


def load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", help="also write the result here")
    args = parser.parse_args()
    free = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    lines = [f"commit {commit()}, {platform.python_implementation()} {platform.python_version()}"
             f"{' free-threaded' if free else ''}, GIL {'on' if gil else 'off'}, "
             f"{os.cpu_count()} CPUs, load {load()} at the start",
             "threads: one router shared by 1 and by 2 threads, each thread its own keys",
             _ratios.LEGEND, ""]

    cases: list[tuple[str, int, str, Work, object]] = []
    for name, factory in families().items():
        for nodes in (10, 1000):
            router = make(factory, nodes)
            cases.append((name, nodes, "single", single_work(router), router))
            cases.append((name, nodes, "batch", batch_work(router), router))
    wall: dict[tuple[str, int, str, int], list[float]] = {}
    cpu: dict[tuple[str, int, str, int], list[float]] = {}
    base: dict[int, list[float]] = {1: [], 2: []}
    base_cpu: dict[int, list[float]] = {1: [], 2: []}
    lists: dict[int, list[float]] = {1: [], 2: []}
    lists_cpu: dict[int, list[float]] = {1: [], 2: []}
    writer_on: dict[tuple[str, int, str], list[float]] = {}
    writer_off: dict[tuple[str, int, str], list[float]] = {}
    for r in range(args.rounds):
        print(f"round {r + 1} of {args.rounds}", file=sys.stderr)
        for name, nodes, mode, work, router in cases:
            order = (1, 2) if r % 2 == 0 else (2, 1)
            for threads in order:
                rate, ns = sample(work, threads)
                wall.setdefault((name, nodes, mode, threads), []).append(rate)
                cpu.setdefault((name, nodes, mode, threads), []).append(ns)
                rate, ns = sample(dict_work, threads)
                base[threads].append(rate)
                base_cpu[threads].append(ns)
                if mode == "batch":
                    rate, ns = sample(list_work, threads)
                    lists[threads].append(rate)
                    lists_cpu[threads].append(ns)
            if nodes == 1000:
                plain, _ = sample(work, 2, 1.0)
                busy, _ = with_writer(router, work, 2)
                writer_off.setdefault((name, nodes, mode), []).append(plain)
                writer_on.setdefault((name, nodes, mode), []).append(busy)

    dict_scaling = _ratios.both(base[2], base[1])
    header = (f"{'family':<12} {'nodes':>5} {'lookup':<7} {'1 thread M/s':>12} {'2 threads M/s':>13} "
              f"{'2 / 1 threads':>15} {'dict 2 / 1':>13} {'cpu ns 1T':>9} {'cpu ns 2T':>9} "
              f"{'target':>7}  met")
    lines += [header, "-" * len(header)]
    missed = 0
    for name, nodes, mode, _work, _router in cases:
        one, two = wall[name, nodes, mode, 1], wall[name, nodes, mode, 2]
        scaling = _ratios.both(two, one)
        target = 1.7 if mode == "batch" else 1.4
        met = _ratios.holds(scaling, ">=", target)
        missed += not met
        lines.append(
            f"{name:<12} {nodes:>5} {mode:<7} {statistics.median(one) / 1e6:>12.2f} "
            f"{statistics.median(two) / 1e6:>13.2f} {scaling[0]:>7.2f} / {scaling[1]:<5.2f} "
            f"{dict_scaling[0]:>5.2f} / {dict_scaling[1]:<5.2f} "
            f"{statistics.median(cpu[name, nodes, mode, 1]):>9.1f} "
            f"{statistics.median(cpu[name, nodes, mode, 2]):>9.1f} {target:>6.1f}x  "
            f"{'yes' if met else 'no'}")
    lines.append(f"{'dict (own)':<12} {'':>5} {'single':<7} {statistics.median(base[1]) / 1e6:>12.2f} "
                 f"{statistics.median(base[2]) / 1e6:>13.2f} {dict_scaling[0]:>7.2f} / "
                 f"{dict_scaling[1]:<5.2f} {'':>13} {statistics.median(base_cpu[1]):>9.1f} "
                 f"{statistics.median(base_cpu[2]):>9.1f}")
    list_scaling = _ratios.both(lists[2], lists[1])
    lines.append(f"{'list (own)':<12} {'':>5} {'batch':<7} {statistics.median(lists[1]) / 1e6:>12.2f} "
                 f"{statistics.median(lists[2]) / 1e6:>13.2f} {list_scaling[0]:>7.2f} / "
                 f"{list_scaling[1]:<5.2f} {'':>13} {statistics.median(lists_cpu[1]):>9.1f} "
                 f"{statistics.median(lists_cpu[2]):>9.1f}")
    lines.append("list (own): each thread copying its own list of 10,000 keys, the list every "
                 "batch answer also is (items a second)")
    lines += ["", "2 readers with a writer changing the router 10 times a second, over 2 readers without",
              f"{'family':<12} {'nodes':>5} {'lookup':<7} {'with / without':>15} {'target':>7}  met"]
    for key in writer_on:
        ratio = _ratios.both(writer_on[key], writer_off[key])
        met = _ratios.holds(ratio, ">=", 0.9)
        missed += not met
        name, nodes, mode = key
        lines.append(f"{name:<12} {nodes:>5} {mode:<7} {ratio[0]:>7.2f} / {ratio[1]:<5.2f} "
                     f"{0.9:>6.1f}x  {'yes' if met else 'no'}")
    lines += ["", f"targets missed by either ratio: {missed}; load {load()} at the end"]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
