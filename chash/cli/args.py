"""Argument types and ring options shared by the ``chash`` subcommands.

Each type is a callable for ``argparse``'s ``type=``: it returns the parsed
value or raises ``argparse.ArgumentTypeError`` with a message naming what
is wrong, which argparse prints after the option's name (exit code 2).
"""
from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping

from chash._chash import HASHES, LAYOUTS, MAX_VIRTUAL_NODES, ConsistentHashRouter

__all__ = [
    "add_ring_arguments",
    "build_router",
    "int_between",
    "positive_int",
    "seconds",
    "seconds_between",
    "weight_arg",
]


def _whole_number(text: str) -> int:
    """``text`` as an int; ``_`` and ``,`` may group digits (1_000, 1,000)."""
    try:
        return int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def _n(value: int) -> str:
    """Digits grouped by thousands from five digits on: 2000, 10,000."""
    return f"{value:,}" if abs(value) >= 10_000 else str(value)


def int_between(low: int, high: int | None = None) -> Callable[[str], int]:
    """A type: a whole number from ``low`` to ``high`` (no upper bound if None)."""
    def parse(text: str) -> int:
        value = _whole_number(text)
        if low == 1 or high is None:  # a positive (or at least low) count, maybe capped
            if value < low:
                raise argparse.ArgumentTypeError(f"must be >= {_n(low)}, not {_n(value)}")
            if high is not None and value > high:
                raise argparse.ArgumentTypeError(f"must be <= {_n(high)}, not {_n(value)}")
        elif not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {_n(low)} to {_n(high)}, not {_n(value)}")
        return value

    return parse


#: A whole number >= 1.
positive_int = int_between(1)


def _number_of_seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None


def seconds(text: str) -> float:
    """A type: a positive, finite number of seconds."""
    value = _number_of_seconds(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text}")
    return value


def seconds_between(low: float, high: float) -> Callable[[str], float]:
    """A type: a number of seconds in ``[low, high]``."""
    def parse(text: str) -> float:
        value = _number_of_seconds(text)
        if not low <= value <= high:  # False for NaN too
            raise argparse.ArgumentTypeError(f"must be from {low:g} to {high:g} seconds, not {text}")
        return value

    return parse


def weight_arg(text: str) -> tuple[str, float]:
    """A type: ``NODE=WEIGHT`` with a positive, finite weight."""
    node, sep, weight = text.rpartition("=")
    node = node.strip()
    if not sep or not node:
        raise argparse.ArgumentTypeError(f"expected NODE=WEIGHT, not {text!r}")
    try:
        value = float(weight)
    except ValueError:
        raise argparse.ArgumentTypeError(f"in {text!r}: the weight is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"in {text!r}: the weight must be positive")
    return node, value


def add_ring_arguments(parser: argparse.ArgumentParser) -> None:
    """``--vnodes``, ``--hash``, ``--layout`` and ``--weight``."""
    parser.add_argument("--vnodes", type=int_between(1, MAX_VIRTUAL_NODES), default=None, metavar="N",
                        help="virtual nodes per node of weight 1 "
                             "(default: the layout's, 100 for python)")
    parser.add_argument("--hash", choices=HASHES, default=None,
                        help="hash function (default: the layout's, md5; crc32 for nginx, "
                             "one_at_a_time for libmemcached)")
    parser.add_argument("--layout", choices=LAYOUTS, default="python",
                        help="how virtual nodes are named and placed (default python)")
    parser.add_argument("--weight", type=weight_arg, action="append", default=[],
                        metavar="NODE=WEIGHT",
                        help="give NODE this weight (default 1); repeatable")


def build_router(parser: argparse.ArgumentParser, args: argparse.Namespace,
                 nodes: list[str], zones: Mapping[str, str] | None = None,
                 ) -> ConsistentHashRouter:
    """The ring the arguments of ``add_ring_arguments`` describe over
    ``nodes`` (in the zones ``zones`` gives, if any); ``parser.error``
    (exit 2) if they do not make one."""
    weights = dict(args.weight)
    unknown = sorted(set(weights) - set(nodes))
    if unknown:
        parser.error(f"--weight names unknown node(s): {', '.join(unknown)}")
    try:
        router = ConsistentHashRouter(args.vnodes, hash=args.hash, layout=args.layout)
        for node in nodes:
            router.add_service_node(node, weights.get(node, 1.0),
                                    zone=(zones or {}).get(node))
    except (ValueError, OverflowError, MemoryError) as exc:
        parser.error(f"cannot build the ring: {exc}")
    return router
