"""``chash simulate``: remapping, balance and cost of the ring and its rivals, measured.

Routes ``--keys`` keys through a cluster growing from 3 to 20 nodes (and
losing one) with ``hash % N``, the ring, jump, rendezvous, Maglev and
bounded loads, and prints the tables (or ``--json``); ``--plot FILE.png``
also draws them.  See ``chash.simulate`` for what each figure means.

With ``--trace FILE``, replays an LLM request trace (Mooncake's JSONL
format) through N inference workers under each routing policy instead and
prints hit rate and time to first token side by side (``chash.simulate.
serving`` is the model, ``chash.simulate.policies`` the policies).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any

from chash._chash import HASHES
from chash.cli.args import positive_int
from chash.simulate import (
    DEFAULT_BALANCE_VNODES,
    DEFAULT_RING_VNODES,
    MAX_MAGLEV_SIZE,
    SimulationConfig,
    is_prime,
    plot,
    plot_path,
    render,
    simulate,
)
from chash.simulate.policies import POLICIES, compare
from chash.simulate.report import plot_comparison, render_comparison
from chash.simulate.serving import ServingConfig
from chash.simulate.trace import read_trace

__all__ = ["register", "run"]


def _node_range(text: str) -> tuple[int, int]:
    first, sep, last = text.partition(":")
    try:
        if not sep:
            raise ValueError
        low, high = int(first), int(last)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected FIRST:LAST such as 3:20, not {text!r}") from None
    if not 2 <= low < high <= 10_000:
        raise argparse.ArgumentTypeError(f"need 2 <= FIRST < LAST <= 10000, not {text!r}")
    return low, high


def _vnode_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, not {text!r}") from None
    if not all(1 <= v <= 100_000 for v in values):
        raise argparse.ArgumentTypeError(f"virtual node counts must lie between 1 and 100000: {text!r}")
    if len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"a virtual node count is repeated: {text!r}")
    return values


def _listed(values: tuple[int, ...]) -> str:
    return ",".join(map(str, values))


def _balance_factor(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 1.0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 1, not {text}")
    return value


def _positive_float(text: str) -> float:
    value = _number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, not {text}")
    return value


def _non_negative_float(text: str) -> float:
    value = _number(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, not {text}")
    return value


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, not {text}")
    return value


def _seed_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, not {text!r}") from None
    return values


def _config(args: argparse.Namespace) -> SimulationConfig:
    first, last = args.nodes
    return SimulationConfig(
        keys=args.keys,
        first_nodes=first,
        last_nodes=last,
        ring_vnodes=args.ring_vnodes,
        balance_vnodes=args.vnodes,
        bounded_vnodes=args.bounded_vnodes,
        balance_factor=args.balance_factor,
        maglev_size=args.maglev_size,
        hash=args.hash,
    )


def _error(message: str) -> int:
    print(f"chash simulate: error: {message}", file=sys.stderr)
    return 2


def _check_plot(path: str | None) -> int | None:
    """None when ``path`` can be drawn (or is None), else the exit code."""
    if path is None:
        return None
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        return _error(f"--plot: no such directory: {directory}")
    try:  # fail before the long run, not after
        plot_path(path)
    except ImportError as exc:  # matplotlib is missing: the message names the extra
        print(exc, file=sys.stderr)
        return 1
    except ValueError as exc:
        return _error(f"--plot: {exc}")
    return None


def _emit_json(result: dict[str, Any], target: str) -> None:
    text = json.dumps(result, indent=2)
    if target == "-":
        print(text)
    else:
        with open(target, "w", encoding="utf-8") as file:
            file.write(text + "\n")


def _run_trace(args: argparse.Namespace) -> int:
    try:
        config = ServingConfig(workers=args.workers, cache_blocks=args.cache_blocks,
                               prefill_rate=args.prefill_rate, decode_time=args.decode_time,
                               key_blocks=args.key_blocks, replicas=args.replicas,
                               shared_loads=args.shared_loads, balance_factor=args.balance_factor)
        requests = read_trace(args.trace)
    except (OSError, ValueError) as exc:
        return _error(f"--trace: {exc}")
    failed = _check_plot(args.plot)
    if failed is not None:
        return failed
    result = {"trace": os.path.basename(args.trace),
              **compare(requests, config, args.policy or list(POLICIES), args.seed)}
    if args.json != "-":
        print(render_comparison(result))
    if args.json is not None:
        _emit_json(result, args.json)
    if args.plot is not None:
        written = plot_comparison([result], args.plot)
        print(f"chash simulate: wrote {written}", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    """Entry point of ``chash simulate``; returns the exit code."""
    if args.trace is not None:
        return _run_trace(args)
    last = args.nodes[1]
    if not (is_prime(args.maglev_size) and last <= args.maglev_size <= MAX_MAGLEV_SIZE):
        return _error(f"--maglev-size must be a prime between LAST ({last}) and {MAX_MAGLEV_SIZE}, "
                      f"not {args.maglev_size}")
    try:
        config = _config(args)
    except ValueError as exc:
        return _error(str(exc))
    failed = _check_plot(args.plot)
    if failed is not None:
        return failed
    result = simulate(config)
    if args.json != "-":
        print(render(result))
    if args.json is not None:
        _emit_json(result, args.json)
    if args.plot is not None:
        written = plot(result, args.plot)
        print(f"chash simulate: wrote {written}", file=sys.stderr)
    return 0


def register(subparsers: Any) -> None:
    """Add ``simulate`` to the ``chash`` command."""
    parser = subparsers.add_parser(
        "simulate",
        help="keys remapped, load balance and ring cost, for the ring and other strategies",
        description="Measure how many keys move as a cluster grows or loses a node, how evenly "
                    "they spread, and what the ring costs, for hash % N, the ring, jump, "
                    "rendezvous, Maglev and bounded loads.",
    )
    parser.add_argument("--keys", type=positive_int, default=1_000_000,
                        help="keys to route (default 1,000,000)")
    parser.add_argument("--nodes", type=_node_range, default=(3, 20), metavar="FIRST:LAST",
                        help="grow the cluster from FIRST to LAST nodes (default 3:20)")
    parser.add_argument("--ring-vnodes", type=_vnode_list, default=DEFAULT_RING_VNODES, metavar="V,V,...",
                        help=f"virtual nodes of the ring columns (default {_listed(DEFAULT_RING_VNODES)})")
    parser.add_argument("--vnodes", type=_vnode_list, default=DEFAULT_BALANCE_VNODES, metavar="V,V,...",
                        help="virtual nodes of the balance and cost tables "
                             f"(default {_listed(DEFAULT_BALANCE_VNODES)})")
    parser.add_argument("--bounded-vnodes", type=_vnode_list, default=(10, 150), metavar="V,V,...",
                        help="rings the bounded-loads columns run over (default 10,150)")
    parser.add_argument("--balance-factor", type=_balance_factor, default=1.25, metavar="C",
                        help="bounded loads: no node above ceil(C * keys / nodes); with --trace, "
                             "chwbl's c (default 1.25)")
    parser.add_argument("--maglev-size", type=positive_int, default=65537, metavar="M",
                        help="Maglev table size, a prime (default 65537)")
    parser.add_argument("--hash", choices=HASHES, default="md5",
                        help="hash of keys and nodes (default md5)")
    parser.add_argument("--json", nargs="?", const="-", metavar="FILE",
                        help="print JSON instead of tables, or with FILE also write it there")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="also draw the figures (needs matplotlib)")
    trace = parser.add_argument_group(
        "LLM trace replay", "with --trace, route an LLM request trace through inference workers "
                            "with prefix caches, under each policy (docs/llm.md)")
    trace.add_argument("--trace", metavar="FILE",
                       help="a JSONL trace: timestamp (ms), input_length, output_length, hash_ids")
    trace.add_argument("--workers", type=positive_int, default=8, help="workers w0..w{N-1} (default 8)")
    trace.add_argument("--cache-blocks", type=positive_int, default=20_000, metavar="C",
                       help="blocks each worker's prefix cache holds (default 20,000)")
    trace.add_argument("--prefill-rate", type=_positive_float, default=8_000.0, metavar="P",
                       help="prefill tokens per second a worker (default 8,000)")
    trace.add_argument("--decode-time", type=_non_negative_float, default=0.02, metavar="D",
                       help="seconds per output token (default 0.02)")
    trace.add_argument("--key-blocks", type=positive_int, default=2, metavar="K",
                       help="leading blocks of the ring's key (default 2)")
    trace.add_argument("--replicas", type=positive_int, default=1, metavar="R",
                       help="gateway replicas, each request to one drawn at random (default 1)")
    trace.add_argument("--seed", type=_seed_list, default=(1, 2, 3), metavar="S,S,...",
                       help="seeds of the replica draw, figures averaged (default 1,2,3; "
                            "one replica runs once)")
    trace.add_argument("--shared-loads", action="store_true",
                       help="every replica sees the cluster's true load and queued work")
    trace.add_argument("--policy", action="append", choices=list(POLICIES),
                       help="a policy to run (repeatable; default all)")
    parser.set_defaults(func=run)
