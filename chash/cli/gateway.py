"""``chash gateway``: run the sticky reverse proxy of ``chash.gateway``.

    chash gateway --listen 127.0.0.1:8080 --backend 127.0.0.1:9001 \\
        --backend 127.0.0.1:9002 --key header:X-User-Id

Runs until interrupted (Ctrl-C, SIGTERM) or for ``--duration`` seconds.
Health transitions and failed backend requests are logged to stderr.
Every option can be set by an environment variable instead
(``CHASH_LISTEN=0.0.0.0:8080``, ``CHASH_NO_HEALTH=1``; see
``chash.cli.env``).
``--workers N`` runs N processes on the port (SO_REUSEPORT); ``--redis URL``
or ``--etcd URL[,URL...]`` shares the ring and the health verdicts between
them and other instances; ``--dns-srv NAME`` takes the backends from a DNS
SRV record set, and follows it.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import multiprocessing
import multiprocessing.connection
import signal
import socket
import sys
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from chash._optional import MissingExtra, require
from chash.cli.args import add_ring_arguments, build_router, positive_int, seconds
from chash.cli.env import check_environment, with_environment

# chash.gateway and chash.membership are imported where used: the other
# commands (and ``chash --help``) run without loading aiohttp or redis-py.
if TYPE_CHECKING:
    from chash.gateway import Gateway
    from chash.gateway.workers import Follower, Leader
    from chash.membership.sync_driver import SyncDriver


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


def _backend(text: str) -> list[tuple[str, str, str | None]]:
    """``[NAME=]HOST:PORT[@ZONE]``, or several separated by commas:
    (name, address, zone or None) each."""
    from chash.gateway import parse_address

    backends = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, address = item.rpartition("=")
        address, at, zone = address.partition("@")
        zone = zone.strip()
        if at and not zone:
            raise argparse.ArgumentTypeError(f"no zone after '@' in {item!r}")
        try:
            address = parse_address(address)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        backends.append((name.strip() if sep else address, address, zone or None))
    if not backends:
        raise argparse.ArgumentTypeError(f"no backend in {text!r}")
    return backends


def _zone(text: str) -> str:
    zone = text.strip()
    if not zone or "," in zone or "@" in zone:
        raise argparse.ArgumentTypeError(f"expected a zone name, not {text!r}")
    return zone


def _statuses(text: str) -> frozenset[int]:
    statuses = set()
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or not 100 <= int(item) <= 599:
            raise argparse.ArgumentTypeError(f"expected HTTP statuses like 500,503, not {text!r}")
        statuses.add(int(item))
    return frozenset(statuses)


def _size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    number, unit = (text[:-1], units[text[-1].lower()]) if text[-1:].lower() in units \
        else (text, 1)
    if not number.isdigit():
        raise argparse.ArgumentTypeError(f"expected a size in bytes (or with k, m, g), not "
                                         f"{text!r}")
    return int(number) * unit


def _run_loop(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` on uvloop when it is installed, else on asyncio's loop.

    uvloop only makes the gateway faster: without it the command runs all
    the same, and says nothing."""
    try:
        uvloop = require("uvloop", user="chash gateway", extra="gateway")
    except ImportError:  # not installed, or installed but not importable here
        asyncio.run(main)
        return
    uvloop.run(main)


def _banner(gateway: Gateway, workers: int, leader: Leader | None = None) -> str:
    nodes = ", ".join(f"{node}={address}" if node != address else node
                      for node, address in gateway.addresses.items())
    url = gateway.url
    shown: Gateway | Leader = gateway if leader is None else leader  # who serves the admin
    admin = shown.admin_url
    lines = [f"chash gateway listening on {url}"
             + (f" ({workers} worker processes)" if workers > 1 else ""),
             f"  key {gateway.key_rule}; backends {nodes}"]
    if admin is None:
        lines.append("  no admin listener (status page and metrics: --admin-listen HOST:PORT)")
    else:
        lines.append(f"  status {admin}{gateway.status_path}, "
                     + (f"metrics {admin}{gateway.metrics_path}" if shown.registry is not None
                        else str(shown.metrics_off)))
    return "\n".join(lines)


