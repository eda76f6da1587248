"""``bench_gateway.py --websocket``: WebSocket messages per second through
``chash gateway`` and through nginx, in front of the same echo backend.

Everything runs on 127.0.0.1 and is started here: one echo backend (a
small WebSocket server on asyncio, uvloop when installed, echoing every
frame's payload unmasked), nginx proxying WebSocket (``proxy_http_version
1.1`` with the ``Upgrade`` and ``Connection`` headers), ``chash gateway``
(one process each), and a load client of two processes holding the
tunnels between them.  Each tunnel sends a 1 KiB binary message, waits for
its echo, and sends the next; the client counts echoes and their round
trips.  Contenders are measured interleaved, the order rotated each round;
the medians and both ratios to nginx (``_ratios``) are printed.

The client and the backend speak RFC 6455 frames of their own here (the
benchmark's, not the gateway's): masked client frames of one fixed size,
unmasked echoes.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _ratios

ECHO = r'''
import asyncio, base64, hashlib, sys

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class Echo(asyncio.Protocol):
    def connection_made(self, transport):
        self.t = transport
        self.buf = bytearray()
        self.open = False

    def data_received(self, data):
        buf = self.buf
        buf += data
        if not self.open:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(buf[:end]).split(b"\r\n")
            del buf[:end + 4]
            if head[0].startswith(b"GET /health"):
                self.t.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
                return
            key = [l.split(b":", 1)[1].strip() for l in head
                   if l.lower().startswith(b"sec-websocket-key:")][0]
            accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
            self.t.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                         b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
            self.open = True
        out = []
        while len(buf) >= 2:
            length = buf[1] & 0x7F
            at = 2
            if length == 126:
                if len(buf) < 4:
                    break
                length, at = int.from_bytes(buf[2:4], "big"), 4
            elif length == 127:
                if len(buf) < 10:
                    break
                length, at = int.from_bytes(buf[2:10], "big"), 10
            masked = buf[1] & 0x80
            end = at + (4 if masked else 0) + length
            if len(buf) < end:
                break
            opcode = buf[0] & 0x0F
            payload = bytes(buf[end - length:end])
            if masked:
                mask = bytes(buf[at:at + 4]) * (length // 4 + 1)
                payload = (int.from_bytes(payload, "big")
                           ^ int.from_bytes(mask[:length], "big")).to_bytes(length, "big")
            del buf[:end]
            if opcode == 8:
                self.t.write(b"\x88\x00")
                self.t.close()
                return
            if length < 126:
                out.append(bytes([0x80 | opcode, length]) + payload)
            elif length < 65536:
                out.append(bytes([0x80 | opcode, 126]) + length.to_bytes(2, "big") + payload)
            else:
                out.append(bytes([0x80 | opcode, 127]) + length.to_bytes(8, "big") + payload)
        if out:
            self.t.write(b"".join(out))


async def main():
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Echo, "127.0.0.1", int(sys.argv[1]), backlog=1024)
    async with server:
        await server.serve_forever()

try:
    import uvloop
    uvloop.run(main())
except ImportError:
    asyncio.run(main())
'''

CLIENT = r'''
import asyncio, json, os, sys, time

port, tunnels, seconds, size = (int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]),
                                int(sys.argv[4]))
MASK = b"\x12\x34\x56\x78"
payload = os.urandom(size)
masked = bytes(b ^ MASK[i % 4] for i, b in enumerate(payload))
FRAME = bytes([0x82, 0x80 | 126]) + size.to_bytes(2, "big") + MASK + masked
ECHO = 4 + size
HANDSHAKE = (b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
             b"Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
             b"Sec-WebSocket-Version: 13\r\nX-User-Id: %s\r\n\r\n")


class Tunnel(asyncio.Protocol):
    def __init__(self, name, ready, stop_at, times):
        self.name, self.ready, self.stop_at, self.times = name, ready, stop_at, times
        self.buf = bytearray()
        self.open = False
        self.sent = 0.0
        self.count = 0
        self.errors = 0

    def connection_made(self, transport):
        self.t = transport
        key = ("%022d==" % self.name).encode()
        transport.write(HANDSHAKE % (key, b"user-%d" % self.name))

    def data_received(self, data):
        buf = self.buf
        buf += data
        if not self.open:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            if not buf.startswith(b"HTTP/1.1 101"):
                self.errors += 1
                self.t.close()
                if not self.ready.done():
                    self.ready.set_result(None)
                return
            del buf[:end + 4]
            self.open = True
            self.ready.set_result(None)
            return
        while len(buf) >= ECHO:
            now = time.perf_counter()
            if buf[0] != 0x82 or buf[2:4] != size.to_bytes(2, "big"):
                self.errors += 1
            del buf[:ECHO]
            self.count += 1
            self.times.append(now - self.sent)
            if now < self.stop_at:
                self.go()
            else:
                self.t.close()

    def go(self):
        self.sent = time.perf_counter()
        self.t.write(FRAME)

    def connection_lost(self, exc):
        if not self.ready.done():
            self.ready.set_result(None)


async def main():
    loop = asyncio.get_running_loop()
    base = int(sys.argv[5])
    protos, times = [], []
    for i in range(tunnels):
        ready = loop.create_future()
        _, proto = await loop.create_connection(
            lambda i=i, r=ready: Tunnel(base + i, r, float("inf"), times), "127.0.0.1", port)
        await asyncio.wait_for(ready, 20)
        protos.append(proto)
    start = time.perf_counter()
    stop_at = start + seconds
    for proto in protos:
        proto.stop_at = stop_at
        proto.go()
    await asyncio.sleep(seconds + 0.2)
    count = sum(p.count for p in protos)
    errors = sum(p.errors for p in protos) + sum(not p.open for p in protos)
    times.sort()
    print(json.dumps({"count": count, "seconds": seconds, "errors": errors,
                      "times": times[::max(1, len(times) // 20000)]}))
    for proto in protos:
        proto.t.close()

try:
    import uvloop
    uvloop.run(main())
except ImportError:
    asyncio.run(main())
'''


@dataclass
class WsSample:
    """One run of the load client against one contender."""

    mps: float
    p50_ms: float
    p99_ms: float
    errors: int
    messages: int


@dataclass
class WsRow:
    name: str
    samples: list[WsSample] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    p99_ratios: list[float] = field(default_factory=list)

    def median(self, attr: str) -> float:
        return statistics.median(getattr(s, attr) for s in self.samples)


def _quantile(times: list[float], q: float) -> float:
    return times[min(len(times) - 1, int(q * len(times)))] if times else float("nan")


def load(port: int, tunnels: int, seconds: float, size: int, processes: int = 2) -> WsSample:
    """The load client's two processes against ``port``: messages echoed
    per second, the round trips' median and 99th percentile."""
    share = [tunnels // processes + (1 if i < tunnels % processes else 0)
             for i in range(processes)]
    procs = [subprocess.Popen([sys.executable, "-c", CLIENT, str(port), str(n), str(seconds),
                               str(size), str(1000 * (i + 1))], stdout=subprocess.PIPE)
             for i, n in enumerate(share)]
    results = []
    for proc in procs:
        out, _ = proc.communicate(timeout=seconds + 120)
        if proc.returncode:
            raise RuntimeError(f"the load client failed with status {proc.returncode}")
        results.append(json.loads(out))
    times = sorted(t for r in results for t in r["times"])
    count = sum(r["count"] for r in results)
    return WsSample(count / seconds, _quantile(times, 0.5) * 1e3, _quantile(times, 0.99) * 1e3,
                    sum(r["errors"] for r in results), count)


