"""``chash simulate``: remapping, balance and cost of the ring and its rivals, measured.

Routes ``--keys`` keys through a cluster growing from 3 to 20 nodes (and
losing one) with ``hash % N``, the ring, jump, rendezvous, Maglev and
bounded loads, and prints the tables (or ``--json``); ``--plot FILE.png``
also draws them.  See ``chash.simulate`` for what each figure means.
"""
from __future__ import annotations

import argparse
import json
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


def run(args: argparse.Namespace) -> int:
    """Entry point of ``chash simulate``; returns the exit code."""
    last = args.nodes[1]
    if not (is_prime(args.maglev_size) and last <= args.maglev_size <= MAX_MAGLEV_SIZE):
        return _error(f"--maglev-size must be a prime between LAST ({last}) and {MAX_MAGLEV_SIZE}, "
                      f"not {args.maglev_size}")
    try:
        config = _config(args)
    except ValueError as exc:
        return _error(str(exc))
    if args.plot is not None:
        directory = os.path.dirname(os.path.abspath(args.plot))
        if not os.path.isdir(directory):
            return _error(f"--plot: no such directory: {directory}")
        try:  # fail before the long run, not after
            plot_path(args.plot)
        except ImportError as exc:  # matplotlib is missing: the message names the extra
            print(exc, file=sys.stderr)
            return 1
        except ValueError as exc:
            return _error(f"--plot: {exc}")
    result = simulate(config)
    print(json.dumps(result, indent=2) if args.json else render(result))
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
                        help="bounded loads: no node above ceil(C * keys / nodes) (default 1.25)")
    parser.add_argument("--maglev-size", type=positive_int, default=65537, metavar="M",
                        help="Maglev table size, a prime (default 65537)")
    parser.add_argument("--hash", choices=HASHES, default="md5",
                        help="hash of keys and nodes (default md5)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="also draw remapping and load spread (needs matplotlib)")
    parser.set_defaults(func=run)
