"""``chash spread``: the documented example cluster under a million keys.

Routes keys ``user_0`` .. ``user_{N-1}`` through the documented cluster
(three ``order-service`` nodes, 50 virtual nodes each), prints how they
spread, then how many keys move when a node is added or removed, beside
``hash(key) % N`` on the same keys (the hash being the ring's own MD5 point).
"""
from __future__ import annotations

import argparse
import json
import time
from typing import Any

from chash._chash import ConsistentHashRouter
from chash._text import plural
from chash.cli.args import positive_int

__all__ = ["DOCUMENTED_NODES", "measure", "register", "render", "run"]

#: The documented example cluster.
DOCUMENTED_NODES = ("order-service-v1", "order-service-v2", "order-service-v3")


def _moved(before: list[Any], after: list[Any]) -> int:
    return sum(1 for a, b in zip(before, after, strict=True) if a != b)


def measure(keys: int, vnodes: int) -> dict[str, Any]:
    """Spread and movement figures for ``keys`` keys (a JSON-ready dict)."""
    router = ConsistentHashRouter(vnodes)
    for node in DOCUMENTED_NODES:
        router.add_service_node(node)
    names = [f"user_{i}" for i in range(keys)]
    started = time.perf_counter()
    owners = router.get_target_nodes(names)
    route_seconds = time.perf_counter() - started
    spread = {node: owners.count(node) for node in DOCUMENTED_NODES}

    points = [router._calculate_hash(name) for name in names]
    modulo = [p % 3 for p in points]

    grown = ConsistentHashRouter(vnodes)
    for node in (*DOCUMENTED_NODES, "order-service-v4"):
        grown.add_service_node(node)
    shrunk = ConsistentHashRouter(vnodes)
    for node in DOCUMENTED_NODES:
        if node != "order-service-v2":
            shrunk.add_service_node(node)
    return {
        "keys": keys,
        "virtual_node_count": vnodes,
        "route_seconds": route_seconds,
        "spread": spread,
        "add_node": {
            "ring_moved": _moved(owners, grown.get_target_nodes(names)),
            "modulo_moved": _moved(modulo, [p % 4 for p in points]),
            "ideal_moved": keys // 4,
        },
        "remove_node": {
            "ring_moved": _moved(owners, shrunk.get_target_nodes(names)),
            "modulo_moved": _moved(modulo, [p % 2 for p in points]),
            "ideal_moved": spread["order-service-v2"],
        },
    }


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:5.1f}%"


def render(result: dict[str, Any]) -> str:
    """The figures as a short readable report."""
    keys = result["keys"]
    lines = [
        f"{plural(keys, 'key')} over {plural(len(result['spread']), 'node')} "
        f"({plural(result['virtual_node_count'], 'virtual node')} each), "
        f"routed in {result['route_seconds']:.2f} s",
        "",
        "spread:",
    ]
    for node, count in result["spread"].items():
        lines.append(f"  {node:<20} {count:>10,}  {_pct(count, keys)}")
    lines += ["", f"{'keys that move':<28}{'ring':>16}{'hash % N':>16}{'minimum':>16}"]
    for label, row in (("add order-service-v4", result["add_node"]),
                       ("remove order-service-v2", result["remove_node"])):
        lines.append(
            f"  {label:<26}"
            + "".join(f"{row[k]:>9,} {_pct(row[k], keys)}" for k in ("ring_moved", "modulo_moved", "ideal_moved"))
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``chash spread``."""
    result = measure(args.keys, args.vnodes)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


def register(subparsers: Any) -> None:
    """Add ``spread`` to the ``chash`` command."""
    parser = subparsers.add_parser(
        "spread", help="spread and key movement on the documented cluster",
        description="Route keys user_0 .. user_{N-1} through the documented cluster (three "
                    "order-service nodes, 50 virtual nodes each); print how they spread, then "
                    "how many move when a node is added or removed, beside hash % N on the same "
                    "keys.")
    parser.add_argument("--keys", type=positive_int, default=1_000_000, metavar="N",
                        help="keys to route (default 1,000,000)")
    parser.add_argument("--vnodes", type=positive_int, default=50, metavar="N",
                        help="virtual nodes per node (default 50)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=run)
