"""``chash gateway``: run the sticky reverse proxy of ``chash.gateway``.

    chash gateway --listen 127.0.0.1:8080 --backend 127.0.0.1:9001 \\
        --backend 127.0.0.1:9002 --key header:X-User-Id

Runs until interrupted (Ctrl-C, SIGTERM) or for ``--duration`` seconds.
Health transitions and failed backend requests are logged to stderr.
Every option can be set by an environment variable instead
(``CHASH_LISTEN=0.0.0.0:8080``, ``CHASH_NO_HEALTH=1``; see
``chash.cli.env``).
``--config FILE`` reads the options from a TOML file, a key per option
(``chash.cli.config_file``; flags and variables win over it), and
SIGHUP or ``POST /-/reload`` rereads it into the running gateway
(``chash.gateway.supervisor.Reloader``); ``--check-config FILE`` checks
one and prints the configuration it gives.
``--workers N`` runs N processes on the port (SO_REUSEPORT); ``--redis URL``
or ``--etcd URL[,URL...]`` shares the ring and the health verdicts between
them and other instances; ``--dns-srv NAME`` takes the backends from a DNS
SRV record set, and follows it.
"""
from __future__ import annotations

import argparse
import copy
import logging
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from chash._optional import MissingExtra, require
from chash.cli.args import add_ring_arguments, file_value, make_any_router, positive_int, seconds
from chash.cli.config_file import (
    digest,
    effective_text,
    effective_values,
    given_options,
    option_keys,
    read_options,
)
from chash.cli.env import check_environment, environment_options, with_environment

# chash.gateway and chash.membership are imported where used: the other
# commands (and ``chash --help``) run without loading aiohttp or redis-py.
# Running the program (one process or --workers N) is
# chash.gateway.supervisor's; this module only parses arguments into its Plan.
if TYPE_CHECKING:
    from chash.gateway import Gateway
    from chash.gateway.supervisor import Plan
    from chash.membership.sync_driver import SyncDriver


__all__ = ["register", "run", "serve"]


async def serve(gateway: Gateway, host: str, port: int, duration: float | None = None,
                **options: Any) -> None:
    """``chash.gateway.supervisor.serve``: run ``gateway`` on ``host:port``
    until SIGINT/SIGTERM or ``duration`` seconds."""
    from chash.gateway.supervisor import serve as serve_gateway

    await serve_gateway(gateway, host, port, duration, **options)


def _run_loop(main: Coroutine[Any, Any, None]) -> None:
    """``chash.gateway.supervisor.run_loop``: on uvloop when installed."""
    from chash.gateway.supervisor import run_loop

    run_loop(main)


def _address(value: tuple[str, int]) -> str:
    host, port = value
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@file_value((str,), _address)
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


def _backends_text(value: list[tuple[str, str, str | None]]) -> str:
    return ",".join((f"{name}={address}" if name != address else address)
                    + (f"@{zone}" if zone else "") for name, address, zone in value)


@file_value((str,), _backends_text)
def _backend(text: str) -> list[tuple[str, str, str | None]]:
    """``[NAME=][https://]HOST:PORT[@ZONE]``, or several separated by
    commas: (name, address, zone or None) each."""
    from chash.gateway.upstream import parse_backend

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
            address = parse_backend(address)
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


@file_value((str, list))
def _statuses(text: str) -> frozenset[int]:
    if not text.strip():  # none (a configuration file's empty array)
        return frozenset()
    statuses = set()
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or not 100 <= int(item) <= 599:
            raise argparse.ArgumentTypeError(f"expected HTTP statuses like 500,503, not {text!r}")
        statuses.add(int(item))
    return frozenset(statuses)


@file_value((int, str))
def _size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    number, unit = (text[:-1], units[text[-1].lower()]) if text[-1:].lower() in units \
        else (text, 1)
    if not number.isdigit():
        raise argparse.ArgumentTypeError(f"expected a size in bytes (or with k, m, g), not "
                                         f"{text!r}")
    return int(number) * unit


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


