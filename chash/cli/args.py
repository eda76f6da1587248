"""Argument types and ring options shared by the ``chash`` subcommands.

Each type is a callable for ``argparse``'s ``type=``: it returns the parsed
value or raises ``argparse.ArgumentTypeError`` with a message naming what
is wrong, which argparse prints after the option's name (exit code 2).
"""
from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from chash._chash import (
    HASHES,
    LAYOUTS,
    MAX_VIRTUAL_NODES,
    AnchorRouter,
    ConsistentHashRouter,
    MaglevRouter,
    RendezvousRouter,
)

__all__ = [
    "FileValue",
    "ROUTER_LAYOUTS",
    "add_ring_arguments",
    "build_router",
    "file_value",
    "file_value_of",
    "make_any_router",
    "make_router",
    "int_between",
    "positive_int",
    "seconds",
    "seconds_between",
    "weight_arg",
]


_Type = TypeVar("_Type", bound=Callable[[str], Any])


@dataclass(frozen=True)
class FileValue:
    """How an argument type's value is written in a configuration file
    (``chash.cli.config_file``): the TOML types it takes there, and the
    parsed value back as the option's text, for the types whose value is
    no TOML value of its own (a ``HOST:PORT`` pair)."""

    types: tuple[type, ...] = (str,)
    """The TOML values the file may give (``str``, ``int``, ``float``,
    ``list``); each is turned into the option's text and parsed by the
    type, as on the command line."""
    text: Callable[[Any], str] | None = None
    """The parsed value as the option's text, or None when the value is a
    TOML value as it stands (a number, a string, a set of numbers)."""


_FILE_VALUES: dict[object, FileValue] = {int: FileValue((int,)), float: FileValue((int, float))}


def file_value(types: tuple[type, ...], text: Callable[[Any], str] | None = None,
               ) -> Callable[[_Type], _Type]:
    """Mark an argument type with the ``FileValue`` it takes in a
    configuration file; an unmarked type takes a TOML string."""
    def mark(parse: _Type) -> _Type:
        _FILE_VALUES[parse] = FileValue(types, text)
        return parse

    return mark


def file_value_of(parse: object) -> FileValue:
    """The ``FileValue`` of an argument type (a string's if unmarked)."""
    return _FILE_VALUES.get(parse, FileValue())


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

    return file_value((int,))(parse)


#: A whole number >= 1.
positive_int = int_between(1)


def _number_of_seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None


@file_value((int, float))
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

    return file_value((int, float))(parse)


@file_value((str,), lambda value: f"{value[0]}={value[1]!r}")
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


#: The routers ``--router`` offers and their layouts, the first the default.
#: Jump is not among them: a gateway must drop a backend from the middle of
#: its list, and a jump router can only drop its last bucket; anchor
#: (AnchorRouter) drops any, and is shared through --redis / --etcd too.
ROUTER_LAYOUTS: dict[str, tuple[str, ...]] = {
    "ring": (*LAYOUTS, "envoy", "grpc"),
    "maglev": ("envoy",),
    "rendezvous": ("hrw", "pymemcache", "caddy", "squid"),
    "anchor": ("anchor",),
}


def add_ring_arguments(parser: argparse.ArgumentParser, routers: bool = False) -> None:
    """``--vnodes``, ``--hash``, ``--layout`` and ``--weight``; with
    ``routers``, also ``--router`` (ring, maglev or rendezvous), and
    ``--layout`` offers every router's layouts."""
    parser.add_argument("--vnodes", type=int_between(1, MAX_VIRTUAL_NODES), default=None, metavar="N",
                        help="virtual nodes per node of weight 1 "
                             "(default: the layout's, 100 for python)")
    parser.add_argument("--hash", choices=HASHES if not routers else
                        tuple(dict.fromkeys([*HASHES, "murmur2_64"])), default=None,
                        help="hash function (default: the layout's, md5; crc32 for nginx, "
                             "one_at_a_time for libmemcached)")
    if not routers:
        parser.add_argument("--layout", choices=LAYOUTS, default="python",
                            help="how virtual nodes are named and placed (default python)")
    else:
        offered = "; ".join(f"{name}: {', '.join(layouts)}" for name, layouts in ROUTER_LAYOUTS.items())
        parser.add_argument("--layout", choices=tuple(dict.fromkeys(
                                layout for layouts in ROUTER_LAYOUTS.values() for layout in layouts)),
                            default=None,
                            help=f"the router's layout ({offered}; default the first)")
        parser.add_argument("--router", choices=tuple(ROUTER_LAYOUTS), default="ring",
                            help="ring (ConsistentHashRouter, default), maglev (MaglevRouter), "
                                 "rendezvous (RendezvousRouter) or anchor (AnchorRouter: any "
                                 "backend removed, only its keys moved; shared through --redis "
                                 "or --etcd with its state).  Jump is a library router only: a "
                                 "gateway must drop a failed backend from the middle of its list, "
                                 "and a jump router can only drop its last")
    parser.add_argument("--weight", type=weight_arg, action="append", default=[],
                        metavar="NODE=WEIGHT",
                        help="give NODE this weight (default 1); repeatable")


