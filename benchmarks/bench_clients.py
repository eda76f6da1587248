"""What the sticky clients cost a request, against the same calls routed by hand.

Backends run in a child process on 127.0.0.1: three aiohttp HTTP servers
answering every GET with 200 and a short body, and three grpcio servers
answering a unary ``/bench.Echo/Hello`` with the request.  In this process,
each group times the same requests, one at a time, keys cycling over a
fixed list, two ways:

* ``by hand``: one plain client per backend (an ``httpx.Client`` with its
  ``base_url``, an ``httpx.AsyncClient``, an ``aiohttp.ClientSession``, a
  gRPC channel and its multi-callable), the one picked with
  ``router.get_target_node(key)``: what a service writes without chash;
* ``sticky``: one client with chash in it (``StickyTransport``,
  ``AsyncStickyTransport``, ``StickyMiddleware``, ``ChannelPool`` /
  ``AsyncChannelPool``), the key in the ``X-User-Id`` header or the call.

Interleaved rounds (``_bench.run_schedule``), wall-clock medians per
request, ratio = sticky / by hand; the target is <= 1.10 for httpx (sync
and async) and gRPC (sync and asyncio); aiohttp's row is reported without
one.  Absolute times include the backends' own work, which both sides pay.

``--caches`` times the sharded cache clients instead, against real servers
this script starts (``_cache_servers.py``): three redis-server, nutcracker
in front of them, three memcached.  GET, SET and a pipeline of 100 GETs
through ``chash.redis.ShardedRedis`` of one server against a plain
``redis.Redis`` of it (the routing's own cost, target <= 1.10), through
``ShardedRedis`` of the three against one ``redis.Redis`` per shard picked
by hand (target <= 1.10) and against a ``redis.Redis`` of nutcracker in
front of them (reported); ``chash.pymemcache.HashClient`` against
pymemcache's own ``HashClient`` (rendezvous) over the three memcached.

    python benchmarks/bench_clients.py [--repeat 31] [--requests 20] [--json FILE]
    python benchmarks/bench_clients.py --quick
    python benchmarks/bench_clients.py --caches [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import grpc.aio
import httpx
from _bench import (
    Group,
    Key,
    Measure,
    Obs,
    Row,
    add_target,
    machine_info,
    make_row,
    progress,
    report,
    request_keys,
    run_schedule,
    timed,
    write_json,
)

import chash
from chash.aiohttp import StickyMiddleware
from chash.grpc import AsyncChannelPool, ChannelPool
from chash.httpx import AsyncStickyTransport, StickyTransport

ROOT = Path(__file__).resolve().parent.parent
SECTION = "per request, one at a time"
BY_HAND, STICKY = "by hand", "sticky"
VS = [("sticky/by hand", STICKY, BY_HAND)]
HELLO = "/bench.Echo/Hello"
TARGET = 1.10

_BACKENDS = r"""
import asyncio, json, sys
from concurrent import futures
import grpc
from aiohttp import web

