"""``chash gateway`` against nginx and haproxy as sticky load balancers.

Everything runs on 127.0.0.1 and is started by this script: three nginx
backends (each answers ``GET`` with its own name), an nginx load balancer
(``hash $http_x_user_id consistent``), a haproxy load balancer (``balance
hdr(X-User-Id)`` + ``hash-type consistent``) and ``chash gateway``, at 1
and 2 worker processes each.  ``wrk`` sends ``X-User-Id`` headers from a
pool of keys; the contenders are measured interleaved, ``--repeat`` times,
and the medians are printed with both ratios to nginx with as many workers
(``_ratios``: of the medians / the median of the per-round ratios).
Targets (both ratios must meet them): 0.5x nginx's requests at every
worker count, p99 within 2x nginx's.  A failover run then kills one backend under load and restarts it:
failed requests and the keys that moved (through the gateway, and through
nginx and haproxy for comparison).

    python benchmarks/bench_gateway.py                    # about 3 minutes
    python benchmarks/bench_gateway.py --quick            # about 1 minute
    python benchmarks/bench_gateway.py --json out.json --repeat 5 --duration 8
    python benchmarks/bench_gateway.py --websocket        # about a minute
    python benchmarks/bench_gateway.py --tls              # about 2 minutes

Needs nginx, haproxy and wrk on PATH (Debian packages of those names).

``--tls`` measures HTTPS instead (``benchmarks/_tls.py``): keep-alive
requests and new handshakes per second through chash and through nginx
with the same certificate; it needs nginx, wrk and openssl.

``--websocket`` measures WebSocket instead (``benchmarks/_websocket.py``):
messages per second through chash and through nginx in front of one echo
backend, ``--tunnels`` tunnels (default 64) of ``--message-size`` byte
messages (default 1024), interleaved rounds; it needs nginx alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _ratios

BACKENDS = ("a", "b", "c")
KEYS = 1000


def commit() -> str:
    """The short hash of the checkout being measured."""
    return subprocess.run(["git", "-C", str(Path(__file__).resolve().parent), "rev-parse",
                           "--short", "HEAD"], capture_output=True, text=True).stdout.strip()


def machine() -> dict[str, Any]:
    """What a result's JSON says of the machine it was measured on."""
    return {"python": platform.python_version(), "cpus": os.cpu_count(),
            "platform": platform.platform(), "load_average": os.getloadavg()}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_port(port: int, timeout: float = 15.0, proc: Proc | None = None) -> None:
    """Wait until something listens on ``port``; RuntimeError after
    ``timeout`` s, or as soon as ``proc`` (what should listen) has exited,
    with the end of its log."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if proc is not None and proc.popen.poll() is not None:
                raise RuntimeError(f"{proc.name} exited with status {proc.popen.returncode} "
                                   f"before listening on 127.0.0.1:{port}:\n{proc.tail()}"
                                   ) from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing listens on 127.0.0.1:{port}") from None
            time.sleep(0.05)


def get_backend(port: int, key: str) -> str:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/", headers={"X-User-Id": key})
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(response.read().decode().strip())


@dataclass
class Proc:
    """A program this script started, stopped by its process group."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path | None = None

    def tail(self, lines: int = 20) -> str:
        """The last lines of the program's output."""
        if self.log is None or not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()


def start(name: str, argv: list[str], log: Path, **popen: Any) -> Proc:
    """Start ``argv`` in a process group of its own, output to ``log``."""
    with open(log, "ab") as out:  # the child has its own copy of the descriptor
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True, **popen)
    return Proc(name, child, log)


