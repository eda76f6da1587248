"""``chash gateway``: run the sticky reverse proxy of ``chash.gateway``.

    chash gateway --listen 127.0.0.1:8080 --backend 127.0.0.1:9001 \\
        --backend 127.0.0.1:9002 --key header:X-User-Id

Runs until interrupted (Ctrl-C, SIGTERM) or for ``--duration`` seconds.
Health transitions and failed backend requests are logged to stderr.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import TYPE_CHECKING, Any

from chash._cli_args import add_ring_arguments, build_router, positive_int, seconds

if TYPE_CHECKING:
    from chash.gateway import Gateway

__all__ = ["register", "run", "serve"]


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise argparse.ArgumentTypeError(
            f"expected HOST:PORT (port 0 to 65535; 0 picks a free one), not {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def _key(text: str) -> str:
    from chash.gateway import KeyRule

    try:
        KeyRule.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _backend(text: str) -> list[tuple[str, str]]:
    """``[NAME=]HOST:PORT``, or several separated by commas."""
    from chash.gateway import parse_address

    backends = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, address = item.rpartition("=")
        try:
            address = parse_address(address)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        backends.append((name.strip() if sep else address, address))
    if not backends:
        raise argparse.ArgumentTypeError(f"no backend in {text!r}")
    return backends


async def serve(gateway: Gateway, host: str, port: int, duration: float | None = None) -> None:
    """Run ``gateway`` on ``host:port`` until SIGINT/SIGTERM or ``duration``
    seconds, printing where it listens."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    handled = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, stop.set)
            handled.append(signum)
        except (NotImplementedError, RuntimeError):  # not the main thread, or Windows
            pass
    try:
        url = await gateway.start(host, port)
        try:
            nodes = ", ".join(f"{node}={address}" if node != address else node
                              for node, address in gateway.addresses.items())
            print(f"chash gateway listening on {url}\n"
                  f"  key {gateway.key_rule}; backends {nodes}\n"
                  f"  status {url}{gateway.status_path}"
                  + (f", metrics {url}{gateway.metrics_path}" if gateway.registry is not None
                     else ""),
                  flush=True)
            try:
                await asyncio.wait_for(stop.wait(), duration)
            except TimeoutError:
                pass
            print("chash gateway stopping", flush=True)
        finally:
            await gateway.stop()
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``chash gateway``."""
    parser: argparse.ArgumentParser = args.gateway_parser
    backends: dict[str, str] = {}
    for name, address in (pair for group in args.backend for pair in group):
        if name in backends:
            parser.error(f"backend {name} is listed twice")
        backends[name] = address
    if not backends:
        parser.error("at least one --backend is required")
    router = build_router(parser, args, list(backends))
    logging.basicConfig(level=getattr(logging, args.log_level.upper()), stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        from chash.gateway import Gateway

        gateway = Gateway(
            backends, router=router, key=args.key, missing_key=args.missing_key,
            attempts=args.attempts, connect_timeout=args.connect_timeout,
            read_timeout=args.read_timeout, retry_unsafe=args.retry_unsafe,
            health=not args.no_health, health_path=args.health_path,
            health_interval=args.health_interval, health_timeout=args.health_timeout,
            fall=args.fall, rise=args.rise, metrics=False if args.no_metrics else None,
            node_header=args.node_header)
    except ImportError as exc:
        print(f"chash gateway: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        parser.error(str(exc))
    host, port = args.listen
    try:
        asyncio.run(serve(gateway, host, port, args.duration))
    except OSError as exc:
        print(f"chash gateway: cannot listen on {host}:{port}: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    return 0


def register(subparsers: Any) -> None:
    """Add ``gateway`` to the ``chash`` command."""
    parser = subparsers.add_parser(
        "gateway", help="a sticky HTTP reverse proxy over the ring",
        description="Proxy HTTP requests to backends chosen by consistent hashing of a "
                    "key taken from each request; fail over along the key's preference "
                    "list; health-check the backends.  Needs aiohttp "
                    "(pip install 'chash-router[gateway]').")
    parser.add_argument("--listen", type=_listen, default=("127.0.0.1", 8080),
                        metavar="HOST:PORT", help="where to listen (default 127.0.0.1:8080)")
    parser.add_argument("--backend", type=_backend, action="append", default=[],
                        metavar="[NAME=]HOST:PORT",
                        help="a backend; repeatable or comma-separated.  NAME is its node "
                             "name on the ring (default: the address)")
    parser.add_argument("--key", type=_key, default="header:X-User-Id", metavar="SOURCE",
                        help="where the routing key comes from: header:NAME, cookie:NAME, "
                             "query:NAME, path (first path segment) or path:N (first N "
                             "segments); default header:X-User-Id")
    parser.add_argument("--missing-key", choices=("remote", "reject"), default="remote",
                        help="requests without a key: route by client IP (remote, the "
                             "default) or answer 400 (reject)")
    add_ring_arguments(parser)
    parser.add_argument("--attempts", type=positive_int, default=3, metavar="N",
                        help="nodes of the preference list tried per request (default 3)")
    parser.add_argument("--connect-timeout", type=seconds, default=2.0, metavar="S",
                        help="seconds to connect to a backend (default 2)")
    parser.add_argument("--read-timeout", type=seconds, default=30.0, metavar="S",
                        help="seconds a backend may stay silent while answering (default 30)")
    parser.add_argument("--retry-unsafe", action="store_true",
                        help="also retry POST/PATCH requests that may have reached a backend")
    parser.add_argument("--no-health", action="store_true", help="no health checks")
    parser.add_argument("--health-path", default="/health", metavar="PATH",
                        help="path probed on each backend (default /health)")
    parser.add_argument("--health-interval", type=seconds, default=5.0, metavar="S",
                        help="seconds between health-check rounds (default 5)")
    parser.add_argument("--health-timeout", type=seconds, default=2.0, metavar="S",
                        help="seconds a probe may take (default 2)")
    parser.add_argument("--fall", type=positive_int, default=3, metavar="N",
                        help="consecutive failures that take a backend out (default 3)")
    parser.add_argument("--rise", type=positive_int, default=2, metavar="N",
                        help="consecutive successes that put it back (default 2)")
    parser.add_argument("--node-header", metavar="NAME",
                        help="name the serving node in this response header")
    parser.add_argument("--no-metrics", action="store_true", help="do not serve /metrics")
    parser.add_argument("--duration", type=seconds, metavar="S",
                        help="stop after S seconds (default: run until interrupted)")
    parser.add_argument("--log-level", choices=("debug", "info", "warning", "error"),
                        default="info", help="stderr logging level (default info)")
    parser.set_defaults(func=run, gateway_parser=parser)
