"""The ``chash`` command: the entry point, with one subcommand per module.

Each subcommand lives in its own module ``chash.cli.<name>`` (``demo``,
``gateway``, ``ring``, ``route``, ``simulate``, ``spread``) defining
``register(subparsers)``, which adds its parser and sets ``func`` (a
callable taking the parsed arguments and returning the exit code); the
argument types they share are in ``chash.cli.args``.  Without a
subcommand, ``chash`` prints its help.

The command modules use the subsystems through their public names
(``chash.gateway``, ``chash.membership``, ``chash.compat``,
``chash.simulate``, ``chash.demo``) and the ring through ``chash._chash``;
nothing they use imports ``chash.cli``.
"""
from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Sequence

from chash._version import __version__

__all__ = ["SUBCOMMANDS", "build_parser", "main"]

#: Subcommands in the order ``chash --help`` lists them.
SUBCOMMANDS = ("demo", "gateway", "ring", "route", "simulate", "spread")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="chash",
        description="Consistent-hash routing for gateways: demo, gateway, ring, route, simulate, "
                    "spread.",
    )
    parser.add_argument("--version", action="version", version=f"chash {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"chash.cli.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (2 for bad arguments,
    141 when the reader of its output went away)."""
    parser = build_parser()
    command_line = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(command_line)
    args.command_line = command_line  # what a command reading a file tells apart from it
    if args.command is None:
        parser.print_help()
        return 0
    try:
        code: int = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (``chash route ... | head``): stop quietly,
        # with the status of a program ended by SIGPIPE, and keep the
        # interpreter's last flush at exit from failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    return code
