"""``chash ring``: the operator's tool for a ring shared through Redis or etcd.

``chash ring show|add|remove|weight|drain|history ... --redis URL | --etcd
URL[,URL...] [--ring NAME]`` reads or changes the shared ring through the
membership's own operator calls (``RedisMembership``, ``EtcdMembership``,
joined with ``from_store``: the router and quorum the ring was made
with), so that a change is made exactly as a gateway makes it: one atomic
operation of the store, announced to every instance.

Exit codes: 0 when the change was committed (its version is printed) or
the read succeeded; 1 when it could not be committed or read (the store
unreachable, no quorum, too few replicas acknowledged it: ``--redis-min-replicas``,
a refusal); 2 for bad
input (an unknown node, a weight that is not a positive number, a store
that holds no chash ring of that name), with nothing changed.
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from chash._chash import AnchorRouter
from chash._optional import require

__all__ = ["RingError", "register"]

#: Every subcommand, as ``chash ring --help`` lists them.
ACTIONS = ("show", "add", "remove", "weight", "drain", "history")


class RingError(Exception):
    """A ``chash ring`` command that cannot go on: ``code`` is its exit
    status (1: not committed or not read; 2: bad input, nothing changed),
    the message its one line of error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _bad(message: str) -> RingError:
    return RingError(2, message)


def _failed(message: str) -> RingError:
    return RingError(1, message)


# -- input ---------------------------------------------------------------------

def parse_weight(text: str) -> float:
    """``text`` as a positive, finite weight; RingError (exit 2) if not."""
    try:
        weight = float(text)
    except ValueError:
        raise _bad(f"the weight must be a positive number, not {text!r}") from None
    if not math.isfinite(weight) or weight <= 0:
        raise _bad(f"the weight must be a positive number, not {text!r}")
    return weight


def _g(weight: float) -> str:
    return f"{weight:g}"


# -- the store --------------------------------------------------------------------

class _Ring:
    """The shared ring a command works on: the membership (not started:
    its operator calls and ``refresh`` work without the threads), its
    settings read from the store, and where it is."""

    def __init__(self, membership: Any, where: str, store: str) -> None:
        self.membership = membership
        self.where = where
        self.store = store

    @property
    def name(self) -> str:
        return str(self.membership.name)


def _joined(where: str, ring: str, join: Callable[[], Any]) -> Any:
    """``join()``, the membership of the ring as the store holds it
    (``from_store``), its errors as RingErrors: no such ring, or not one
    this command can reproduce, is bad input; a refusal or an outage a
    failure."""
    from chash.membership import RingMissingError

    try:
        return join()
    except RingMissingError as exc:
        raise _bad(f"{where}: {exc}") from None
    except PermissionError as exc:
        raise _failed(f"{where} refused this command: {exc}") from None
    except ValueError as exc:
        raise _bad(f"{where}: ring {ring!r}: {exc}") from None
    except Exception as exc:
        raise _failed(f"cannot read ring {ring!r}: {where} unreachable ({exc})") from None


@contextmanager
def open_ring(args: argparse.Namespace) -> Iterator[_Ring]:
    """The ring ``--redis`` or ``--etcd`` names, its membership refreshed
    (so that ``membership.state`` and the router are the stored ring);
    RingError if there is none, or the store cannot be read."""
    if args.etcd:
        require("httpx", user="chash ring --etcd", extra="etcd")
        import logging

        logging.getLogger("httpx").setLevel(logging.WARNING)
        from chash.membership import EtcdMembership

        where = f"etcd at {args.etcd}"
        membership: Any = _joined(where, args.ring, lambda: EtcdMembership.from_store(
            args.etcd, args.ring, timeout=args.timeout))
        closing: Callable[[], None] = membership.close
        store = "etcd"
    else:
        redis = require("redis", user="chash ring --redis", extra="redis", package="redis-py")
        from chash.membership import RedisMembership

        where = f"Redis at {args.redis}"
        client = redis.Redis.from_url(args.redis, socket_timeout=args.timeout,
                                      socket_connect_timeout=args.timeout)
        try:
            membership = _joined(where, args.ring, lambda: RedisMembership.from_store(
                client, args.ring, min_replicas=args.redis_min_replicas,
                replica_timeout=args.timeout / 2))
        except BaseException:
            client.close()
            raise
        closing = client.close
        store = "Redis"
    try:
        ring = _Ring(membership, where, store)
        _call(ring, "read", membership.refresh)
        yield ring
    finally:
        closing()