def nginx_conf(root: Path, port: int, backend: int) -> Path:
    conf = root / "nginx-ws.conf"
    conf.write_text(f"""
worker_processes 1;
daemon off;
pid {root}/nginx-ws.pid;
error_log {root}/nginx-ws.err error;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
  upstream echo {{ server 127.0.0.1:{backend}; }}
  server {{
    listen 127.0.0.1:{port} backlog=4096;
    location / {{
      proxy_pass http://echo;
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_read_timeout 3600s;
    }}
  }}
}}
""")
    return conf


def run(args: Any, bench: Any) -> int:
    """The ``--websocket`` run; ``bench`` is bench_gateway (its helpers)."""
    import tempfile

    commit = bench.commit()
    names = ["nginx", "chash"]
    rows = {name: WsRow(name) for name in names}
    with tempfile.TemporaryDirectory(prefix="chash-bench-ws-") as tmp:
        root = Path(tmp)
        procs = []
        try:
            backend = bench.free_port()
            procs.append(bench.start("echo", [sys.executable, "-c", ECHO, str(backend)],
                                     root / "echo.log"))
            bench.wait_port(backend, proc=procs[-1])
            ports = {"nginx": bench.free_port(), "chash": bench.free_port()}
            procs.append(bench.start("nginx", ["nginx", "-c", str(nginx_conf(
                root, ports["nginx"], backend)), "-p", str(root)], root / "nginx.log"))
            bench.wait_port(ports["nginx"], proc=procs[-1])
            procs.append(bench.start("chash", [
                sys.executable, "-m", "chash", "gateway", "--listen",
                f"127.0.0.1:{ports['chash']}", "--backend", f"echo=127.0.0.1:{backend}",
                "--no-health", "--log-level", "warning"], root / "chash.log"))
            bench.wait_port(ports["chash"], proc=procs[-1])
            time.sleep(1.0)
            print(f"{args.tunnels} tunnels, {args.message_size} B messages, one in flight per "
                  f"tunnel, {args.duration:g} s runs, {args.repeat} interleaved rounds",
                  flush=True)
            for rep in range(args.repeat):
                order = names[rep % 2:] + names[:rep % 2]
                got = {}
                for name in order:
                    got[name] = load(ports[name], args.tunnels, args.duration, args.message_size)
                    rows[name].samples.append(got[name])
                    print(f"  round {rep + 1}: {name:6s} {got[name].mps:9,.0f} msg/s  "
                          f"p50 {got[name].p50_ms:6.2f} ms  p99 {got[name].p99_ms:6.2f} ms",
                          flush=True)
                for name in names:
                    rows[name].ratios.append(got[name].mps / got["nginx"].mps)
                    rows[name].p99_ratios.append(got[name].p99_ms / got["nginx"].p99_ms)
        finally:
            for proc in procs:
                proc.stop()
    lines = ["", f"commit {commit}, load average {os.getloadavg()[0]:.1f} at the end",
             _ratios.LEGEND,
             f"{'contender':10s} {'msg/s':>9s} {'p50 ms':>8s} {'p99 ms':>8s} {'errors':>7s} "
             f"{'x nginx':>13s} {'p99 x nginx':>13s}"]
    both: dict[str, dict[str, float]] = {}
    for row in rows.values():
        base = rows["nginx"]
        mps = _ratios.both([s.mps for s in row.samples], [s.mps for s in base.samples])
        p99 = _ratios.both([s.p99_ms for s in row.samples], [s.p99_ms for s in base.samples])
        both[row.name] = {"ratio_of_medians": mps[0], "median_of_round_ratios": mps[1],
                          "p99_ratio_of_medians": p99[0], "p99_median_of_round_ratios": p99[1]}
        lines.append(f"{row.name:10s} {row.median('mps'):9,.0f} {row.median('p50_ms'):8.2f} "
                     f"{row.median('p99_ms'):8.2f} {sum(s.errors for s in row.samples):7d} "
                     f"{_ratios.pair_text(*mps, ''):>13s} {_ratios.pair_text(*p99, ''):>13s}")
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps({
            "machine": bench.machine(),
            "commit": commit,
            "settings": {"tunnels": args.tunnels, "message_size": args.message_size,
                         "duration": args.duration, "repeat": args.repeat},
            "rows": {name: {"samples": [vars(s) for s in row.samples], "ratios": row.ratios,
                            "p99_ratios": row.p99_ratios, "median_mps": row.median("mps"),
                            **both[name]}
                     for name, row in rows.items()},
        }, indent=2) + "\n")
    errors = sum(s.errors for row in rows.values() for s in row.samples)
    return 1 if errors else 0