async def serve(gateway: Gateway, host: str, port: int, duration: float | None = None, *,
                reuse_port: bool = False, ready: Callable[[Gateway], None] | None = None,
                membership: Any = None, role: Leader | Follower | None = None) -> None:
    """Run ``gateway`` on ``host:port`` until SIGINT/SIGTERM or ``duration``
    seconds.  ``ready(gateway)`` is called once it listens (by default: print
    where).  ``membership``, if given, is started first and stopped last;
    ``role``, a worker's part in ``--workers N``, starts once the gateway
    listens and stops before it."""
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
        if membership is not None:
            await asyncio.to_thread(membership.start)
        try:
            await gateway.start(host, port, reuse_port=reuse_port)
            try:
                if role is not None:
                    await role.start(gateway)
                if ready is None:
                    print(_banner(gateway, 1), flush=True)
                else:
                    ready(gateway)
                # Everything built so far (modules, the ring, the app) lives
                # as long as the process: kept out of the cyclic collector,
                # whose full collections would otherwise scan all of it
                # while requests wait (a tail-latency cost).
                gc.freeze()
                try:
                    await asyncio.wait_for(stop.wait(), duration)
                except TimeoutError:
                    pass
                finally:
                    gc.unfreeze()
                if ready is None:
                    print("chash gateway stopping", flush=True)
            finally:
                if role is not None:
                    await role.stop()
                await gateway.stop()
        finally:
            if membership is not None:
                await asyncio.to_thread(membership.stop)
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)


class StartRefused(Exception):
    """The store of the shared ring refused this gateway at start (its
    user, password or permissions), or holds the ring with other shared
    router settings: the gateway exits saying so."""


class _Feeds:
    """The shared ring and the record set a gateway follows, started and
    stopped as one (``serve()``'s ``membership``): the membership first, so
    that the discovery writes into a synced ring, and stopped last."""

    def __init__(self, membership: SyncDriver | None, discovery: Any) -> None:
        self.membership = membership
        self.discovery = discovery

    def start(self) -> None:
        """Start both; StartRefused if the store refuses this gateway."""
        membership = self.membership
        if membership is not None:
            try:
                membership.start()
            except Exception as exc:
                if isinstance(exc, ValueError) or membership.is_refusal(exc):
                    raise StartRefused(
                        f"cannot join the shared ring {membership.name!r}: {exc}") from exc
                raise
        if self.discovery is not None:
            self.discovery.start()

    def stop(self) -> None:
        if self.discovery is not None:
            self.discovery.stop()
        if self.membership is not None:
            self.membership.stop()


def _membership(args: argparse.Namespace, router: Any) -> SyncDriver | None:
    """The membership ``--redis`` or ``--etcd`` asks for, or None."""
    vote_ttl, resync_interval = _timings(args)
    if args.etcd:
        from chash.membership import EtcdMembership

        require("httpx", user="--etcd", extra="etcd")
        # httpx logs every request at INFO: the gateway's own log says
        # what matters (outages, changes).
        logging.getLogger("httpx").setLevel(logging.WARNING)

        return EtcdMembership(router, args.etcd, name=args.ring or "default",
                              bootstrap=args.bootstrap, timeout=1.0,
                              vote_ttl=vote_ttl, resync_interval=resync_interval)
    if args.redis:
        from chash.membership import RedisMembership

        redis = require("redis", user="--redis", extra="redis", package="redis-py")
        client = redis.Redis.from_url(args.redis, socket_timeout=1.0,
                                      socket_connect_timeout=1.0)
        return RedisMembership(router, client, name=args.ring or "default",
                               bootstrap=args.bootstrap,
                               vote_ttl=vote_ttl, resync_interval=resync_interval)
    return None


