"""Real Varnish and nghttpx started for the varnish and nghttpx layouts' tests.

Each program runs with its own configuration and working directory in a
temporary directory, on 127.0.0.1 and ports the OS picked, and is stopped
by the test.  ``require`` (``compat_programs``) skips when a program is
missing, except in CI (``CI=true``), where that is a failure.

Varnish answers every request itself from ``vcl_synth``, with the name of
the backend its ``directors.shard()`` picks for the request's key in a
response header (``X-Pick``), so thousands of keys take one request each
and no backend is needed; a second listener passes requests to the real
backends (``Backend`` servers that name themselves), which proves the pick
is where the request goes.  Backends are marked sick through varnishadm
for the healthy walk.
"""
from __future__ import annotations

import contextlib
import http.client
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from _support.compat_programs import program_env, require, stop, wait_for_port
from _support.ports import free_port


@dataclass(frozen=True)
class ShardBackend:
    """A backend of a shard director: its VCL name, port and weight."""

    name: str
    port: int
    weight: float = 1.0


@dataclass(frozen=True)
class ShardDirector:
    """A shard director: backends added in order, then ``removed`` taken
    out by name, then ``reconfigure(replicas=...)``."""

    backends: tuple[ShardBackend, ...]
    replicas: int = 67
    removed: tuple[str, ...] = ()


def _vcl(directors: Sequence[ShardDirector]) -> str:
    lines = ["vcl 4.1;", "import directors;", "import std;", ""]
    declared: dict[str, int] = {}
    for director in directors:
        for b in director.backends:
            if declared.setdefault(b.name, b.port) != b.port:
                raise ValueError(f"backend {b.name} declared with two ports")
    for name, port in declared.items():
        lines.append(f'backend {name} {{ .host = "127.0.0.1"; .port = "{port}"; }}')
    lines += ["", "sub vcl_init {"]
    for d, director in enumerate(directors):
        lines.append(f"    new shard{d} = directors.shard();")
        for b in director.backends:
            weight = f", weight={b.weight!r}" if b.weight != 1.0 else ""
            lines.append(f"    shard{d}.add_backend({b.name}{weight});")
        for name in director.removed:
            lines.append(f"    shard{d}.remove_backend({name});")
        lines.append(f"    shard{d}.reconfigure(replicas={director.replicas});")
    lines += ["}", ""]
    # X-Dir: which director; X-Hash: the key as a ring position (by=KEY);
    # X-Key: a string, through the director's own key(); X-Alt and
    # X-Healthy: the walk.
    for d in range(len(directors)):
        lines += [f"sub pick{d} {{", "    if (req.http.X-Key) {",
                  f"        set req.http.X-Hash = shard{d}.key(req.http.X-Key);", "    }"]
        for i, mode in enumerate(("ALL", "IGNORE", "CHOSEN")):
            test = "} else {" if mode == "CHOSEN" else (
                f'{"if" if i == 0 else "} elsif"} (req.http.X-Healthy == "{mode}") {{')
            lines += [f"    {test}",
                      f"        set req.backend_hint = shard{d}.backend(by=KEY,",
                      "            key=std.integer(req.http.X-Hash, 0),",
                      f"            alt=std.integer(req.http.X-Alt, 0), healthy={mode});"]
        lines += ["    }", "}", ""]
    lines += ["sub vcl_recv {"]
    for d in range(len(directors)):
        lines.append(f'    if (req.http.X-Dir == "{d}") {{ call pick{d}; }}')
    lines += [
        "    if (std.port(local.ip) == std.integer(req.http.X-Synth-Port, 0)) {",
        "        return (synth(200));",
        "    }",
        "    return (pass);",
        "}",
        "",
        "sub vcl_synth {",
        "    set resp.http.X-Pick = req.backend_hint;",
        "    set resp.http.X-Hash = req.http.X-Hash;",
        "    return (deliver);",
        "}",
    ]
    return "\n".join(lines) + "\n"


