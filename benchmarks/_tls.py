"""``bench_gateway.py --tls``: HTTPS through ``chash gateway`` and through
nginx, with the same certificate, in front of the same backends.

Everything runs on 127.0.0.1 and is started here: the three nginx
backends of the plain benchmark (plain HTTP: TLS ends at the load
balancer, as it does in front of a service), an nginx load balancer
serving TLS (``listen ... ssl``, ``hash $http_x_user_id consistent``)
and ``chash gateway --tls-cert --tls-key``, at 1 and 2 worker processes
each.  One ECDSA P-256 certificate made by ``openssl req`` serves both.
Two measures, each in interleaved rounds with the order rotated:

* **keep-alive**: ``wrk`` over HTTPS on ``--connections`` keep-alive
  connections: requests per second once the handshakes are done;
* **handshakes**: ``wrk`` with ``Connection: close``, so that every
  request is a new TCP connection and a new TLS handshake: handshakes per
  second.  Debian's wrk speaks TLS 1.3 and resumes its sessions (nginx's
  ``$ssl_protocol $ssl_session_reused`` say ``TLSv1.3 r`` for all but each
  connection's first), so these are the resumed handshakes of returning
  clients (a ticket and a fresh X25519 exchange each), for both contenders
  alike; a load client doing full handshakes fast enough not to be the
  bottleneck on two cores is not part of this benchmark.

Beside requests per second of wall clock, each run reads the CPU time
its contender's processes used (the process group's, from ``/proc``:
nginx's master and workers, chash's supervisor and workers), so that a
machine busy with other work, or the load client's share of the cores,
does not decide the comparison: requests per CPU-second.  For each, the
ratio to nginx is given both ways: the ratio of the medians, and the
median of the ratios measured in the same round.  A target is met only
when all four reach it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The targets of the issue, as ratios to nginx with the same certificate.
TARGETS = {"keep-alive": 0.5, "handshakes": 0.7}


def group_cpu(pgid: int) -> float:
    """CPU seconds (user and system) used so far by the processes alive in
    process group ``pgid``, from ``/proc/PID/stat``."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        if int(fields[2]) == pgid:  # pgrp
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


@dataclass
class TlsRow:
    """One contender's samples in one measure, with its CPU time."""

    name: str
    samples: list[Any] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    """CPU seconds of its process group, per sample."""
    ratios: list[float] = field(default_factory=list)
    """Per round: requests per second ÷ nginx's in the same round."""
    cpu_ratios: list[float] = field(default_factory=list)
    """Per round: requests per CPU-second ÷ nginx's in the same round."""

    def median(self, attr: str) -> float:
        return statistics.median(getattr(s, attr) for s in self.samples)

    @property
    def per_cpu(self) -> list[float]:
        """Requests per CPU-second, per sample."""
        return [s.requests / cpu if cpu else float("nan")
                for s, cpu in zip(self.samples, self.cpu, strict=True)]


def make_certificate(root: Path) -> tuple[Path, Path]:
    """A self-signed ECDSA P-256 certificate for localhost (cert, key)."""
    cert, key = root / "tls-cert.pem", root / "tls-key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


def wrk(bench: Any, port: int, script: Path, args: Any, close: bool) -> Any:
    argv = ["wrk", f"-t{args.threads}", f"-c{args.connections}", f"-d{args.duration:g}s",
            "--latency", "--timeout", "10s", "-s", str(script)]
    if close:
        argv += ["-H", "Connection: close"]
    out = subprocess.run([*argv, f"https://localhost:{port}/"], capture_output=True, text=True,
                         check=True, timeout=args.duration + 60).stdout
    return bench.parse_wrk(out)