def _timings(args: argparse.Namespace) -> tuple[float, float]:
    """``--vote-ttl`` and ``--resync-interval``, the membership's defaults
    where not given."""
    from chash.membership.settings import MembershipSettings

    vote_ttl = MembershipSettings.vote_ttl if args.vote_ttl is None else args.vote_ttl
    resync = MembershipSettings.resync_interval if args.resync_interval is None \
        else args.resync_interval
    return vote_ttl, resync


def _build(args: argparse.Namespace, parser: argparse.ArgumentParser,
           backends: dict[str, str], worker: int,
           links: list[tuple[socket.socket, socket.socket]] | None = None,
           ) -> tuple[Gateway, _Feeds | None, Leader | Follower | None]:
    """The gateway of one process, what feeds its ring (or None), and its
    part in ``--workers N`` (None for a single process).  ``links``: the
    socket pairs between worker 0 and each other worker."""
    from chash.gateway import Gateway, GatewayConfig

    zones: dict[str, str] = args.backend_zones
    router = build_router(parser, args, list(backends), zones)
    membership = _membership(args, router)
    discovery = None
    if args.dns_srv:
        from chash.discovery import DnsSrvDiscovery

        require("dns.resolver", user="--dns-srv", extra="dns", package="dnspython")
        discovery = DnsSrvDiscovery(args.dns_srv, nameservers=args.nameserver or None)
        discovery.follow(membership if membership is not None else router)
    feeds = _Feeds(membership, discovery) if membership or discovery else None
    role: Leader | Follower | None = None
    verdicts: Any = membership  # where worker 0's checker applies its verdicts
    counters = reports = ramp = None
    # Slow start ramps this process's ring, or with --workers N worker 0's,
    # which sends each weight to the other workers (they ramp nothing).
    slow_start = args.slow_start or 0.0
    if links is not None:
        from chash.gateway.workers import Follower, Leader

        if worker == 0:
            role = Leader(router, [ours for ours, _ in links], share_verdicts=membership is None,
                          admin_listen=args.admin_listen)
            counters = role.counters
            if membership is None:
                verdicts = role
            if slow_start:
                from chash.gateway.slow_start import WeightRamp

                ramp = WeightRamp(router, slow_start, apply=role.set_weight)
        else:
            slow_start = 0.0
            role = Follower(router, links[worker - 1][1])
            if membership is None:  # worker 0 alone probes; failures go to it
                reports = role
    probes = not args.no_health and (worker == 0 or membership is not None or links is None)
    config = GatewayConfig(
        key=args.key, missing_key=args.missing_key, attempts=args.attempts,
        connect_timeout=args.connect_timeout, read_timeout=args.read_timeout,
        deadline=args.deadline, pool_size=args.pool_size, retry_unsafe=args.retry_unsafe,
        fail_on_status=args.fail_on_status, health=probes,
        health_path=args.health_path, health_interval=args.health_interval,
        health_timeout=args.health_timeout, fall=args.fall, rise=args.rise,
        metrics=False if args.no_metrics else None,
        admin_listen=args.admin_listen if links is None else None,
        node_header=args.node_header, max_body=args.max_body,
        header_timeout=args.header_timeout, idle_timeout=args.idle_timeout,
        tracing=False if args.no_tracing else None, zone=args.zone, slow_start=slow_start)
    gateway = Gateway(backends, config, router=router, zones=zones, membership=verdicts,
                      counters=counters, health_reports=reports, ramp=ramp)
    return gateway, feeds, role


def _worker(args: argparse.Namespace, parser: argparse.ArgumentParser,
            backends: dict[str, str], index: int, pipe: Any,
            links: list[tuple[socket.socket, socket.socket]]) -> None:
    """One worker process of ``--workers N``: serve until SIGTERM."""
    logging.basicConfig(level=getattr(logging, args.log_level.upper()), stream=sys.stderr,
                        format=f"%(asctime)s worker {index} %(name)s %(levelname)s %(message)s")
    for number, (ours, theirs) in enumerate(links, start=1):  # keep only this worker's ends
        if index != 0:
            ours.close()
        if index != number:
            theirs.close()
    try:
        gateway, membership, role = _build(args, parser, backends, index, links)
        host, port = args.listen

        from chash.gateway.workers import Leader

        def ready(gateway: Gateway) -> None:
            leader = role if isinstance(role, Leader) else None
            pipe.send(("ready", _banner(gateway, args.workers, leader)))

        _run_loop(serve(gateway, host, port, None, reuse_port=True, ready=ready,
                        membership=membership, role=role))
    except (ImportError, OSError, ValueError, StartRefused) as exc:
        pipe.send(("error", str(getattr(exc, "strerror", None) or exc)))
        sys.exit(1)


