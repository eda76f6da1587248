"""``chash demo``: the whole product on real traffic, in about half a minute.

Starts three session-keeping backends on 127.0.0.1, the sticky gateway in
front of them and simulated users; stops one backend mid-run and restarts
it; prints the timeline, the figures, and whether every claim held (exit
code 0) or not (1).  See ``chash.demo`` for the scenario.  ``--rooms``:
chat rooms over WebSocket instead; ``--llm``: completions replayed through
the gateway to stand-in inference engines, for each policy.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from typing import Any

from chash._optional import MissingExtra, require
from chash.cli.args import int_between, seconds_between
from chash.demo import render_figures, render_rooms, run_demo, run_rooms_demo

__all__ = ["register", "run"]

MIN_DURATION = 2.0
MAX_DURATION = 600.0
MAX_USERS = 2000


def run(args: argparse.Namespace) -> int:
    """Entry point of ``chash demo``."""
    try:
        require("aiohttp", user="chash demo", extra="gateway")
    except MissingExtra as exc:
        print(exc, file=sys.stderr)
        return 1

    def out(line: str) -> None:
        print(line, flush=True)

    if args.llm:
        return _run_llm(args, out)
    if args.rooms:
        if not args.json:
            out(f"chash demo --rooms: 3 chat servers keeping their rooms in memory, a sticky "
                f"gateway in front, {args.users} players in rooms over WebSocket;\nbackend b "
                f"dies mid-run and comes back. Everything runs on 127.0.0.1 for about "
                f"{args.duration:g} s.\n")
        rooms = asyncio.run(run_rooms_demo(args.duration, args.users,
                                           out=None if args.json else out))
        if args.json:
            print(json.dumps(rooms.as_dict(), indent=2))
        else:
            out(render_rooms(rooms))
        return 0 if rooms.ok else 1
    if not args.json:
        out(f"chash demo: 3 backends keeping per-user sessions, a sticky gateway in front, "
            f"{args.users} users browsing;\nbackend b stops mid-run and comes back. "
            f"Everything runs on 127.0.0.1 for about {args.duration:g} s.\n")
    result = asyncio.run(run_demo(args.duration, args.users, out=None if args.json else out))
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
    else:
        out(render_figures(result))
    return 0 if result.ok else 1


def _run_llm(args: argparse.Namespace, out: Callable[[str], None]) -> int:
    """``chash demo --llm``: each gateway policy over the same completions."""
    from chash.demo.llm import generated_requests, render_llm, run_llm_demo
    from chash.simulate import read_trace

    if args.trace is not None:
        try:
            requests = read_trace(args.trace)[:args.requests]
        except (OSError, ValueError) as exc:
            print(f"chash demo --llm: {exc}", file=sys.stderr)
            return 2
    else:
        requests = generated_requests(args.requests)
    seconds = args.duration / 3
    if not args.json:
        out(f"chash demo --llm: 4 stand-in inference engines (a prompt cache each; not GPUs), "
            f"the gateway in front;\n{len(requests)} completions replayed in about "
            f"{seconds:g} s for each policy (ring, chwbl, prefix) on 127.0.0.1.\n")
    result = asyncio.run(run_llm_demo(requests, seconds=seconds,
                                      source=args.trace or "generated",
                                      out=None if args.json else out))
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
    else:
        out(render_llm(result))
    return 0 if result.ok else 1


def register(subparsers: Any) -> None:
    """Add ``demo`` to the ``chash`` command."""
    parser = subparsers.add_parser(
        "demo", help="a live sticky gateway surviving a backend's death",
        description="Run three session-keeping backends, the sticky gateway and simulated "
                    "users on 127.0.0.1; stop one backend mid-run and restart it; show "
                    "that only its users moved, that no request failed, and that exactly "
                    "they came back.  Needs aiohttp (pip install 'chash-router[gateway]').")
    parser.add_argument("--duration", type=seconds_between(MIN_DURATION, MAX_DURATION), default=30.0, metavar="S",
                        help=f"length of the run in seconds (default 30, at least "
                             f"{MIN_DURATION:g})")
    parser.add_argument("--users", type=int_between(3, MAX_USERS), default=60, metavar="N",
                        help="simulated users (default 60)")
    parser.add_argument("--rooms", action="store_true",
                        help="game rooms instead: players join chat rooms over WebSocket "
                             "through the gateway (--users players, 5 to a room); backend b "
                             "dies and comes back; its rooms move to one node each, together, "
                             "and return with close code 1012")
    parser.add_argument("--llm", action="store_true",
                        help="LLM inference instead: completions replayed through the gateway "
                             "to 4 stand-in engines with prompt caches, for each policy (ring, "
                             "chwbl, prefix), printing hit rate and TTFT side by side; "
                             "--duration is shared by the three")
    parser.add_argument("--trace", metavar="FILE",
                        help="with --llm: replay this Mooncake-format trace (JSONL, as chash "
                             "simulate --trace reads) instead of a generated workload")
    parser.add_argument("--requests", type=int_between(1, 100_000), default=300, metavar="N",
                        help="with --llm: completions replayed, the first N (default 300)")
    parser.add_argument("--json", action="store_true",
                        help="print the result as JSON instead of the timeline")
    parser.set_defaults(func=run)
