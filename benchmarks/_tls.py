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

The medians and both ratios to nginx (``_ratios``: of the medians / the
median of the per-round ratios) are printed; a target holds when both do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import _ratios

#: The targets of the issue, as ratios to nginx with the same certificate.
TARGETS = {"keep-alive": 0.5, "handshakes": 0.7}


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
    rows: dict[tuple[str, str], Any] = {}
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
                        rows[measure, f"{kind}-{workers}"] = bench.Row(f"{kind}-{workers}")
            for rep in range(args.repeat):
                for measure in TARGETS:
                    for workers in args.workers:
                        names = [f"nginx-{workers}", f"chash-{workers}"]
                        names = names[rep % 2:] + names[:rep % 2]
                        got = {}
                        for name in names:
                            got[name] = wrk(bench, lab.ports[name], script, args,
                                            close=measure == "handshakes")
                            rows[measure, name].samples.append(got[name])
                            print(f"  round {rep + 1}: {measure:10s} {name:8s} "
                                  f"{got[name].rps:9,.0f} /s", flush=True)
                        base = got[f"nginx-{workers}"].rps
                        for name in names:
                            rows[measure, name].ratios.append(
                                got[name].rps / base if base else float("nan"))
    lines = ["", f"commit {commit}, load average {load_start:.1f} at the start, "
             f"{os.getloadavg()[0]:.1f} at the end", _ratios.LEGEND,
             f"{'measure':11s} {'contender':9s} {'per s':>9s} {'p50 ms':>8s} {'p99 ms':>8s} "
             f"{'errors':>7s} {'x nginx':>13s}  target"]
    met = 0
    checked = 0
    verdicts: dict[tuple[str, str], dict[str, Any]] = {}
    for (measure, name), row in rows.items():
        base = rows[measure, f"nginx-{name.rsplit('-', 1)[1]}"]
        medians, rounds = bench.versus(row, base)
        got = verdicts[measure, name] = {
            "ratio_of_medians": medians, "median_of_round_ratios": rounds,
            "conservative": _ratios.conservative([medians, rounds], ">=")}
        verdict = ""
        if name.startswith("chash"):
            checked += 1
            ok = got["ok"] = _ratios.holds([medians, rounds], ">=", TARGETS[measure])
            met += ok
            verdict = f"≥ {TARGETS[measure]}× {'✓' if ok else '✗'}"
        lines.append(f"{measure:11s} {name:9s} {row.median('rps'):9,.0f} "
                     f"{row.median('p50_ms'):8.2f} {row.median('p99_ms'):8.2f} "
                     f"{sum(s.errors + s.non_2xx for s in row.samples):7d} "
                     f"{_ratios.pair_text(medians, rounds, ''):>13s}  {verdict}".rstrip())
    lines.append(f"targets met: {met} of {checked} (each by both its ratio of medians and its "
                 "median of per-round ratios)")
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps({
            "machine": bench.machine(),
            "commit": commit,
            "settings": {k: v for k, v in vars(args).items() if k != "json"},
            "load_average": {"start": load_start, "end": os.getloadavg()[0]},
            "targets": TARGETS,
            "ratio_statistics": _ratios.LEGEND,
            "rows": {f"{measure} {name}": {
                "samples": [vars(s) for s in row.samples], "ratios": row.ratios,
                "median_per_second": row.median("rps"), "median_p99_ms": row.median("p99_ms"),
                **verdicts[measure, name]}
                for (measure, name), row in rows.items()},
            "targets_met": met, "targets_total": checked,
        }, indent=2) + "\n")
    return 0
