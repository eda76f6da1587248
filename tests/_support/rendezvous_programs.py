"""Real Caddy and Squid started for the rendezvous layouts' tests.

Each program runs with its own configuration in a temporary directory, on
127.0.0.1 and ports the OS picked, in front of ``Backend`` HTTP servers
(``http_backends``) whose answers name them (``200 from 127.0.0.1:PORT``),
so a request's answer says which backend the program chose.  ``require``
(``compat_programs``) skips when a program is missing, except in CI.
"""
from __future__ import annotations

import contextlib
import http.client
import json
import os
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

from _support.compat_programs import program_env, require, stop, wait_for_port
from _support.ports import free_port


def chosen_backend(body: bytes) -> str:
    """The backend a program forwarded to, from a Backend's answer."""
    text = body.decode()
    if not text.startswith("200 from "):
        raise AssertionError(f"unexpected answer {text!r}")
    return text.removeprefix("200 from ").strip()


@contextlib.contextmanager
def caddy(dials: Sequence[str], workdir: Path) -> Iterator[tuple[int, int]]:
    """Caddy with two listeners reverse-proxying to ``dials`` (upstreams in
    that order): the first with ``lb_policy header X-Key``, the second with
    ``uri_hash``.  Yields their ports."""
    binary = require("caddy")
    header_port, uri_port = free_port(), free_port()

    def server(port: int, policy: dict[str, str]) -> dict[str, object]:
        return {
            "listen": [f"127.0.0.1:{port}"],
            "automatic_https": {"disable": True},
            "routes": [{"handle": [{
                "handler": "reverse_proxy",
                "upstreams": [{"dial": dial} for dial in dials],
                "load_balancing": {"selection_policy": policy},
            }]}],
        }

    config = {
        "admin": {"disabled": True},
        "logging": {"logs": {"default": {"level": "ERROR"}}},
        "apps": {"http": {"servers": {
            "header": server(header_port, {"policy": "header", "field": "X-Key"}),
            "uri": server(uri_port, {"policy": "uri_hash"}),
        }}},
    }
    path = workdir / "caddy.json"
    path.write_text(json.dumps(config))
    env = program_env() | {"HOME": str(workdir), "XDG_DATA_HOME": str(workdir / "data"),
                           "XDG_CONFIG_HOME": str(workdir / "config")}
    proc = subprocess.Popen([binary, "run", "--config", str(path)], cwd=workdir, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_port("127.0.0.1", header_port, proc, "caddy")
        wait_for_port("127.0.0.1", uri_port, proc, "caddy")
        yield header_port, uri_port
    finally:
        stop(proc)
        if proc.stderr is not None:
            proc.stderr.close()


@contextlib.contextmanager
def squid(peers: Sequence[tuple[str, int, int]], workdir: Path) -> Iterator[int]:
    """Squid forwarding everything (``never_direct``, nothing cached) to
    CARP parents: ``peers`` are (name, port, weight) on 127.0.0.1, in
    configuration order.  Yields its port."""
    binary = require("squid")
    port = free_port()
    workdir.chmod(0o777)  # squid drops root for its effective user
    lines = [
        f"http_port 127.0.0.1:{port}",
        f"pid_filename {workdir / 'squid.pid'}",
        f"cache_log {workdir / 'cache.log'}",
        "access_log none",
        "cache_store_log none",
        f"coredump_dir {workdir}",
        "cache deny all",
        "cache_mem 8 MB",
        "shutdown_lifetime 0 seconds",
        "visible_hostname chash-test",
        "http_access allow all",
        "never_direct allow all",
        "forwarded_for delete",
        "pinger_enable off",
    ]
    for name, peer_port, weight in peers:
        lines.append(f"cache_peer 127.0.0.1 parent {peer_port} 0 carp no-query no-digest "
                     f"name={name} weight={weight}")
    path = workdir / "squid.conf"
    path.write_text("\n".join(lines) + "\n")
    proc = subprocess.Popen([binary, "-N", "-f", str(path)], cwd=workdir, env=program_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port("127.0.0.1", port, proc, "squid", timeout=30.0)
        yield port
    finally:
        stop(proc)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(workdir / "squid.pid")


def get(port: int, target: str, headers: dict[str, bytes] | None = None) -> bytes:
    """One GET of target (a path, or an absolute URL for a proxy) through
    the program on port, on a fresh connection; the answer's body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.putrequest("GET", target, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", "origin.test")
        for name, value in (headers or {}).items():
            conn.putheader(name, value)
        conn.endheaders()
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise AssertionError(f"{target}: {response.status} {body[:200]!r}")
        return body
    finally:
        conn.close()
