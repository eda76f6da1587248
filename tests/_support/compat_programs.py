"""Real nginx, HAProxy, nutcracker (twemproxy) and memcached started for the tests.

Every program runs with its own configuration in a temporary directory, on
127.0.0.1 (or another 127/8 address) and ports the OS picked, and is
stopped by the test.  ``require(binary)`` skips when a program is missing,
except in CI (``CI=true``), where that is a failure.
"""
from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

from _support.ci import missing
from _support.ports import free_port, free_ports


def require(binary: str, package: str | None = None) -> str:
    """The path of a program; skip (fail in CI) when it is not installed,
    naming Debian's ``package`` for it (default: the program's name)."""
    path = shutil.which(binary) or next(
        (p for p in (f"/usr/sbin/{binary}", f"/usr/bin/{binary}") if os.access(p, os.X_OK)), None)
    if path is None:
        missing(f"{binary} is not installed (Debian: apt-get install {package or binary})")
    return path


def program_env() -> dict[str, str]:
    """The environment for a started program: without the sanitizer runtime
    a sanitized test run may preload."""
    return {name: value for name, value in os.environ.items() if name != "LD_PRELOAD"}


def port_is_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def wait_for_port(host: str, port: int, proc: subprocess.Popen[bytes], what: str,
                  timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.02)
    raise RuntimeError(f"{what} did not listen on {host}:{port}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def varied_keys(n: int, seed: int) -> list[str]:
    """User ids, UUIDs, paths, non-ASCII text: keys as gateways see them
    (no whitespace or control characters: valid memcached keys)."""
    rng = random.Random(seed)
    words = ["é", "ü", "節點", "ключ", "😀", "ß", "café", "naïve", "東京", "مفتاح"]
    keys: set[str] = set()
    while len(keys) < n:
        kind = rng.randrange(6)
        if kind == 0:
            key = f"user:{rng.randrange(10**9)}"
        elif kind == 1:
            key = str(uuid.UUID(int=rng.getrandbits(128)))
        elif kind == 2:
            key = f"/api/v{rng.randrange(3)}/items/{rng.randrange(10**6)}?page={rng.randrange(50)}"
        elif kind == 3:
            key = "".join(rng.choice(words) for _ in range(rng.randrange(1, 4)))
            key += str(rng.randrange(10**4))
        elif kind == 4:
            key = "".join(chr(rng.randrange(0x21, 0x7F)) for _ in range(rng.randrange(1, 40)))
        else:
            key = f"session-{rng.getrandbits(64):x}"
        keys.add(key)
    return sorted(keys, key=lambda k: rng.random())


# -- memcached -----------------------------------------------------------------


class Memcached:
    """A memcached on (host, port); ``keys_among(keys)`` asks it which of
    the keys it holds."""

    def __init__(self, binary: str, host: str = "127.0.0.1", port: int | None = None) -> None:
        for _ in range(20):
            self.host, self.port = host, port if port is not None else free_ports(1, host)[0]
            self.proc = subprocess.Popen(
                [binary, "-l", host, "-p", str(self.port), "-U", "0", "-m", "64", "-t", "1",
                 "-c", "256"] + (["-u", "root"] if os.geteuid() == 0 else []),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=program_env())
            try:
                wait_for_port(host, self.port, self.proc, "memcached")
                # The port is free when chosen, not when bound: another
                # suite's memcached may have taken it first (ours then exits
                # at once), and it answers there.  Only ours will do.
                if self.pid() != self.proc.pid:
                    raise RuntimeError(f"another memcached answers on {host}:{self.port}")
                return
            except RuntimeError:
                stop(self.proc)
                if port is not None:
                    raise
        raise RuntimeError("memcached could not start")

    def pid(self) -> int:
        """The process id of the memcached answering on (host, port)."""
        with socket.create_connection((self.host, self.port), timeout=10) as conn:
            conn.sendall(b"stats\r\n")
            reader = conn.makefile("rb")
            while (line := reader.readline()) not in (b"", b"END\r\n"):
                if line.startswith(b"STAT pid "):
                    return int(line.split()[2])
        raise RuntimeError(f"no pid in the stats of {self.host}:{self.port}")

    def keys_among(self, keys: Sequence[str]) -> set[str]:
        found: set[str] = set()
        with socket.create_connection((self.host, self.port), timeout=10) as conn:
            reader = conn.makefile("rb")
            for start in range(0, len(keys), 200):
                chunk = keys[start:start + 200]
                conn.sendall(b"get " + b" ".join(k.encode("utf-8") for k in chunk) + b"\r\n")
                while True:
                    line = reader.readline()
                    if not line or line == b"END\r\n":
                        break
                    if not line.startswith(b"VALUE "):
                        raise RuntimeError(f"memcached said {line!r}")
                    found.add(line.split(b" ")[1].decode("utf-8"))
                    size = int(line.split(b" ")[3])
                    reader.read(size + 2)
        return found

    def flush(self) -> None:
        """Drops every key (for the next client of the same servers)."""
        with socket.create_connection((self.host, self.port), timeout=10) as conn:
            conn.sendall(b"flush_all\r\n")
            assert conn.makefile("rb").readline() == b"OK\r\n"

    def stop(self) -> None:
        # SIGKILL: it holds nothing worth a graceful exit, and on SIGTERM
        # memcached waits for its background threads' next wake-up (up to 1 s).
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


@contextlib.contextmanager
def memcacheds(count: int, hosts: Sequence[str] | None = None,
               port: int | None = None) -> Iterator[list[Memcached]]:
    """count memcached servers (on hosts[i] if given, all on `port` if given)."""
    binary = require("memcached")
    servers: list[Memcached] = []
    try:
        for i in range(count):
            servers.append(Memcached(binary, hosts[i] if hosts else "127.0.0.1", port))
        yield servers
    finally:
        for server in servers:
            server.stop()


def owners_by_server(servers: Sequence[Memcached], ids: Sequence[str],
                     keys: Sequence[str]) -> dict[str, str]:
    """{key: id of the memcached holding it}; each key must be on one."""
    owner: dict[str, str] = {}
    for server, node in zip(servers, ids, strict=True):
        for key in server.keys_among(keys):
            assert key not in owner, f"{key!r} is on two servers"
            owner[key] = node
    missing = [k for k in keys if k not in owner]
    assert not missing, f"{len(missing)} keys stored nowhere, e.g. {missing[:3]}"
    return owner


# -- nutcracker -----------------------------------------------------------------


@contextlib.contextmanager
def nutcracker(yaml_text: str, listen_port: int, workdir: Path) -> Iterator[None]:
    binary = require("nutcracker")
    conf = workdir / "nutcracker.yml"
    conf.write_text(yaml_text, encoding="utf-8")
    check = subprocess.run([binary, "-t", "-c", str(conf)], check=False, capture_output=True,
                           timeout=30, env=program_env())
    assert check.returncode == 0, check.stderr.decode(errors="replace")
    proc = subprocess.Popen([binary, "-c", str(conf), "-s", str(free_port()),
                             "-a", "127.0.0.1", "-o", str(workdir / "nutcracker.log")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=program_env())
    try:
        wait_for_port("127.0.0.1", listen_port, proc, "nutcracker")
        yield
    finally:
        stop(proc)


def set_through(port: int, keys: Sequence[str]) -> None:
    """Stores every key through a memcached-protocol proxy on port."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        reader = conn.makefile("rb")
        for start in range(0, len(keys), 200):
            chunk = keys[start:start + 200]
            conn.sendall(b"".join(b"set " + k.encode("utf-8") + b" 0 0 1\r\nx\r\n" for k in chunk))
            for key in chunk:
                line = reader.readline()
                if line != b"STORED\r\n":
                    raise RuntimeError(f"set {key!r}: {line!r}")


# -- nginx ---------------------------------------------------------------------


@contextlib.contextmanager
def nginx(upstream_servers: Sequence[str], backends: Sequence[tuple[str, int]],
          workdir: Path) -> Iterator[int]:
    """An nginx proxying to ``upstream u { hash $http_x_key consistent;
    server ...; }``; every backend (host, port) answers its own address.
    Yields the front port."""
    binary = require("nginx")
    front = free_port()
    (workdir / "logs").mkdir(exist_ok=True)
    listens = "\n".join(
        f"    server {{ listen {host}:{port}; location / {{ return 200 \"{host}:{port}\\n\"; }} }}"
        for host, port in backends)
    servers = "\n".join(f"        server {s};" for s in upstream_servers)
    conf = f"""
daemon off;
master_process off;
worker_processes 1;
pid {workdir}/nginx.pid;
error_log {workdir}/logs/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path {workdir}/body;
    proxy_temp_path {workdir}/proxy;
    fastcgi_temp_path {workdir}/fastcgi;
    uwsgi_temp_path {workdir}/uwsgi;
    scgi_temp_path {workdir}/scgi;
    upstream u {{
        hash $http_x_key consistent;
{servers}
    }}
    server {{
        listen 127.0.0.1:{front};
        location / {{ proxy_pass http://u; proxy_next_upstream off; }}
    }}
{listens}
}}
"""
    (workdir / "nginx.conf").write_text(conf, encoding="utf-8")
    proc = subprocess.Popen([binary, "-p", str(workdir), "-c", str(workdir / "nginx.conf"),
                             "-e", str(workdir / "logs" / "error.log")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=program_env())
    try:
        wait_for_port("127.0.0.1", front, proc, "nginx")
        yield front
    finally:
        stop(proc)


def ask_nginx(front: int, keys: Sequence[str]) -> list[str]:
    """The backend ("host:port") nginx sends each key to (X-Key header),
    requests pipelined over one keep-alive connection."""
    return ask_http(front, [("/", key) for key in keys], "nginx")


def ask_http(front: int, requests: Sequence[tuple[str, str | None]], what: str) -> list[str]:
    """The body of the answer to each ``(path, X-Key value or None)``
    request, pipelined over one keep-alive connection to 127.0.0.1:front."""
    answers: list[str] = []
    with socket.create_connection(("127.0.0.1", front), timeout=30) as conn:
        reader = conn.makefile("rb")
        for start in range(0, len(requests), 100):
            chunk = requests[start:start + 100]
            conn.sendall(b"".join(
                b"GET " + path.encode("utf-8") + b" HTTP/1.1\r\nHost: t\r\n"
                + (b"X-Key: " + key.encode("utf-8") + b"\r\n" if key is not None else b"")
                + b"\r\n" for path, key in chunk))
            for _ in chunk:
                status = reader.readline()
                if not status.startswith(b"HTTP/1.1 200"):
                    raise RuntimeError(f"{what} answered {status!r}")
                length = 0
                while True:
                    header = reader.readline()
                    if header in (b"\r\n", b""):
                        break
                    name, _, value = header.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                answers.append(reader.read(length).decode().strip())
    return answers


# -- HAProxy -------------------------------------------------------------------


@contextlib.contextmanager
def haproxy(cfg_text: str, ports: Sequence[int], workdir: Path) -> Iterator[None]:
    """A real haproxy running ``cfg_text`` (written to workdir), in the
    foreground, until the block ends; waits until every port listens."""
    binary = require("haproxy")
    path = workdir / "haproxy.cfg"
    path.write_text(cfg_text, encoding="utf-8")
    check = subprocess.run([binary, "-c", "-f", str(path)], capture_output=True, env=program_env(),
                           timeout=30)
    if check.returncode != 0:
        raise RuntimeError(f"haproxy -c refused the configuration: {check.stderr.decode()[-2000:]}")
    log = (workdir / "haproxy.log").open("wb")
    proc = subprocess.Popen([binary, "-db", "-f", str(path)], stdout=log, stderr=log,
                            env=program_env())
    try:
        for port in ports:
            wait_for_port("127.0.0.1", port, proc, "haproxy")
        yield
    finally:
        stop(proc)
        log.close()