class _Options:
    """The gateway's options, as often as they are read: the command line
    over the ``CHASH_*`` variables over the configuration file (if any)
    over the defaults."""

    def __init__(self, parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
        self.parser = parser
        self.path: str | None = args.check_config or args.config
        self._base = copy.copy(args)  # the command line and the variables over the defaults
        command_line: list[str] = getattr(args, "command_line", None) or []
        own = command_line[command_line.index("gateway") + 1:] \
            if "gateway" in command_line else []
        self._pinned = given_options(parser, own) | environment_options(args)

    def read(self) -> argparse.Namespace:
        """The options now (the file read again); ConfigFileError (a
        ValueError) naming the key and its line if the file is wrong."""
        args = copy.copy(self._base)
        if self.path is not None:
            for dest, value in read_options(self.path, self.parser).values.items():
                if dest not in self._pinned:
                    setattr(args, dest, value)
        return args


def _shared(args: argparse.Namespace) -> bool:
    """Whether the nodes come from elsewhere than the options: a shared
    ring (``--redis``, ``--etcd``) or a record set (``--dns-srv``)."""
    return bool(args.redis or args.etcd or args.dns_srv)


def _backends(args: argparse.Namespace) -> tuple[dict[str, str], dict[str, str]]:
    """``{node: address}`` and ``{node: zone}`` of the options, after the
    checks across options (ValueError saying what is wrong)."""
    backends: dict[str, str] = {}
    zones: dict[str, str] = {}
    for name, address, zone in (entry for group in args.backend for entry in group):
        if name in backends:
            raise ValueError(f"backend {name} is listed twice")
        backends[name] = address
        if zone is not None:
            zones[name] = zone
    if not backends and not args.dns_srv:
        raise ValueError("at least one --backend is required (or --dns-srv NAME)")
    # With a shared ring, the nodes' zones may come from it (chash ring add --zone).
    if args.zone and args.zone not in zones.values() and not (args.redis or args.etcd):
        raise ValueError(f"--zone {args.zone}: no --backend is in that zone (give each backend "
                         f"its zone: --backend NAME=HOST:PORT@{args.zone})")
    if args.redis and args.etcd:
        raise ValueError("give --redis or --etcd, not both")
    if (args.ring or args.bootstrap) and not (args.redis or args.etcd):
        raise ValueError("--ring and --bootstrap need --redis URL or --etcd URL")
    if (args.vote_ttl is not None or args.resync_interval is not None) \
            and not (args.redis or args.etcd):
        raise ValueError("--vote-ttl and --resync-interval need --redis URL or --etcd URL")
    if args.nameserver and not args.dns_srv:
        raise ValueError("--nameserver needs --dns-srv NAME")
    if args.slow_start and (args.redis or args.etcd):
        raise ValueError(
            "--slow-start ramps the gateway's own ring (its workers' too), not a ring shared "
            "through --redis or --etcd: there every instance would ramp the shared weights at "
            "once, and the store would keep the ramped weight of an instance that stops "
            "mid-ramp")
    return backends, zones


def _plan(args: argparse.Namespace, options: _Options) -> Plan:
    """The gateway program ``args`` describe (ValueError saying why if its
    settings are wrong); it rereads ``options`` on a reload."""
    from chash.gateway import GatewayConfig
    from chash.gateway.supervisor import Feeds, Plan

    backends, zones = _backends(args)
    make_any_router(args, list(backends), zones)  # told now, and never in a worker

    def router() -> Any:
        return make_any_router(args, list(backends), zones)

    def feeds(ring: Any) -> Feeds | None:
        membership = _membership(args, ring)
        discovery = None
        if args.dns_srv:
            from chash.discovery import DnsSrvDiscovery

            require("dns.resolver", user="--dns-srv", extra="dns", package="dnspython")
            discovery = DnsSrvDiscovery(args.dns_srv, nameservers=args.nameserver or None)
            discovery.follow(membership if membership is not None else ring)
        return Feeds(membership, discovery) if membership or discovery else None

    config = GatewayConfig(
        key=args.key, missing_key=args.missing_key, attempts=args.attempts,
        connect_timeout=args.connect_timeout, read_timeout=args.read_timeout,
        deadline=args.deadline, pool_size=args.pool_size, retry_unsafe=args.retry_unsafe,
        fail_on_status=args.fail_on_status, health=not args.no_health,
        health_path=args.health_path, health_interval=args.health_interval,
        health_timeout=args.health_timeout, fall=args.fall, rise=args.rise,
        metrics=False if args.no_metrics else None, admin_listen=args.admin_listen,
        node_header=args.node_header, max_body=args.max_body,
        header_timeout=args.header_timeout, idle_timeout=args.idle_timeout,
        tracing=False if args.no_tracing else None, zone=args.zone,
        slow_start=args.slow_start or 0.0, tunnel_idle_timeout=args.tunnel_idle_timeout,
        max_tunnels=args.max_tunnels, on_ring_change=args.on_ring_change,
        tunnel_close_grace=args.tunnel_close_grace, tls_cert=args.tls_cert,
        tls_key=args.tls_key, tls_ciphers=args.tls_ciphers,
        tls_min_version=args.tls_min_version, tls_client_ca=args.tls_client_ca,
        tls_handshake_timeout=args.tls_handshake_timeout, backend_ca=args.backend_ca,
        backend_insecure=args.backend_insecure, affinity=args.affinity,
        # With --redis, the replicas routing by prompt share their loads there.
        shared_loads=args.redis if args.affinity is not None else None,
        shared_loads_key=f"chash:loads:{args.ring or 'default'}")
    # The files are read now, as nginx -t reads them.
    from chash.gateway.tls import backend_context, server_context

    if config.tls_cert is not None:
        server_context(config.tls_cert, config.tls_key, ciphers=config.tls_ciphers,
                       min_version=config.tls_min_version, client_ca=config.tls_client_ca)
    if config.backend_ca is not None:
        backend_context(config.backend_ca)
    weights = {node: weight for node, weight in args.weight if node in backends}
    return Plan(config, backends, router, zones, feeds, listen=args.listen,
                duration=args.duration, workers=args.workers, log_level=args.log_level,
                weights=weights, digest=digest(effective_text(options.parser, args)),
                source=options.path,
                reread=None if options.path is None else lambda: _reread(args, options))


def _reread(running: argparse.Namespace, options: _Options) -> Plan:
    """The plan of the options now, if a running gateway can take it from
    one with ``running``; ``ReloadError`` otherwise (naming the settings
    that cannot change while running, if that is why)."""
    from chash.gateway.reload import LIVE_SETTINGS, ReloadError

    try:
        args = options.read()
        plan = _plan(args, options)
    except ValueError as exc:
        raise ReloadError(str(exc)) from None
    live = LIVE_SETTINGS if _shared(running) else LIVE_SETTINGS | {"backend", "weight"}
    old = effective_values(options.parser, running)
    new = effective_values(options.parser, args)
    refused = tuple(key for key in new if new[key] != old.get(key)
                    and _dest(options.parser, key) not in live)
    if refused:
        why = " (the nodes are the shared ring's: chash ring changes them)" \
            if {"backend", "weight"} & set(refused) and _shared(running) else ""
        raise ReloadError(f"{', '.join(refused)} cannot change while the gateway runs (restart "
                          f"it to change them){why}; nothing was changed", refused)
    return plan


def _dest(parser: argparse.ArgumentParser, key: str) -> str:
    return option_keys(parser)[key].dest


def run(args: argparse.Namespace) -> int:
    """Entry point of ``chash gateway``."""
    parser: argparse.ArgumentParser = args.gateway_parser
    check_environment(args, parser)
    if args.config and args.check_config:
        parser.error("give --config FILE to run, or --check-config FILE to check it, not both")
    options = _Options(parser, args)
    try:
        args = options.read()
        if args.check_config:
            plan = _plan(args, options)
    except ValueError as exc:
        parser.error(str(exc))
    if args.check_config:
        print(f"# chash gateway: {args.check_config} is valid.  The configuration it gives\n"
              f"# (flags over CHASH_* variables over the file over the defaults), whose digest\n"
              f"# (the SHA-256 of the lines below) is\n"
              f"# {plan.digest}\n{effective_text(parser, args)}", end="")
        return 0
    try:
        require("aiohttp", user="chash gateway", extra="gateway")
    except MissingExtra as exc:
        print(exc, file=sys.stderr)
        return 1
    logging.basicConfig(level=getattr(logging, args.log_level.upper()), stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from chash.gateway.supervisor import build, supervise
    from chash.gateway.supervisor import run as run_plan

    try:
        plan = _plan(args, options)
        built = build(plan)  # built here once, so that a wrong setting is told at once
    except ImportError as exc:
        print(f"chash gateway: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        parser.error(str(exc))
    if args.workers > 1:
        del built  # each worker builds its own after the fork
        return supervise(plan)
    return run_plan(plan, built)


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
    _add_file_arguments(parser)
    _add_routing_arguments(parser)
    _add_tls_arguments(parser)
    _add_sharing_arguments(parser)
    _add_proxy_arguments(parser)
    _add_health_arguments(parser)
    _add_output_arguments(parser)
    parser.set_defaults(func=run, gateway_parser=parser)
    with_environment(parser)


def _add_file_arguments(parser: argparse.ArgumentParser) -> None:
    """The configuration file."""
    parser.add_argument("--config", metavar="FILE",
                        help="read the options from this TOML file (a key per option: "
                             "read_timeout = 30 for --read-timeout 30); flags and CHASH_* "
                             "variables override it.  SIGHUP or POST /-/reload on the admin "
                             "listener rereads it")
    parser.add_argument("--check-config", metavar="FILE",
                        help="check this TOML file (with the flags and variables given) and "
                             "print the configuration it gives; exit 0 if valid, 2 if not")


def _add_routing_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the gateway listens, its backends, and how keys pick one."""
    parser.add_argument("--listen", type=_listen, default=("127.0.0.1", 8080),
                        metavar="HOST:PORT", help="where to listen (default 127.0.0.1:8080)")
    parser.add_argument("--backend", type=_backend, action="append", default=[],
                        metavar="[NAME=][https://]HOST:PORT[@ZONE]",
                        help="a backend; repeatable or comma-separated.  NAME is its node "
                             "name on the ring (default: the address), ZONE its zone "
                             "(a datacentre, a rack), which --zone prefers; https:// "
                             "speaks TLS to it, verifying its certificate for HOST")
    parser.add_argument("--zone", type=_zone, metavar="ZONE",
                        help="this gateway's zone: each key goes to its node among the "
                             "backends of ZONE, and fails over within ZONE before leaving "
                             "it (default: no zone, every backend alike); with --redis or "
                             "--etcd, the zones the shared ring gives its nodes (chash ring "
                             "add NODE --zone Z) come first")
    parser.add_argument("--key", type=_key, default="header:X-User-Id", metavar="SOURCE",
                        help="where the routing key comes from: header:NAME, cookie:NAME, "
                             "query:NAME, path (first path segment), path:N (first N "
                             "segments) or tls-subject (the verified client certificate's "
                             "subject: needs --tls-client-ca); default header:X-User-Id")
    parser.add_argument("--affinity", choices=("prefix",), default=None,
                        help="prefix: route OpenAI-compatible completions (POST "
                             "/v1/chat/completions and /v1/completions) by their prompt, to "
                             "the backend likely to hold its prefix in cache, balanced by "
                             "load; one with an x-session-id header (or the --key) by the "
                             "ring, bounded by load (default: every request by its key)")
    parser.add_argument("--missing-key", choices=("remote", "reject"), default="remote",
                        help="requests without a key: route by client IP (remote, the "
                             "default) or answer 400 (reject)")
    add_ring_arguments(parser, routers=True)


def _add_tls_arguments(parser: argparse.ArgumentParser) -> None:
    """TLS to clients: the listener's certificate and how it handshakes."""
    parser.add_argument("--tls-cert", metavar="FILE",
                        help="serve HTTPS with this PEM certificate (its chain after it); "
                             "a reload reads it again")
    parser.add_argument("--tls-key", metavar="FILE",
                        help="the PEM private key of --tls-cert (default: in the cert file)")
    parser.add_argument("--tls-ciphers", metavar="LIST",
                        help="an OpenSSL cipher list for TLS 1.2 (default: OpenSSL's secure "
                             "defaults; TLS 1.3 suites are always OpenSSL's)")
    parser.add_argument("--tls-min-version", choices=("1.2", "1.3"), default="1.2",
                        help="the oldest TLS version offered (default 1.2)")
    parser.add_argument("--tls-client-ca", metavar="FILE",
                        help="require client certificates chaining to a CA of this PEM "
                             "bundle; the verified subject is the key tls-subject")
    parser.add_argument("--tls-handshake-timeout", type=seconds, default=10.0, metavar="S",
                        help="seconds a client may take over its TLS handshake (default 10)")
    parser.add_argument("--backend-ca", metavar="FILE",
                        help="verify https:// backends against the CAs of this PEM bundle "
                             "only (default: the system's CAs); a reload reads it again")
    parser.add_argument("--backend-insecure", action="store_true",
                        help="verify nothing of https:// backends' certificates (test "
                             "benches only)")


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
    parser.add_argument("--tunnel-idle-timeout", type=seconds, default=3600.0, metavar="S",
                        help="seconds a WebSocket tunnel may pass no byte either way before "
                             "it is closed (default 3600)")
    parser.add_argument("--max-tunnels", type=int, default=10000, metavar="N",
                        help="WebSocket tunnels open at once per process (default 10000; 0: "
                             "no limit); a handshake past the cap is answered 503 with "
                             "Retry-After")
    parser.add_argument("--on-ring-change", choices=("keep", "close"), default="keep",
                        help="WebSocket tunnels whose key gets another owner: keep them on "
                             "their node (keep, the default) or close them with code 1012, "
                             "so that their clients reconnect to the new owner (close)")
    parser.add_argument("--tunnel-close-grace", type=seconds, default=5.0, metavar="S",
                        help="seconds a tunnel the gateway closes (a ring change, a stop) "
                             "may take to reach a frame boundary for its close frame "
                             "(default 5)")


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
