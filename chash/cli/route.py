"""``chash route``: where keys go on a given ring, with their preference lists.

The nodes come from ``--nodes a,b,c``, from ``--nodes-file FILE``, or from
standard input (``--nodes -``); a file holds node names separated by new
lines or commas, with ``#`` comments.  The ring is built exactly as a
router with the same options would build it, so the answer is the one a
gateway using those options gives.  ``--nginx-conf FILE --upstream NAME``,
``--twemproxy-conf FILE --pool NAME`` and ``--haproxy-conf FILE --backend
NAME`` build the ring those programs build from their configuration
instead (``chash.compat``), so the answer is where they send the key.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from typing import Any

from chash._chash import ConsistentHashRouter
from chash._text import plural
from chash.cli.args import add_ring_arguments, build_router, positive_int

__all__ = ["parse_node_list", "register", "render", "route", "run"]


def parse_node_list(lines: Iterable[str]) -> list[str]:
    """Node names from lines of text: split on commas, ``#`` starts a
    comment, blanks ignored.  ValueError on a duplicate."""
    nodes: list[str] = []
    seen: set[str] = set()
    for line in lines:
        for item in line.split("#", 1)[0].split(","):
            node = item.strip()
            if not node:
                continue
            if node in seen:
                raise ValueError(f"node {node!r} is listed twice")
            seen.add(node)
            nodes.append(node)
    return nodes


def _read_nodes(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    source = args.nodes_file if args.nodes_file is not None else args.nodes
    try:
        if args.nodes == "-" or args.nodes_file == "-":
            nodes = parse_node_list(sys.stdin)
        elif args.nodes_file is not None:
            try:
                with open(args.nodes_file, encoding="utf-8") as stream:
                    nodes = parse_node_list(stream)
            except (OSError, UnicodeDecodeError) as exc:
                parser.error(f"cannot read nodes file {args.nodes_file!r}: "
                             f"{getattr(exc, 'strerror', None) or exc}")
        else:
            nodes = parse_node_list([args.nodes])
    except ValueError as exc:
        parser.error(str(exc))
    if not nodes:
        parser.error(f"no nodes in {'standard input' if source == '-' else repr(source)}")
    return nodes


def route(router: ConsistentHashRouter, keys: Iterable[str], n: int) -> list[dict[str, Any]]:
    """For each key: its ring point, owner and preference list of ``n``."""
    return [{
        "key": key,
        "point": router._calculate_hash(key),
        "owner": router.get_target_node(key),
        "preference": router.get_preference_list(key, n),
    } for key in keys]


def render(router: ConsistentHashRouter, answers: list[dict[str, Any]]) -> str:
    """The answers as short readable blocks."""
    ring = (f"{plural(len(router), 'node')}, "
            f"{plural(router.virtual_node_count, 'virtual node')} per weight 1, "
            f"{router.hash} hash, {router.layout} layout")
    blocks = []
    for answer in answers:
        preference = "  ".join(f"{i}. {node}" for i, node in enumerate(answer["preference"], 1))
        blocks.append("\n".join([
            f"key         {answer['key']}",
            f"ring point  {answer['point']:,} of 2**32 ({ring})",
            f"owner       {answer['owner']}",
            f"preference  {preference}",
        ]))
    return "\n\n".join(blocks)


def _router_from_conf(parser: argparse.ArgumentParser,
                      args: argparse.Namespace) -> ConsistentHashRouter:
    """The ring of an nginx upstream or a twemproxy pool named by the
    arguments; ``parser.error`` (exit 2) naming the problem otherwise."""
    from chash.compat import ConfigError, haproxy_backend, nginx_upstream, twemproxy_pool

    build: Callable[[str, str], ConsistentHashRouter]
    if args.nginx_conf is not None:
        path, name, flag, build = args.nginx_conf, args.upstream, "--upstream", nginx_upstream
        conf_flag = "--nginx-conf"
    elif args.haproxy_conf is not None:
        path, name, flag, build = args.haproxy_conf, args.backend, "--backend", haproxy_backend
        conf_flag = "--haproxy-conf"
    else:
        path, name, flag, build = args.twemproxy_conf, args.pool, "--pool", twemproxy_pool
        conf_flag = "--twemproxy-conf"
    if name is None:
        parser.error(f"{flag} NAME is needed with {conf_flag}")
    if args.vnodes is not None or args.hash is not None or args.layout != "python" or args.weight:
        parser.error("--vnodes, --hash, --layout and --weight come from the configuration file")
    try:
        with open(path, encoding="utf-8") as stream:
            text = stream.read()
    except (OSError, UnicodeDecodeError) as exc:
        parser.error(f"cannot read {path!r}: {getattr(exc, 'strerror', None) or exc}")
    try:
        return build(text, name)
    except ConfigError as exc:
        parser.error(f"{path}: {exc}")
    except ValueError as exc:
        parser.error(f"{path}: cannot build the ring: {exc}")


def run(args: argparse.Namespace) -> int:
    """Entry point of ``chash route``."""
    parser: argparse.ArgumentParser = args.route_parser
    if args.nginx_conf is not None or args.twemproxy_conf is not None or args.haproxy_conf is not None:
        router = _router_from_conf(parser, args)
    else:
        if args.upstream is not None or args.pool is not None or args.backend is not None:
            parser.error("--upstream goes with --nginx-conf, --pool with --twemproxy-conf, "
                         "--backend with --haproxy-conf")
        nodes = _read_nodes(parser, args)
        router = build_router(parser, args, nodes)
    answers = route(router, args.keys, args.n)
    if args.json:
        print(json.dumps(answers, indent=2))
    else:
        print(render(router, answers))
    return 0


def register(subparsers: Any) -> None:
    """Add ``route`` to the ``chash`` command."""
    parser = subparsers.add_parser(
        "route", help="where keys go on a ring, with their preference lists",
        description="Print the owner and preference list of each KEY on the ring "
                    "made of the given nodes.")
    parser.add_argument("keys", nargs="+", metavar="KEY", help="the key(s) to route")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--nodes", metavar="A,B,C",
                        help="comma-separated node names, or - to read them from stdin")
    source.add_argument("--nodes-file", metavar="FILE",
                        help="a file of node names, one a line (or comma-separated; "
                             "# comments); - for stdin")
    source.add_argument("--nginx-conf", metavar="FILE",
                        help="route as nginx does with this configuration's upstream "
                             "(--upstream NAME; 'hash KEY consistent')")
    source.add_argument("--twemproxy-conf", metavar="FILE",
                        help="route as twemproxy (nutcracker) does with this configuration's "
                             "pool (--pool NAME; 'distribution: ketama', 'hash: md5')")
    source.add_argument("--haproxy-conf", metavar="FILE",
                        help="route as HAProxy 2.6 does with this configuration's backend "
                             "(--backend NAME; 'hash-type consistent'); KEY is what its "
                             "balance hashes, e.g. the header's value for hdr(NAME)")
    parser.add_argument("--upstream", metavar="NAME", help="the upstream of --nginx-conf")
    parser.add_argument("--backend", metavar="NAME", help="the backend of --haproxy-conf")
    parser.add_argument("--pool", metavar="NAME", help="the pool of --twemproxy-conf")
    add_ring_arguments(parser)
    parser.add_argument("-n", type=positive_int, default=3, metavar="N",
                        help="length of the preference list (default 3)")
    parser.add_argument("--json", action="store_true",
                        help="print a JSON list, one object per key")
    parser.set_defaults(func=run, route_parser=parser)