def _call(ring: _Ring, what: str, call: Callable[[], Any]) -> Any:
    """``call()``, its errors as RingErrors: an unknown node is bad input;
    a refusal, an outage or anything the store said is a failure."""
    from chash.membership import RingMissingError

    try:
        return call()
    except KeyError as exc:
        raise _bad(f"ring {ring.name!r} holds no node {exc.args[0]!r}; nothing changed") from None
    except RingMissingError as exc:
        raise _bad(str(exc)) from None
    except (ValueError, TypeError) as exc:
        raise _failed(f"{what} refused: {exc}") from None
    except Exception as exc:
        raise _failed(f"could not {what} ring {ring.name!r} in {ring.where}: "
                      f"{type(exc).__name__}: {exc}") from None


def _known(ring: _Ring, node: str) -> float:
    """The weight of ``node`` in the ring; RingError (exit 2) if unknown."""
    state = ring.membership.state
    if state is None or node not in state.weights:
        raise _bad(f"ring {ring.name!r} holds no node {node!r}; nothing changed")
    return float(state.weights[node])


def _committed(ring: _Ring, what: str, version: int, before: int) -> None:
    if version == before:
        print(f"ring {ring.name}: {what}: nothing to change, at version {version}")
    else:
        print(f"ring {ring.name}: {what}: committed at version {version}")


# -- the subcommands ------------------------------------------------------------

def describe(ring: _Ring) -> dict[str, Any]:
    """What ``show --json`` prints: the ring as the store holds it."""
    membership = ring.membership
    state = membership.state
    nodes = []
    for node, weight in state.weights.items():
        entry: dict[str, Any] = {"node": node, "weight": weight,
                                 "zone": state.zones.get(node), "state": "in service"}
        if node in state.disabled:
            entry.update(state="disabled", reason=state.disabled[node])
        elif node in state.down:
            verdict = state.down[node]
            entry.update(state="down", reason=verdict.reason, votes=verdict.votes,
                         reporters=verdict.reporters, since=verdict.since)
        nodes.append(entry)
    router = membership.router
    shown = {"ring": ring.name, "store": ring.store, "epoch": state.epoch,
             "version": state.version, "fingerprint": router.fingerprint(),
             "config": state.config, "in_service": len(state.ring()), "nodes": nodes}
    if isinstance(router, AnchorRouter):
        # the mapping kept under the version: hash4j's state, the node ids
        shown["anchor"] = {"state": router.state().hex(),
                           "buckets": {node: router.bucket_of(node) for node in router.nodes}}
    return shown


def _show(ring: _Ring, args: argparse.Namespace) -> int:
    shown = describe(ring)
    if args.json:
        print(json.dumps(shown, indent=2))
        return 0
    print(f"ring {shown['ring']} in {ring.where}: version {shown['version']} "
          f"(epoch {shown['epoch']}), fingerprint {shown['fingerprint']}")
    print(f"{len(shown['nodes'])} nodes, {shown['in_service']} in service")
    width = max([4] + [len(entry["node"]) for entry in shown["nodes"]])
    zone_width = max([4] + [len(entry["zone"] or "-") for entry in shown["nodes"]])
    print(f"{'NODE':<{width}}  {'WEIGHT':>8}  {'ZONE':<{zone_width}}  STATE")
    for entry in shown["nodes"]:
        status = entry["state"]
        if status == "disabled":
            status = f"disabled: {entry['reason']}"
        elif status == "down":
            status = (f"down: {entry['votes']} of {entry['reporters']} reporters "
                      f"voted it down: {entry['reason']}")
        print(f"{entry['node']:<{width}}  {_g(entry['weight']):>8}  "
              f"{entry['zone'] or '-':<{zone_width}}  {status}")
    return 0