def run(args: Any, bench: Any) -> int:
    """Measure, print, write ``--json``; 0."""
    for tool in ("nginx", "wrk", "openssl"):
        if subprocess.run(["which", tool], capture_output=True).returncode:
            print(f"{tool} is not on PATH (apt-get install {tool})", file=sys.stderr)
            return 2
    commit = bench.commit()
    load_start = os.getloadavg()[0]
    rows: dict[tuple[str, str], TlsRow] = {}
    with tempfile.TemporaryDirectory(prefix="chash-bench-tls-") as tmp:
        root = Path(tmp)
        script = root / "keys.lua"
        script.write_text(bench.LUA % {"keys": bench.KEYS})
        cert, key = make_certificate(root)
        with bench.Lab(root, []) as lab:  # the backends start with the lab
            for workers in args.workers:
                lab.start_nginx(workers, tls=(cert, key))
                lab.start_chash(workers, tls=(cert, key))
            print(f"wrk over TLS -t{args.threads} -c{args.connections} "
                  f"-d{args.duration:g}s, {bench.KEYS} keys, {args.repeat} interleaved "
                  f"rounds; the same ECDSA P-256 certificate", flush=True)
            for measure in TARGETS:
                for workers in args.workers:
                    for kind in ("nginx", "chash"):
                        rows[measure, f"{kind}-{workers}"] = TlsRow(f"{kind}-{workers}")
            for rep in range(args.repeat):
                for measure in TARGETS:
                    for workers in args.workers:
                        names = [f"nginx-{workers}", f"chash-{workers}"]
                        names = names[rep % 2:] + names[:rep % 2]
                        got = {}
                        for name in names:
                            group = lab.procs[name].popen.pid
                            before = group_cpu(group)
                            got[name] = wrk(bench, lab.ports[name], script, args,
                                            close=measure == "handshakes")
                            row = rows[measure, name]
                            row.samples.append(got[name])
                            row.cpu.append(group_cpu(group) - before)
                            print(f"  round {rep + 1}: {measure:10s} {name:8s} "
                                  f"{got[name].rps:9,.0f} /s  {row.per_cpu[-1]:9,.0f} "
                                  f"/CPU-s", flush=True)
                        base = rows[measure, f"nginx-{workers}"]
                        for name in names:
                            row = rows[measure, name]
                            row.ratios.append(row.samples[-1].rps / base.samples[-1].rps
                                              if base.samples[-1].rps else float("nan"))
                            row.cpu_ratios.append(row.per_cpu[-1] / base.per_cpu[-1])
    lines = ["", f"commit {commit}, load average {load_start:.1f} at the start, "
             f"{os.getloadavg()[0]:.1f} at the end",
             "x nginx: the ratio of the medians / the median of the per-round ratios",
             f"{'measure':11s} {'contender':9s} {'per s':>9s} {'per CPU-s':>10s} "
             f"{'p50 ms':>8s} {'p99 ms':>8s} {'errors':>7s} {'x nginx (wall)':>15s} "
             f"{'x nginx (CPU)':>14s}  target"]
    met = 0
    checked = 0
    summary: dict[str, dict[str, float]] = {}
    for (measure, name), row in rows.items():
        base = rows[measure, "nginx-" + name.split("-", 1)[1]]
        figures = {
            "per_second": row.median("rps"),
            "per_cpu_second": statistics.median(row.per_cpu),
            "ratio_of_medians": row.median("rps") / base.median("rps"),
            "median_of_ratios": statistics.median(row.ratios),
            "cpu_ratio_of_medians": statistics.median(row.per_cpu)
            / statistics.median(base.per_cpu),
            "cpu_median_of_ratios": statistics.median(row.cpu_ratios),
        }
        summary[f"{measure} {name}"] = figures
        verdict = ""
        if name.startswith("chash"):
            checked += 1
            ok = all(figures[k] >= TARGETS[measure] for k in (
                "ratio_of_medians", "median_of_ratios", "cpu_ratio_of_medians",
                "cpu_median_of_ratios"))
            met += ok
            verdict = f"≥ {TARGETS[measure]}× {'✓' if ok else '✗'}"
        lines.append(f"{measure:11s} {name:9s} {figures['per_second']:9,.0f} "
                     f"{figures['per_cpu_second']:10,.0f} "
                     f"{row.median('p50_ms'):8.2f} {row.median('p99_ms'):8.2f} "
                     f"{sum(s.errors + s.non_2xx for s in row.samples):7d} "
                     f"{figures['ratio_of_medians']:7.2f} / {figures['median_of_ratios']:4.2f} "
                     f"{figures['cpu_ratio_of_medians']:6.2f} / "
                     f"{figures['cpu_median_of_ratios']:4.2f}  {verdict}")
    lines.append(f"targets met (all four ratios): {met} of {checked}")
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps({
            "machine": bench.machine(),
            "commit": commit,
            "load_average": {"start": load_start, "end": os.getloadavg()[0]},
            "settings": {k: v for k, v in vars(args).items() if k != "json"},
            "targets": TARGETS,
            "rows": {f"{measure} {name}": {
                "samples": [vars(s) for s in row.samples], "cpu_seconds": row.cpu,
                "ratios": row.ratios, "cpu_ratios": row.cpu_ratios,
                **summary[f"{measure} {name}"]}
                for (measure, name), row in rows.items()},
        }, indent=2) + "\n")
    return 0