def make_router(args: argparse.Namespace, nodes: list[str],
                zones: Mapping[str, str] | None = None) -> ConsistentHashRouter:
    """The ring the arguments of ``add_ring_arguments`` describe over
    ``nodes`` (in the zones ``zones`` gives, if any); ValueError saying why
    if they do not make one."""
    weights = dict(args.weight)
    unknown = sorted(set(weights) - set(nodes))
    if unknown:
        raise ValueError(f"--weight names unknown node(s): {', '.join(unknown)}")
    try:
        router = ConsistentHashRouter(args.vnodes, hash=args.hash, layout=args.layout or "python")
        for node in nodes:
            router.add_service_node(node, weights.get(node, 1.0),
                                    zone=(zones or {}).get(node))
    except (ValueError, OverflowError, MemoryError) as exc:
        raise ValueError(f"cannot build the ring: {exc}") from exc
    return router


def build_router(parser: argparse.ArgumentParser, args: argparse.Namespace,
                 nodes: list[str], zones: Mapping[str, str] | None = None,
                 ) -> ConsistentHashRouter:
    """``make_router``, with ``parser.error`` (exit 2) if the arguments do
    not make a ring."""
    try:
        return make_router(args, nodes, zones)
    except ValueError as exc:
        parser.error(str(exc))


def make_any_router(args: argparse.Namespace, nodes: list[str],
                    zones: Mapping[str, str] | None = None,
                    ) -> ConsistentHashRouter | MaglevRouter | RendezvousRouter | AnchorRouter:
    """``make_router``, or with ``--router maglev`` / ``rendezvous`` /
    ``anchor`` (the arguments of ``add_ring_arguments(parser,
    routers=True)``) that router; ValueError saying why for what it has no
    room for (virtual nodes, zones, a ring shared through --redis or --etcd
    but for anchor's)."""
    kind = args.router
    if kind == "ring":
        return make_router(args, nodes, zones)
    weights = dict(args.weight)
    unknown = sorted(set(weights) - set(nodes))
    if unknown:
        raise ValueError(f"--weight names unknown node(s): {', '.join(unknown)}")
    layout = args.layout or ROUTER_LAYOUTS[kind][0]
    if layout not in ROUTER_LAYOUTS[kind]:
        raise ValueError(f"--router {kind} takes --layout {' or '.join(ROUTER_LAYOUTS[kind])}, "
                         f"not {layout}")
    if args.vnodes is not None:
        raise ValueError(f"--vnodes is the ring's: --router {kind} has no virtual nodes")
    if zones:
        raise ValueError(f"zones (@ZONE) are the ring's: --router {kind} has none")
    if kind != "anchor" and (getattr(args, "redis", None) or getattr(args, "etcd", None)):
        raise ValueError(f"--redis and --etcd share a ring: --router {kind} cannot be shared "
                         "(use --router ring or anchor)")
    try:
        router: MaglevRouter | RendezvousRouter | AnchorRouter
        if kind == "anchor":
            router = AnchorRouter(hash=cast(Any, args.hash or "xxh64"))
        elif kind == "maglev":
            router = MaglevRouter(hash=args.hash or "xxh64")
        elif args.hash is not None:
            router = RendezvousRouter(layout=cast(Any, layout), hash=args.hash)
        else:
            router = RendezvousRouter(layout=cast(Any, layout))
        for node in nodes:
            router.add_service_node(node, weights.get(node, 1.0))
    except (ValueError, TypeError, OverflowError, MemoryError) as exc:
        raise ValueError(f"cannot build the {kind} router: {exc}") from exc
    return router