def parse_zone(text: str | None) -> str | None:
    """``--zone``: None (keep the node's zone) or a zone name as the
    gateways' ``--backend NAME=HOST:PORT@ZONE`` can name it ('' for no
    zone); RingError (exit 2) if not."""
    if text is None:
        return None
    zone = text.strip()
    if zone != text or "," in zone or "@" in zone or any(c.isspace() for c in zone):
        raise _bad(f"the zone must be a name without spaces, ',' or '@', not {text!r}")
    return zone


def _add(ring: _Ring, args: argparse.Namespace) -> int:
    weight = parse_weight(args.weight)
    zone = parse_zone(args.zone)
    before = ring.membership.version
    version = _call(ring, f"add {args.node!r} to",
                    lambda: ring.membership.add_node(args.node, weight, zone=zone))
    where = "" if zone is None else f", zone {zone}" if zone else ", no zone"
    _committed(ring, f"add {args.node} (weight {_g(weight)}{where})", version, before)
    return 0


def _remove(ring: _Ring, args: argparse.Namespace) -> int:
    _known(ring, args.node)
    before = ring.membership.version
    version = _call(ring, f"remove {args.node!r} from",
                    lambda: ring.membership.remove_node(args.node, force=args.force))
    _committed(ring, f"remove {args.node}", version, before)
    return 0


def _weight(ring: _Ring, args: argparse.Namespace) -> int:
    weight = parse_weight(args.weight)
    _known(ring, args.node)
    before = ring.membership.version
    version = _call(ring, f"reweigh {args.node!r} in",
                    lambda: ring.membership.add_node(args.node, weight))
    _committed(ring, f"weight {args.node} {_g(weight)}", version, before)
    return 0


def drain_steps(weight: float, over: float) -> list[float]:
    """The weights ``drain`` sets, one a second or so (2 to 10 of them),
    before it removes the node: ``weight`` ramped down towards nothing."""
    if over <= 0:
        return []
    count = max(2, min(10, math.ceil(over)))
    return [weight * (count - k) / count for k in range(1, count)]


def _drain(ring: _Ring, args: argparse.Namespace) -> int:
    weight = _known(ring, args.node)
    steps = drain_steps(weight, args.over)
    pause = args.over / len(steps) if steps else 0.0
    for step in steps:
        before = ring.membership.version
        version = _call(ring, f"reweigh {args.node!r} in",
                        functools.partial(ring.membership.add_node, args.node, step))
        _committed(ring, f"drain {args.node}: weight {_g(step)}", version, before)
        sys.stdout.flush()
        time.sleep(pause)
    before = ring.membership.version
    version = _call(ring, f"remove {args.node!r} from",
                    lambda: ring.membership.remove_node(args.node, force=args.force))
    _committed(ring, f"drain {args.node}: removed", version, before)
    return 0


def _history(ring: _Ring, args: argparse.Namespace) -> int:
    changes = _call(ring, "read the history of", ring.membership.history)
    if args.json:
        print(json.dumps([{"epoch": c.epoch, "version": c.version, "action": c.action,
                           "node": c.node, "value": c.value, "at": c.at} for c in changes],
                         indent=2))
        return 0
    if not changes:
        print(f"ring {ring.name}: no change recorded")
    for change in changes:
        at = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(change.at))
        print(f"{change.version:>8}  {at}Z  {change.action:<8} {change.node}"
              f"{'  ' + change.value if change.value else ''}")
    return 0


_RUN: dict[str, Callable[[_Ring, argparse.Namespace], int]] = {
    "show": _show, "add": _add, "remove": _remove, "weight": _weight, "drain": _drain,
    "history": _history,
}