async def main():
    async def answer(request):
        return web.Response(text="ok")
    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    http = []
    for _ in range(3):
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        http.append(site._server.sockets[0].getsockname()[1])
    handler = grpc.method_handlers_generic_handler("bench.Echo", {
        "Hello": grpc.unary_unary_rpc_method_handler(lambda request, context: request)})
    servers, rpc = [], []
    for _ in range(3):
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers((handler,))
        rpc.append(server.add_insecure_port("127.0.0.1:0"))
        server.start()
        servers.append(server)
    print(json.dumps({"http": http, "grpc": rpc}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    for server in servers:
        server.stop(None)
    await runner.cleanup()

asyncio.run(main())
"""


class Backends:
    """The child process serving the backends; its HTTP and gRPC addresses."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", _BACKENDS], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        ports = json.loads(self.process.stdout.readline())
        self.http = [f"127.0.0.1:{port}" for port in ports["http"]]
        self.grpc = [f"127.0.0.1:{port}" for port in ports["grpc"]]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(10.0)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def ring_of(nodes: Sequence[str]) -> chash.ConsistentHashRouter:
    router = chash.ConsistentHashRouter()
    router.add_service_nodes(list(nodes))
    return router


class Bench:
    """Every contender's client, opened once, and the loop the asyncio ones run on."""

    def __init__(self, backends: Backends, keys: list[str], requests: int) -> None:
        self.keys = keys
        self.requests = requests
        self.loop = asyncio.new_event_loop()
        self.http_ring = ring_of(backends.http)
        self.grpc_ring = ring_of(backends.grpc)
        self.closers: list[Callable[[], object]] = []
        self._sync_http()
        self._async_http()
        self._grpc()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return self.loop.run_until_complete(coro)

    def _sync_http(self) -> None:
        hand = {node: httpx.Client(base_url=f"http://{node}") for node in self.http_ring.nodes}
        sticky = httpx.Client(base_url="http://users",
                              transport=StickyTransport(self.http_ring, key="header:X-User-Id"))
        ring = self.http_ring

        def by_hand(key: str) -> None:
            node = ring.get_target_node(key)
            assert node is not None
            hand[node].get("/", headers={"X-User-Id": key}).raise_for_status()

        def through(key: str) -> None:
            sticky.get("/", headers={"X-User-Id": key}).raise_for_status()

        self.httpx_sync = (by_hand, through)
        self.closers += [client.close for client in (*hand.values(), sticky)]

    def _async_http(self) -> None:
        ring = self.http_ring

        async def open_clients() -> tuple[dict[str, httpx.AsyncClient], httpx.AsyncClient,
                                          dict[str, aiohttp.ClientSession],
                                          aiohttp.ClientSession]:
            hand = {node: httpx.AsyncClient(base_url=f"http://{node}") for node in ring.nodes}
            sticky = httpx.AsyncClient(base_url="http://users", transport=AsyncStickyTransport(
                ring, key="header:X-User-Id"))
            sessions = {node: aiohttp.ClientSession(f"http://{node}") for node in ring.nodes}
            middleware = StickyMiddleware(ring, key="header:X-User-Id")
            session = aiohttp.ClientSession("http://users", middlewares=[middleware])
            return hand, sticky, sessions, session

        hand, sticky, sessions, session = self.run(open_clients())

        async def by_hand(key: str) -> None:
            node = ring.get_target_node(key)
            assert node is not None
            (await hand[node].get("/", headers={"X-User-Id": key})).raise_for_status()

        async def through(key: str) -> None:
            (await sticky.get("/", headers={"X-User-Id": key})).raise_for_status()

        async def aio_by_hand(key: str) -> None:
            node = ring.get_target_node(key)
            assert node is not None
            async with sessions[node].get("/", headers={"X-User-Id": key}) as response:
                await response.read()

        async def aio_through(key: str) -> None:
            async with session.get("/", headers={"X-User-Id": key}) as response:
                await response.read()

        self.httpx_async = (by_hand, through)
        self.aiohttp = (aio_by_hand, aio_through)
        for closer in (*hand.values(), sticky, *sessions.values(), session):
            self.closers.append(lambda closer=closer: self.run(
                closer.aclose() if isinstance(closer, httpx.AsyncClient) else closer.close()))

    def _grpc(self) -> None:
        ring = self.grpc_ring
        channels = {node: grpc.insecure_channel(node) for node in ring.nodes}
        calls = {node: channel.unary_unary(HELLO) for node, channel in channels.items()}
        pool = ChannelPool(ring)
        hello = pool.unary_unary(HELLO)

        def by_hand(key: str) -> None:
            node = ring.get_target_node(key)
            assert node is not None
            calls[node](b"hi", timeout=5.0)

        def through(key: str) -> None:
            hello(b"hi", key=key, timeout=5.0)

        self.grpc_sync = (by_hand, through)
        self.closers += [channel.close for channel in channels.values()]
        self.closers.append(pool.close)

        async def open_async() -> tuple[dict[str, Any], AsyncChannelPool]:
            return ({node: grpc.aio.insecure_channel(node) for node in ring.nodes},
                    AsyncChannelPool(ring))

        aio_channels, aio_pool = self.run(open_async())
        aio_calls = {node: channel.unary_unary(HELLO) for node, channel in aio_channels.items()}
        aio_hello = aio_pool.unary_unary(HELLO)

        async def aio_by_hand(key: str) -> None:
            node = ring.get_target_node(key)
            assert node is not None
            await aio_calls[node](b"hi", timeout=5.0)

        async def aio_through(key: str) -> None:
            await aio_hello(b"hi", key=key, timeout=5.0)

        self.grpc_async = (aio_by_hand, aio_through)
        for channel in aio_channels.values():
            self.closers.append(lambda channel=channel: self.run(channel.close()))
        self.closers.append(lambda: self.run(aio_pool.aclose()))

    def measures(self, row: str, pair: tuple[Callable[[str], Any], Callable[[str], Any]],
                 asynchronous: bool) -> Group:
        keys, count = self.keys, self.requests

        def make(name: str, call: Callable[[str], Any]) -> Measure:
            if asynchronous:
                async def many(part: list[str]) -> None:
                    for key in part:
                        await call(key)

                def batch(part: list[str]) -> None:
                    self.run(many(part))
            else:
                def batch(part: list[str]) -> None:
                    for key in part:
                        call(key)

            def sample(seq: int) -> dict[Key, Obs]:
                start = seq * count % len(keys)
                part = (keys + keys)[start:start + count]
                obs, _ = timed(lambda: batch(part), len(part))
                return {(row, row, name): obs}

            return Measure(f"{row} {name}", sample, lambda: batch(keys[:count]))

        return Group(row, [make(BY_HAND, pair[0]), make(STICKY, pair[1])])

    def close(self) -> None:
        for closer in self.closers:
            closer()
        self.loop.close()


PLAIN, ONE, HAND, SHARDED, PROXY = "plain", "sharded, 1", "by hand", "sharded, 3", "nutcracker"
OWN, CHASH = "pymemcache", "chash"
CACHE_VS = [("sharded 1/plain", ONE, PLAIN), ("sharded 3/by hand", SHARDED, HAND),
            ("sharded 3/nutcracker", SHARDED, PROXY), ("chash/pymemcache", CHASH, OWN)]
CACHE_TARGETS = ["sharded 1/plain", "sharded 3/by hand"]
VALUE = b"v" * 64
PIPELINE = 100


def cache_group(row: str, contenders: dict[str, Callable[[list[str]], None]], keys: list[str],
                count: int) -> Group:
    """A group timing each contender over ``count`` keys a sample."""
    def make(name: str, batch: Callable[[list[str]], None]) -> Measure:
        def sample(seq: int) -> dict[Key, Obs]:
            start = seq * count % len(keys)
            part = (keys + keys)[start:start + count]
            obs, _ = timed(lambda: batch(part), len(part))
            return {(row, row, name): obs}
        return Measure(f"{row} {name}", sample, lambda: batch(keys[:count]))
    return Group(row, [make(name, batch) for name, batch in contenders.items()])


def cache_rows(servers: dict[str, Any], keys: list[str], requests: int,
               repeat: int) -> tuple[dict[Key, list[Obs]], list[tuple[str, list[str]]]]:
    """The cache rows' samples, and each row's contenders."""
    import inspect

    import redis
    from pymemcache.client.hash import HashClient as OwnHashClient

    from chash.pymemcache import HashClient
    from chash.redis import ShardedRedis

    quiet: dict[str, Any] = ({"driver_info": None} if "driver_info" in inspect.signature(redis.Redis).parameters
                             else {"lib_name": None, "lib_version": None})
    nodes = [f"127.0.0.1:{port}:1" for port in servers["redis"]]
    plain = redis.Redis(port=servers["redis"][0])
    one = ShardedRedis(nodes[:1])
    sharded = ShardedRedis(nodes)
    ring = sharded.router
    hand = {name: redis.Redis(port=int(name.rsplit(":", 1)[1])) for name in sharded.shards}
    proxy = redis.Redis(port=servers["nutcracker"], protocol=2, **quiet)
    memcached = [f"127.0.0.1:{port}" for port in servers["memcached"]]
    own, ours = OwnHashClient(memcached), HashClient(memcached)
    for start in range(0, len(keys), 500):
        chunk = {k: VALUE for k in keys[start:start + 500]}
        plain.mset(chunk)
        sharded.mset(chunk)
        ours.set_many(chunk)

    def by_hand(key: str) -> Any:
        node = ring.get_target_node(key)
        assert node is not None
        return hand[node]

    def each(call: Callable[[str], Any]) -> Callable[[list[str]], None]:
        def batch(part: list[str]) -> None:
            for key in part:
                call(key)
        return batch

    def pipelined(pipeline: Callable[[], Any]) -> Callable[[list[str]], None]:
        def batch(part: list[str]) -> None:
            for _ in part:  # a pipeline of PIPELINE GETs for each command of the sample
                pipe = pipeline()
                for key in keys[:PIPELINE]:
                    pipe.get(key)
                pipe.execute()
        return batch

    def hand_pipelined(part: list[str]) -> None:
        for _ in part:  # one pipeline per shard, sent one after the other
            pipes: dict[str, Any] = {}
            for key in keys[:PIPELINE]:
                node = ring.get_target_node(key)
                assert node is not None
                if node not in pipes:
                    pipes[node] = hand[node].pipeline(transaction=False)
                pipes[node].get(key)
            for pipe in pipes.values():
                pipe.execute()

    rows = [
        ("Redis GET", {PLAIN: each(plain.get), ONE: each(one.get), HAND: each(lambda k: by_hand(k).get(k)),
                       SHARDED: each(sharded.get), PROXY: each(proxy.get)}),
        ("Redis SET", {PLAIN: each(lambda k: plain.set(k, VALUE)), ONE: each(lambda k: one.set(k, VALUE)),
                       HAND: each(lambda k: by_hand(k).set(k, VALUE)),
                       SHARDED: each(lambda k: sharded.set(k, VALUE)), PROXY: each(lambda k: proxy.set(k, VALUE))}),
        (f"Redis pipeline of {PIPELINE} GETs", {
            PLAIN: pipelined(lambda: plain.pipeline(transaction=False)), ONE: pipelined(one.pipeline),
            HAND: hand_pipelined, SHARDED: pipelined(sharded.pipeline),
            PROXY: pipelined(lambda: proxy.pipeline(transaction=False))}),
        ("memcached get", {OWN: each(own.get), CHASH: each(ours.get)}),
    ]
    groups = [cache_group(row, contenders, keys, requests) for row, contenders in rows]
    try:
        progress("timing")
        obs = run_schedule(groups, repeat)
    finally:
        for client in (plain, one, sharded, proxy, *hand.values()):
            client.close()
        own.close()
        ours.close()
    return obs, [(row, list(contenders)) for row, contenders in rows]


def main_caches(args: argparse.Namespace) -> int:
    from _cache_servers import cache_servers

    info = machine_info(["redis", "pymemcache"])
    started, load_start = time.perf_counter(), os.getloadavg()
    with cache_servers() as servers:
        obs, layout = cache_rows(servers, request_keys(1000), args.requests, args.repeat)
    rows: list[Row] = []
    for row, contenders in layout:
        vs = [v for v in CACHE_VS if v[1] in contenders and v[2] in contenders]
        r = make_row("per command, one at a time (a pipeline: per pipeline)", row, row, 3, "µs", 1e3, obs,
                     contenders, vs)
        for ratio in CACHE_TARGETS:
            if ratio in r.ratios:
                add_target(r, ratio, "<=", TARGET, ratio=ratio)
        rows.append(r)
    runtime, load_end = time.perf_counter() - started, os.getloadavg()
    header = [
        f"chash {info['chash']} ({info['commit']}) · redis-py {info['redis']} · pymemcache {info['pymemcache']}",
        f"{info['platform']} · {info['python']} · {info['cpu']} · {info['cpu_count']} CPUs",
        f"load average {load_start[0]:.2f} at start, {load_end[0]:.2f} at end; {runtime:.0f} s",
        f"wall-clock medians of {args.repeat} interleaved rounds of {args.requests} commands; three "
        "redis-server, nutcracker in front of them and three memcached on 127.0.0.1",
        "plain: redis.Redis of one server; sharded, 1: chash.redis.ShardedRedis of that one server (the "
        "routing's own cost); by hand: a redis.Redis per shard, picked with get_target_node; sharded, 3: "
        "ShardedRedis of the three; nutcracker: redis.Redis of nutcracker in front of the three",
        "pymemcache: its own HashClient (rendezvous) of three memcached; chash: chash.pymemcache.HashClient",
    ]
    text, met, total = report(rows, header)
    if args.json:
        write_json(args.json, {
            "command": " ".join(["python", *sys.argv]), "machine": info,
            "load_average": {"start": load_start, "end": load_end}, "runtime_s": runtime,
            "config": {"rounds": args.repeat, "requests": args.requests, "shards": 3, "pipeline": PIPELINE},
            "rows": [r.to_json() for r in rows], "targets_met": met, "targets_total": total,
        })
    print(text)
    return 0 if met == total else 1


ROWS = [("httpx, sync", "httpx_sync", False, True), ("httpx, async", "httpx_async", True, True),
        ("gRPC, sync", "grpc_sync", False, True), ("gRPC, asyncio", "grpc_async", True, True),
        ("aiohttp", "aiohttp", True, False)]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=31, help="rounds (default 31; 5 with --quick)")
    parser.add_argument("--requests", type=int, default=20,
                        help="requests a sample (default 20, short enough to be retaken when "
                             "preempted; 10 with --quick)")
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--json", help="write every sample, median and ratio there")
    parser.add_argument("--caches", action="store_true",
                        help="time the sharded cache clients (chash.redis, chash.pymemcache) instead")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeat, args.requests = min(args.repeat, 5), min(args.requests, 10)
    if args.repeat < 1 or args.requests < 1:
        parser.error("--repeat and --requests must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.caches:
        return main_caches(args)
    info = machine_info(["httpx", "httpx2", "grpcio", "aiohttp"])
    started, load_start = time.perf_counter(), os.getloadavg()
    backends = Backends()
    try:
        bench = Bench(backends, request_keys(1000), args.requests)
        try:
            groups = [bench.measures(row, getattr(bench, attr), asynchronous)
                      for row, attr, asynchronous, _ in ROWS]
            progress("timing")
            obs = run_schedule(groups, args.repeat)
        finally:
            bench.close()
    finally:
        backends.close()
    rows: list[Row] = []
    for row, _, _, targeted in ROWS:
        r = make_row(SECTION, row, row, 3, "µs", 1e3, obs, [BY_HAND, STICKY], VS)
        if targeted:
            add_target(r, "sticky/by hand", "<=", TARGET, ratio="sticky/by hand")
        rows.append(r)
    runtime, load_end = time.perf_counter() - started, os.getloadavg()
    header = [
        f"chash {info['chash']} ({info['commit']}) · httpx {info['httpx']} · grpcio "
        f"{info['grpcio']} · aiohttp {info['aiohttp']}",
        f"{info['platform']} · {info['python']} · {info['cpu']} · {info['cpu_count']} CPUs",
        f"load average {load_start[0]:.2f} at start, {load_end[0]:.2f} at end; {runtime:.0f} s",
        f"wall-clock medians of {args.repeat} interleaved rounds of {args.requests} requests, "
        "backends in a child process on 127.0.0.1",
        "ratio: sticky / by hand (one plain client per backend, picked with get_target_node)",
    ]
    text, met, total = report(rows, header)
    if args.json:
        write_json(args.json, {
            "command": " ".join(["python", *sys.argv]), "machine": info,
            "load_average": {"start": load_start, "end": load_end}, "runtime_s": runtime,
            "config": {"rounds": args.repeat, "requests": args.requests, "backends": 3},
            "rows": [r.to_json() for r in rows], "targets_met": met, "targets_total": total,
        })
    print(text)
    return 0 if met == total else 1


if __name__ == "__main__":
    sys.exit(main())