class Lab:
    """The backends and load balancers of one run, in a temporary directory."""

    def __init__(self, root: Path, workers: list[int], reference: str | None = None) -> None:
        self.root = root
        self.reference = reference
        self.procs: dict[str, Proc] = {}
        self.backend_ports = {name: free_port() for name in BACKENDS}
        self.ports: dict[str, int] = {}
        self.workers = workers
        self._previous: Any = None  # the SIGTERM handler while the lab runs

    def backend_conf(self, name: str) -> Path:
        port = self.backend_ports[name]
        conf = self.root / f"backend-{name}.conf"
        conf.write_text(f"""
worker_processes 1;
daemon off;
pid {self.root}/backend-{name}.pid;
error_log {self.root}/backend-{name}.err warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 1000000;
  server {{
    listen 127.0.0.1:{port} reuseport backlog=4096;
    location / {{ add_header X-Backend {name}; return 200 "{name}\\n"; }}
  }}
}}
""")
        return conf

    def start_backend(self, name: str) -> None:
        running = self.procs.get(f"backend-{name}")
        if running is not None and running.popen.poll() is None:
            # Its Proc would be replaced, and the process never stopped.
            raise RuntimeError(f"backend {name} is running already")
        proc = self.procs[f"backend-{name}"] = start(
            f"backend-{name}", ["nginx", "-c", str(self.backend_conf(name)), "-p",
                                str(self.root)], self.root / f"backend-{name}.log")
        wait_port(self.backend_ports[name], proc=proc)

    def start_nginx(self, workers: int, tls: tuple[Path, Path] | None = None) -> None:
        """nginx in front of the backends; serving HTTPS with ``tls``
        (certificate, key)."""
        port = self.ports[f"nginx-{workers}"] = free_port()
        ssl = "" if tls is None else (
            f" ssl;\n    ssl_certificate {tls[0]};\n    ssl_certificate_key {tls[1]};\n"
            f"    ssl_protocols TLSv1.2 TLSv1.3")
        servers = "\n".join(f"    server 127.0.0.1:{p} max_fails=1 fail_timeout=1s;"
                            for p in self.backend_ports.values())
        conf = self.root / f"nginx-{workers}.conf"
        conf.write_text(f"""
worker_processes {workers};
daemon off;
pid {self.root}/nginx-{workers}.pid;
error_log {self.root}/nginx-{workers}.err error;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 1000000;
  upstream backends {{
    hash $http_x_user_id consistent;
{servers}
    keepalive 64;
  }}
  server {{
    listen 127.0.0.1:{port} backlog=4096{ssl};
    location / {{
      proxy_pass http://backends;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_next_upstream error timeout;
    }}
  }}
}}
""")
        proc = self.procs[f"nginx-{workers}"] = start(
            f"nginx-{workers}", ["nginx", "-c", str(conf), "-p", str(self.root)],
            self.root / f"nginx-{workers}.log")
        wait_port(port, proc=proc)

    def start_haproxy(self, workers: int) -> None:
        port = self.ports[f"haproxy-{workers}"] = free_port()
        servers = "\n".join(
            f"  server {name} 127.0.0.1:{p} check inter 1s fall 1 rise 1"
            for name, p in self.backend_ports.items())
        conf = self.root / f"haproxy-{workers}.cfg"
        conf.write_text(f"""
global
  nbthread {workers}
  maxconn 4096
defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  option http-keep-alive
  retries 3
  option redispatch 1
  retry-on conn-failure empty-response response-timeout
frontend fe
  bind 127.0.0.1:{port}
  default_backend be
backend be
  balance hdr(X-User-Id)
  hash-type consistent
{servers}
""")
        proc = self.procs[f"haproxy-{workers}"] = start(
            f"haproxy-{workers}", ["haproxy", "-f", str(conf)],
            self.root / f"haproxy-{workers}.log")
        wait_port(port, proc=proc)

    def start_chash(self, workers: int, tls: tuple[Path, Path] | None = None) -> None:
        """``chash gateway`` in front of the backends; serving HTTPS with
        ``tls`` (certificate, key)."""
        port = self.ports[f"chash-{workers}"] = free_port()
        backends = ",".join(f"{name}=127.0.0.1:{p}" for name, p in self.backend_ports.items())
        argv = [sys.executable, "-m", "chash", "gateway", "--listen", f"127.0.0.1:{port}",
                "--backend", backends, "--key", "header:X-User-Id",
                "--health-interval", "1", "--log-level", "warning"]
        if tls is not None:
            argv += ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])]
        if workers > 1:
            argv += ["--workers", str(workers)]
        proc = self.procs[f"chash-{workers}"] = start(f"chash-{workers}", argv,
                                                      self.root / f"chash-{workers}.log")
        wait_port(port, proc=proc)
        # Every worker listens once all of them answer; give them a moment.
        time.sleep(1.0 + 0.5 * workers)

    def start_reference(self, ref: str) -> None:
        """``chash gateway`` as it was at git revision ``ref`` (one process):
        that revision's Python files and its own engine, built here, since
        the Python side of one revision may need modules of the extension
        another revision no longer has."""
        repo = Path(__file__).resolve().parent.parent
        tree = self.root / "reference"
        tree.mkdir()
        archive = subprocess.run(["git", "-C", str(repo), "archive", ref],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree,
                       check=True, stdout=subprocess.DEVNULL)
        port = self.ports["chash-ref-1"] = free_port()
        backends = ",".join(f"{name}=127.0.0.1:{p}" for name, p in self.backend_ports.items())
        env = {**os.environ, "PYTHONPATH": str(tree)}
        argv = [sys.executable, "-m", "chash", "gateway", "--listen", f"127.0.0.1:{port}",
                "--backend", backends, "--key", "header:X-User-Id",
                "--health-interval", "1", "--log-level", "warning"]
        proc = self.procs["chash-ref-1"] = start("chash-ref-1", argv, self.root / "chash-ref.log",
                                                 env=env, cwd=tree)
        wait_port(port, proc=proc)
        time.sleep(1.0)

    def __enter__(self) -> Lab:
        # SIGTERM unwinds like Ctrl-C, through __exit__: nothing outlives the run.
        self._previous = signal.signal(signal.SIGTERM, _terminate)
        try:
            for name in BACKENDS:
                self.start_backend(name)
            for workers in self.workers:
                self.start_nginx(workers)
                self.start_haproxy(workers)
                self.start_chash(workers)
            if self.reference:
                self.start_reference(self.reference)
        except BaseException:
            self.__exit__()  # what did start must not outlive the run
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop every program started, each even if stopping another failed."""
        failures = []
        for proc in self.procs.values():
            try:
                proc.stop()
            except BaseException as error:  # the others are still stopped
                failures.append(f"{proc.name}: {error!r}")
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None
        if failures:
            print("could not stop: " + "; ".join(failures), file=sys.stderr)


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


LUA = """
local keys = {}
local requests = {}
init = function(args)
  for i = 1, %(keys)d do
    -- wrk.format takes these headers instead of wrk.headers: -H's too, then
    local headers = {["X-User-Id"] = "user-" .. i}
    for name, value in pairs(wrk.headers) do headers[name] = value end
    requests[i] = wrk.format("GET", "/", headers)
  end