def run(args: argparse.Namespace) -> int:
    """Run ``chash ring ACTION``; its exit code."""
    if bool(args.redis) == bool(args.etcd):
        print("chash ring: error: give --redis URL or --etcd URL[,URL...] (one of them)",
              file=sys.stderr)
        return 2
    if args.etcd and args.redis_min_replicas is not None:
        print("chash ring: error: --redis-min-replicas is for --redis (etcd commits on a "
              "majority of its members)", file=sys.stderr)
        return 2
    try:
        with open_ring(args) as ring:
            return _RUN[args.action](ring, args)
    except RingError as exc:
        print(f"chash ring: error: {exc}", file=sys.stderr)
        return exc.code


def _store_arguments() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--redis", metavar="URL",
                        help="the ring is in Redis (redis://HOST:PORT/DB)")
    parent.add_argument("--etcd", metavar="URL[,URL...]",
                        help="the ring is in etcd (every member's client URL)")
    parent.add_argument("--ring", metavar="NAME", default="default",
                        help="the shared ring's name (default 'default')")
    parent.add_argument("--redis-min-replicas", type=_count, default=None, metavar="N",
                        help="with --redis: a change counts as committed only once N replicas "
                             "acknowledged it (Redis WAIT, half of --timeout); default 1 when "
                             "the primary shows a replica connected, else 0")
    parent.add_argument("--timeout", type=_seconds, default=2.0, metavar="S",
                        help="seconds the store is given to answer each call (default 2)")
    return parent


def _seconds(text: str) -> float:
    from chash.cli.args import seconds

    return seconds(text)


def _count(text: str) -> int:
    from chash.cli.args import int_between

    return int_between(0)(text)


def _non_negative_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be zero or more seconds, not {text}")
    return value


def register(subparsers: Any) -> None:
    """Add ``chash ring`` and its subcommands."""
    parser = subparsers.add_parser(
        "ring", help="show or change a ring shared through Redis or etcd",
        description="Show or change a ring shared through Redis or etcd, as the gateways "
                    "share it. A change prints the version it was committed at (exit 0), or "
                    "fails with exit 1 when it could not be committed; bad input exits 2 "
                    "with nothing changed.")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    store = _store_arguments()
    show = actions.add_parser("show", parents=[store],
                              help="nodes, weights, zones, states, health verdicts, "
                                   "version, fingerprint")
    show.add_argument("--json", action="store_true", help="print it as JSON")
    add = actions.add_parser("add", parents=[store], help="add a node (or reweigh it)")
    add.add_argument("node", metavar="NODE")
    add.add_argument("--weight", default="1", metavar="W", help="its weight (default 1)")
    add.add_argument("--zone", metavar="Z",
                     help="its zone, which gateways with --zone Z prefer ('' for none; "
                          "default: the zone it has, none for a new node)")
    remove = actions.add_parser("remove", parents=[store], help="remove a node")
    remove.add_argument("node", metavar="NODE")
    remove.add_argument("--force", action="store_true",
                        help="even if it takes more than half of the nodes in service out")
    weight = actions.add_parser("weight", parents=[store], help="give a node a new weight")
    weight.add_argument("node", metavar="NODE")
    weight.add_argument("weight", metavar="W")
    drain = actions.add_parser("drain", parents=[store],
                               help="ramp a node's weight down over S seconds, then remove it")
    drain.add_argument("node", metavar="NODE")
    drain.add_argument("--over", type=_non_negative_seconds, default=60.0, metavar="S",
                       help="seconds the ramp takes (default 60; 0 removes it at once)")
    drain.add_argument("--force", action="store_true",
                       help="remove it even if that takes more than half of the nodes in "
                            "service out")
    history = actions.add_parser("history", parents=[store],
                                 help="the last changes, with their versions")
    history.add_argument("--json", action="store_true", help="print them as JSON")
    parser.set_defaults(func=run)