class Varnish:
    """A running varnishd (see the module docstring)."""

    def __init__(self, workdir: Path, synth_port: int, pass_port: int) -> None:
        self.workdir = workdir
        self.synth_port = synth_port
        self.pass_port = pass_port
        self._conn: http.client.HTTPConnection | None = None

    def _synth(self, headers: dict[str, str]) -> http.client.HTTPResponse:
        if self._conn is None:
            self._conn = http.client.HTTPConnection("127.0.0.1", self.synth_port, timeout=20)
        conn = self._conn
        conn.putrequest("GET", "/", skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", "origin.test")
        conn.putheader("X-Synth-Port", str(self.synth_port))
        for name, value in headers.items():
            conn.putheader(name, value.encode("utf-8"))  # a key's bytes, as sent
        conn.endheaders()
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            raise AssertionError(f"varnish answered {response.status}")
        return response

    def pick(self, director: int, *, key: str | None = None, hash: int | None = None,
             alt: int = 0, healthy: str = "CHOSEN") -> str:
        """The backend director number ``director`` picks (its VCL name, ""
        for none), for a string key (through its key()) or a ring position."""
        headers = {"X-Dir": str(director), "X-Alt": str(alt), "X-Healthy": healthy}
        if key is not None:
            headers["X-Key"] = key
        if hash is not None:
            headers["X-Hash"] = str(hash)
        return self._synth(headers).getheader("X-Pick") or ""

    def key_hash(self, key: str) -> int:
        """The director's key() of a string."""
        return int(self._synth({"X-Dir": "0", "X-Key": key}).getheader("X-Hash") or "-1")

    def fetch(self, director: int, key: str) -> bytes:
        """A request with this key passed to the backend the director
        picks; the backend's answer."""
        conn = http.client.HTTPConnection("127.0.0.1", self.pass_port, timeout=20)
        try:
            conn.putrequest("GET", "/", skip_host=True, skip_accept_encoding=True)
            conn.putheader("Host", "origin.test")
            conn.putheader("X-Dir", str(director))
            conn.putheader("X-Key", key.encode("utf-8"))
            conn.endheaders()
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                raise AssertionError(f"varnish passed {key!r}: {response.status}")
            return body
        finally:
            conn.close()

    def set_health(self, backend: str, state: str) -> None:
        """backend.set_health through varnishadm: "sick", "healthy" or "auto"."""
        subprocess.run([require("varnishadm"), "-n", str(self.workdir / "n"), "backend.set_health",
                        backend, state], check=True, env=program_env(), capture_output=True,
                       timeout=30)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


@contextlib.contextmanager
def varnish(directors: Sequence[ShardDirector], workdir: Path) -> Iterator[Varnish]:
    """varnishd (no jail, its own -n directory) with one shard director a
    ``ShardDirector``, numbered in order; yields a ``Varnish``."""
    binary = require("varnishd")
    require("varnishadm")
    synth_port, pass_port = free_port(), free_port()
    vcl = workdir / "shard.vcl"
    vcl.write_text(_vcl(directors))
    proc = subprocess.Popen(
        [binary, "-F", "-j", "none", "-n", str(workdir / "n"), "-a", f"127.0.0.1:{synth_port}",
         "-a", f"127.0.0.1:{pass_port}", "-T", "127.0.0.1:0", "-f", str(vcl), "-s", "malloc,16m"],
        cwd=workdir, env=program_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    running = Varnish(workdir, synth_port, pass_port)
    try:
        wait_for_port("127.0.0.1", synth_port, proc, "varnishd", timeout=90.0)
        wait_for_port("127.0.0.1", pass_port, proc, "varnishd", timeout=90.0)
        yield running
    finally:
        running.close()
        stop(proc)


@contextlib.contextmanager
def nghttpx(backends: Sequence[str], workdir: Path, affinity: str) -> Iterator[int]:
    """nghttpx (one worker, no TLS) in front of ``backends``, each
    ``"HOST,PORT"`` optionally followed by ``";dns"``, in that order, with
    ``affinity=ip`` or ``affinity=cookie`` (cookie ``lb``); yields its port."""
    binary = require("nghttpx")
    port = free_port()
    params = f"affinity={affinity}" + (";affinity-cookie-name=lb" if affinity == "cookie" else "")
    args = [binary, "--conf=/dev/null", f"--frontend=127.0.0.1,{port};no-tls", "--workers=1",
            f"--pid-file={workdir / 'nghttpx.pid'}", "--errorlog-file=" + str(workdir / "error.log"),
            "--accesslog-file=/dev/null", "--no-ocsp", "--single-process"]
    for backend in backends:
        host_port, _, flag = backend.partition(";")
        args.append(f"--backend={host_port};;{params}" + (f";{flag}" if flag else ""))
    proc = subprocess.Popen(args, cwd=workdir, env=program_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for_port("127.0.0.1", port, proc, "nghttpx", timeout=30.0)
        yield port
    finally:
        stop(proc)