end
local n = 0
request = function()
  n = n + 1
  return requests[(n %% #requests) + 1]
end
"""


@dataclass
class Sample:
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    non_2xx: int
    requests: int


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


def parse_wrk(text: str) -> Sample:
    def latency(pct: str) -> float:
        match = re.search(rf"^\s*{pct}%\s+([\d.]+)(us|ms|s|m)\s*$", text, re.MULTILINE)
        return float(match.group(1)) * _UNITS[match.group(2)] if match else float("nan")

    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    total = re.search(r"(\d+) requests in", text)
    errors = sum(int(n) for n in re.findall(
        r"(?:connect|read|write|timeout) (\d+)", text.split("Socket errors:", 1)[1])
    ) if "Socket errors:" in text else 0
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return Sample(float(rps.group(1)) if rps else 0.0, latency("50"), latency("99"),
                  errors, int(non_2xx.group(1)) if non_2xx else 0,
                  int(total.group(1)) if total else 0)


def wrk(port: int, script: Path, duration: float, threads: int, connections: int) -> Sample:
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration:g}s", "--latency",
         "--timeout", "10s", "-s", str(script), f"http://127.0.0.1:{port}/"],
        capture_output=True, text=True, check=True, timeout=duration + 60).stdout
    return parse_wrk(out)


#: Targets against nginx with as many workers: requests at least, p99 at most.
RPS_TARGET, P99_TARGET = 0.5, 2.0


@dataclass
class Row:
    name: str
    samples: list[Sample] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)

    def median(self, attr: str) -> float:
        return statistics.median(getattr(s, attr) for s in self.samples)

    def values(self, attr: str) -> list[float]:
        return [getattr(s, attr) for s in self.samples]


def versus(row: Row, base: Row, attr: str = "rps") -> tuple[float, float]:
    """Both ratios of row to base (the same rounds): of the medians, and
    the median of the per-round ratios."""
    return _ratios.both(row.values(attr), base.values(attr))


def judged(row: Row, base: Row) -> dict[str, Any]:
    """row's ratios to base, its targets and their verdicts (both ratios)."""
    rps, rps_rounds = versus(row, base)
    p99, p99_rounds = versus(row, base, "p99_ms")
    return {"ratio_of_medians": rps, "median_of_round_ratios": rps_rounds,
            "conservative": _ratios.conservative([rps, rps_rounds], ">="),
            "p99_ratio_of_medians": p99, "p99_median_of_round_ratios": p99_rounds,
            "p99_conservative": _ratios.conservative([p99, p99_rounds], "<="),
            "rps_ok": _ratios.holds([rps, rps_rounds], ">=", RPS_TARGET),
            "p99_ok": _ratios.holds([p99, p99_rounds], "<=", P99_TARGET)}


def throughput(lab: Lab, script: Path, args: argparse.Namespace) -> dict[str, Row]:
    rows: dict[str, Row] = {}
    def kinds(workers: int) -> list[str]:
        extra = ["chash-ref"] if args.reference and workers == 1 else []
        return ["nginx", "haproxy", "chash", *extra]

    for workers in args.workers:
        for kind in kinds(workers):
            rows[f"{kind}-{workers}"] = Row(f"{kind}-{workers}")
    for rep in range(args.repeat):
        for workers in args.workers:
            names = [f"{k}-{workers}" for k in kinds(workers)]
            # Rotate the order each round, so no contender always runs first.
            names = names[rep % len(names):] + names[:rep % len(names)]
            got = {}
            for name in names:
                got[name] = wrk(lab.ports[name], script, args.duration, args.threads,
                                args.connections)
                rows[name].samples.append(got[name])
                print(f"  round {rep + 1}: {name:10s} {got[name].rps:9,.0f} req/s", flush=True)
            base = got[f"nginx-{workers}"].rps
            for name in names:
                rows[name].ratios.append(got[name].rps / base if base else float("nan"))
    return rows


def failover(lab: Lab, script: Path, args: argparse.Namespace, name: str) -> dict[str, Any]:
    """Kill backend b under load through ``name``, restart it; count failed
    requests and keys that moved."""
    port = lab.ports[name]
    keys = [f"user-{i}" for i in range(1, 301)]
    before = {k: get_backend(port, k) for k in keys}
    duration = max(6.0, 3 * args.failover_pause + 2)
    with open(lab.root / f"wrk-failover-{name}.txt", "w") as out:
        load = subprocess.Popen(
            ["wrk", "-t2", "-c32", f"-d{math.ceil(duration)}s", "--timeout", "10s", "-s", str(script),
             f"http://127.0.0.1:{port}/"], stdout=out, stderr=subprocess.STDOUT)
        try:
            time.sleep(args.failover_pause)
            lab.procs["backend-b"].stop()
            time.sleep(args.failover_pause)
            during = {k: get_backend(port, k) for k in keys}
            lab.start_backend("b")
            time.sleep(args.failover_pause)
            load.wait(duration + 60)
        finally:
            if load.poll() is None:
                load.kill()
                load.wait()
    after = {k: get_backend(port, k) for k in keys}
    sample = parse_wrk((lab.root / f"wrk-failover-{name}.txt").read_text())
    owned_by_b = {k for k, v in before.items() if v == "b"}
    moved = {k for k in keys if during[k] != before[k]}
    return {
        "contender": name,
        "requests": sample.requests,
        "failed": sample.errors + sample.non_2xx,
        "keys": len(keys),
        "keys_on_b": len(owned_by_b),
        "moved_while_b_down": len(moved),
        "moved_were_exactly_bs": moved == owned_by_b,
        "back_after_restart": sum(after[k] == before[k] for k in keys),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2", help="worker counts (default 1,2)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per wrk run")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--failover-pause", type=float, default=3.0)
    parser.add_argument("--no-failover", action="store_true")
    parser.add_argument("--reference", metavar="GIT_REV",
                        help="also measure chash gateway as of this revision (1 process)")
    parser.add_argument("--quick", action="store_true", help="3 rounds of 3 s")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--websocket", action="store_true",
                        help="WebSocket messages through chash and nginx instead")
    parser.add_argument("--tunnels", type=int, default=64, help="with --websocket (default 64)")
    parser.add_argument("--message-size", type=int, default=1024,
                        help="with --websocket: bytes a message (default 1024)")
    parser.add_argument("--tls", action="store_true",
                        help="HTTPS through chash and nginx with one certificate instead: "
                             "keep-alive requests and new handshakes per second")
    args = parser.parse_args(argv)
    args.workers = [int(w) for w in args.workers.split(",")]
    if args.quick:
        args.repeat, args.duration = 3, 3.0
    if args.websocket:
        if subprocess.run(["which", "nginx"], capture_output=True).returncode:
            parser.error("nginx is not on PATH (apt-get install nginx)")
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import _websocket

        return _websocket.run(args, sys.modules[__name__])
    if args.tls:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import _tls

        return _tls.run(args, sys.modules[__name__])
    for tool in ("nginx", "haproxy", "wrk"):
        if subprocess.run(["which", tool], capture_output=True).returncode:
            parser.error(f"{tool} is not on PATH (apt-get install {tool})")
    revision = commit()
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="chash-bench-") as tmp:
        root = Path(tmp)
        script = root / "keys.lua"
        script.write_text(LUA % {"keys": KEYS})
        with Lab(root, args.workers, args.reference) as lab:
            print(f"wrk -t{args.threads} -c{args.connections} -d{args.duration:g}s, "
                  f"{KEYS} keys, {args.repeat} interleaved rounds", flush=True)
            rows = throughput(lab, script, args)
            failovers = [] if args.no_failover else [
                failover(lab, script, args, f"{kind}-{args.workers[0]}")
                for kind in ("chash", "nginx", "haproxy")]
    lines = ["", f"commit {revision}, load average {load_start:.1f} at the start, "
             f"{os.getloadavg()[0]:.1f} at the end", _ratios.LEGEND,
             f"{'contender':12s} {'req/s':>9s} {'p50 ms':>8s} {'p99 ms':>8s} "
             f"{'errors':>7s} {'x nginx':>13s} {'p99 x nginx':>13s}  target"
             + ("  (chash-ref: revision " + args.reference + ")" if args.reference else "")]
    verdicts: dict[str, dict[str, Any]] = {}
    for row in rows.values():
        base = rows[f"nginx-{row.name.rsplit('-', 1)[1]}"]
        got = verdicts[row.name] = judged(row, base)
        target = ""
        if row.name.startswith("chash-") and not row.name.startswith("chash-ref"):
            target = (f"≥ {RPS_TARGET}× {'✓' if got['rps_ok'] else '✗'}; "
                      f"p99 ≤ {P99_TARGET}× {'✓' if got['p99_ok'] else '✗'}")
        lines.append(f"{row.name:12s} {row.median('rps'):9,.0f} {row.median('p50_ms'):8.2f} "
                     f"{row.median('p99_ms'):8.2f} "
                     f"{sum(s.errors + s.non_2xx for s in row.samples):7d} "
                     f"{_ratios.pair_text(got['ratio_of_medians'], got['median_of_round_ratios'], ''):>13s} "
                     f"{_ratios.pair_text(got['p99_ratio_of_medians'], got['p99_median_of_round_ratios'], ''):>13s}"
                     f"  {target}".rstrip())
    checked = [v for name, v in verdicts.items()
               if name.startswith("chash-") and not name.startswith("chash-ref")]
    met = sum(v["rps_ok"] for v in checked) + sum(v["p99_ok"] for v in checked)
    lines.append(f"targets met: {met} of {2 * len(checked)} (each by both its ratio of medians "
                 "and its median of per-round ratios)")
    speedup = None
    if args.reference and "chash-ref-1" in rows:
        speedup = versus(rows["chash-1"], rows["chash-ref-1"])
        lines.append("chash-1 / chash-ref-1 (same rounds): "
                     f"{_ratios.pair_text(*speedup, 'x')}")
    if failovers:
        lines += ["", "failover (backend b killed under load, restarted):"]
        for fo in failovers:
            lines.append(
                f"  {fo['contender']:10s} {fo['requests']:8,d} requests, {fo['failed']} failed; "
                f"{fo['moved_while_b_down']} of {fo['keys']} keys moved "
                f"({'exactly' if fo['moved_were_exactly_bs'] else 'NOT only'} b's "
                f"{fo['keys_on_b']}); {fo['back_after_restart']} of {fo['keys']} on their "
                "backend after the restart")
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps({
            "machine": machine(),
            "commit": revision,
            "settings": {k: v for k, v in vars(args).items() if k != "json"},
            "load_average": {"start": load_start, "end": os.getloadavg()[0]},
            "ratio_statistics": _ratios.LEGEND,
            "rows": {name: {"samples": [vars(s) for s in row.samples], "ratios": row.ratios,
                            "median_rps": row.median("rps"), "median_p99_ms": row.median("p99_ms"),
                            **verdicts[name]}
                     for name, row in rows.items()},
            "targets_met": met, "targets_total": 2 * len(checked),
            "speedup_over_reference": speedup,
            "failover": failovers,
        }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