def _supervise(args: argparse.Namespace, parser: argparse.ArgumentParser,
               backends: dict[str, str]) -> int:
    """Run ``args.workers`` processes on one port (SO_REUSEPORT)."""
    host, port = args.listen
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    reserve = socket.socket(family, socket.SOCK_STREAM)
    reserve.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        reserve.bind((host, port))  # holds the port (not listening) until all listen
    except OSError as exc:
        print(f"chash gateway: cannot listen on {host}:{port}: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    args.listen = (host, reserve.getsockname()[1])
    context = multiprocessing.get_context("fork")
    stopping = []
    previous = {signum: signal.signal(signum, lambda s, f: stopping.append(s))
                for signum in (signal.SIGINT, signal.SIGTERM)}
    workers = []
    # Worker 0 talks with each other worker over a socket pair of its own
    # (chash.gateway.workers): one health verdict, one metrics view.
    links = [socket.socketpair() for _ in range(args.workers - 1)]
    try:
        pipes = []
        for index in range(args.workers):
            ours, theirs = context.Pipe()
            process = context.Process(target=_worker, name=f"chash-gateway-{index}",
                                      args=(args, parser, backends, index, theirs, links))
            process.start()
            workers.append(process)
            pipes.append(ours)
        for pair in links:
            for end in pair:
                end.close()
        banners = []
        for ours in pipes:
            if not ours.poll(60):
                print("chash gateway: a worker did not start within 60 s", file=sys.stderr)
                return 1
            kind, text = ours.recv()
            if kind == "error":
                print(f"chash gateway: {text}", file=sys.stderr)
                return 1
            banners.append(text)
        reserve.close()
        print(banners[0], flush=True)  # worker 0 serves the admin listener
        deadline = None if args.duration is None else time.monotonic() + args.duration
        while not stopping:
            if any(not p.is_alive() for p in workers):
                print("chash gateway: a worker process exited; stopping", file=sys.stderr)
                return 1
            if deadline is not None and time.monotonic() >= deadline:
                break
            multiprocessing.connection.wait([p.sentinel for p in workers], timeout=0.2)
        print("chash gateway stopping", flush=True)
        return 0
    finally:
        reserve.close()
        for pair in links:
            for end in pair:
                end.close()
        for process in workers:
            if process.is_alive():
                process.terminate()
        for process in workers:
            process.join(15)
            if process.is_alive():
                process.kill()
                process.join()
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``chash gateway``."""
    parser: argparse.ArgumentParser = args.gateway_parser
    check_environment(args, parser)
    backends: dict[str, str] = {}
    zones: dict[str, str] = {}
    for name, address, zone in (entry for group in args.backend for entry in group):
        if name in backends:
            parser.error(f"backend {name} is listed twice")
        backends[name] = address
        if zone is not None:
            zones[name] = zone
    args.backend_zones = zones
    if not backends and not args.dns_srv:
        parser.error("at least one --backend is required (or --dns-srv NAME)")
    if args.zone and args.zone not in zones.values():
        parser.error(f"--zone {args.zone}: no --backend is in that zone (give each backend "
                     f"its zone: --backend NAME=HOST:PORT@{args.zone})")
    if args.redis and args.etcd:
        parser.error("give --redis or --etcd, not both")
    if (args.ring or args.bootstrap) and not (args.redis or args.etcd):
        parser.error("--ring and --bootstrap need --redis URL or --etcd URL")
    if (args.vote_ttl is not None or args.resync_interval is not None) \
            and not (args.redis or args.etcd):
        parser.error("--vote-ttl and --resync-interval need --redis URL or --etcd URL")
    if args.nameserver and not args.dns_srv:
        parser.error("--nameserver needs --dns-srv NAME")
    if args.slow_start and (args.redis or args.etcd):
        parser.error("--slow-start ramps the gateway's own ring (its workers' too), not a "
                     "ring shared through --redis or --etcd: there every instance would ramp "
                     "the shared weights at once, and the store would keep the ramped weight "
                     "of an instance that stops mid-ramp")
    try:
        require("aiohttp", user="chash gateway", extra="gateway")
    except MissingExtra as exc:
        print(exc, file=sys.stderr)
        return 1
    logging.basicConfig(level=getattr(logging, args.log_level.upper()), stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        gateway, membership, _ = _build(args, parser, backends, 0)
    except ImportError as exc:
        print(f"chash gateway: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        parser.error(str(exc))
    if args.workers > 1:
        del gateway, membership  # each worker builds its own after the fork
        return _supervise(args, parser, backends)
    host, port = args.listen
    try:
        _run_loop(serve(gateway, host, port, args.duration, membership=membership))
    except StartRefused as exc:
        print(f"chash gateway: {exc}", file=sys.stderr)
        return 1
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
                    "(pip install 'chash-router[gateway]').  Every option can also be "
                    "set by an environment variable, CHASH_ and its name (--max-body: "
                    "CHASH_MAX_BODY; flags take 1 or 0); the command line wins.")
    _add_routing_arguments(parser)
    _add_sharing_arguments(parser)
    _add_proxy_arguments(parser)
    _add_health_arguments(parser)
    _add_output_arguments(parser)
    parser.set_defaults(func=run, gateway_parser=parser)
    with_environment(parser)


def _add_routing_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the gateway listens, its backends, and how keys pick one."""
    parser.add_argument("--listen", type=_listen, default=("127.0.0.1", 8080),
                        metavar="HOST:PORT", help="where to listen (default 127.0.0.1:8080)")
    parser.add_argument("--backend", type=_backend, action="append", default=[],
                        metavar="[NAME=]HOST:PORT[@ZONE]",
                        help="a backend; repeatable or comma-separated.  NAME is its node "
                             "name on the ring (default: the address), ZONE its zone "
                             "(a datacentre, a rack), which --zone prefers")
    parser.add_argument("--zone", type=_zone, metavar="ZONE",
                        help="this gateway's zone: each key goes to its node among the "
                             "backends of ZONE, and fails over within ZONE before leaving "
                             "it (default: no zone, every backend alike)")
    parser.add_argument("--key", type=_key, default="header:X-User-Id", metavar="SOURCE",
                        help="where the routing key comes from: header:NAME, cookie:NAME, "
                             "query:NAME, path (first path segment) or path:N (first N "
                             "segments); default header:X-User-Id")
    parser.add_argument("--missing-key", choices=("remote", "reject"), default="remote",
                        help="requests without a key: route by client IP (remote, the "
                             "default) or answer 400 (reject)")
    add_ring_arguments(parser)


def _add_sharing_arguments(parser: argparse.ArgumentParser) -> None:
    """Worker processes, the ring shared through Redis, the admin listener."""
    parser.add_argument("--workers", type=positive_int, default=1, metavar="N",
                        help="worker processes sharing the port (SO_REUSEPORT; default 1)")
    parser.add_argument("--redis", metavar="URL",
                        help="share the ring and health verdicts through Redis "
                             "(redis://HOST:PORT/DB), with every worker and instance")
    parser.add_argument("--etcd", metavar="URL[,URL...]",
                        help="share the ring and health verdicts through etcd instead "
                             "(http://HOST:2379, every member of the cluster; "
                             "http://USER:PASSWORD@HOST:2379 with auth)")
    parser.add_argument("--ring", metavar="NAME",
                        help="the shared ring's name in Redis or etcd (default 'default')")
    parser.add_argument("--bootstrap", action="store_true",
                        help="with --redis or --etcd: this instance may create the shared "
                             "ring from its --backend list if the store holds none (give it "
                             "to the first instance only; the others join, and restore a "
                             "ring the store lost)")
    parser.add_argument("--vote-ttl", type=seconds, metavar="S",
                        help="with --redis or --etcd: seconds a health vote counts unless "
                             "renewed (default 30); a stopped instance's votes lapse after it")
    parser.add_argument("--resync-interval", type=seconds, metavar="S",
                        help="with --redis or --etcd: seconds between two full checks of "
                             "the shared ring, beside the pushed changes (default 5)")
    parser.add_argument("--dns-srv", metavar="NAME",
                        help="take the backends from the DNS SRV records of NAME "
                             "(_http._tcp.users.example.) and follow them at their TTL: "
                             "nodes are TARGET:PORT, weighted by the SRV weights of the "
                             "lowest priority; into the shared ring with --redis/--etcd")
    parser.add_argument("--nameserver", metavar="HOST[:PORT]", action="append", default=[],
                        help="with --dns-srv: the DNS server to ask (repeatable; default "
                             "the system's)")
    parser.add_argument("--admin-listen", type=_listen, metavar="HOST:PORT",
                        help="serve the status page and metrics here (default: nowhere)")


def _add_proxy_arguments(parser: argparse.ArgumentParser) -> None:
    """Attempts, timeouts and limits of the proxy path."""
    parser.add_argument("--attempts", type=positive_int, default=3, metavar="N",
                        help="nodes of the preference list tried per request (default 3)")
    parser.add_argument("--connect-timeout", type=seconds, default=2.0, metavar="S",
                        help="seconds to connect to a backend (default 2)")
    parser.add_argument("--read-timeout", type=seconds, default=30.0, metavar="S",
                        help="seconds a backend may stay silent while answering (default 30)")
    parser.add_argument("--deadline", type=seconds, default=60.0, metavar="S",
                        help="seconds until a backend must have started answering, all "
                             "attempts included (default 60)")
    parser.add_argument("--pool-size", type=int, default=100, metavar="N",
                        help="connections open at once to each backend (default 100; "
                             "0: no limit)")
    parser.add_argument("--max-body", type=_size, default=1 << 20, metavar="BYTES",
                        help="largest request body accepted (default 1m; 413 above)")
    parser.add_argument("--header-timeout", type=seconds, default=60.0, metavar="S",
                        help="seconds a client may take to send a request head "
                             "(default 60; 408 after)")
    parser.add_argument("--idle-timeout", type=seconds, default=75.0, metavar="S",
                        help="seconds a keep-alive connection may stay idle (default 75)")
    parser.add_argument("--retry-unsafe", action="store_true",
                        help="also retry POST/PATCH requests that may have reached a backend")


def _add_health_arguments(parser: argparse.ArgumentParser) -> None:
    """What counts as a failure, and how backends are probed."""
    parser.add_argument("--fail-on-status", type=_statuses, default=frozenset(),
                        metavar="STATUSES",
                        help="backend statuses that count as health failures, e.g. 500,503 "
                             "(default none: only connection errors and timeouts count)")
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


def _add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """What the gateway tells: response header, metrics, logs; how long it runs."""
    parser.add_argument("--node-header", metavar="NAME",
                        help="name the serving node in this response header")
    parser.add_argument("--no-metrics", action="store_true",
                        help="do not serve metrics on the admin listener")
    parser.add_argument("--no-tracing", action="store_true",
                        help="no OpenTelemetry spans (default: a span per attempt when "
                             "opentelemetry-api is installed)")
    parser.add_argument("--slow-start", type=seconds, metavar="S",
                        help="ramp a backend that comes back up to its full weight over S "
                             "seconds, moving only its own keys (with --workers N, worker 0 "
                             "drives every worker's ring; not with --redis or --etcd)")
    parser.add_argument("--duration", type=seconds, metavar="S",
                        help="stop after S seconds (default: run until interrupted)")
    parser.add_argument("--log-level", choices=("debug", "info", "warning", "error"),
                        default="info", help="stderr logging level (default info)")
