"""The real servers bench_clients.py --caches times: three redis-server,
nutcracker in front of them, three memcached, each on a port the OS picked
on 127.0.0.1, in a temporary directory, stopped at the end."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def program(name: str) -> str:
    path = shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}")
                                       if Path(p).exists()), None)
    if path is None:
        raise SystemExit(f"{name} is not installed (Debian: apt-get install {name})")
    return path


def wait_for(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.02)
    raise RuntimeError(f"{what} did not listen on port {port}")


@contextlib.contextmanager
def cache_servers() -> Iterator[dict[str, list[int] | int]]:
    """{"redis": [3 ports], "nutcracker": port, "memcached": [3 ports]}."""
    procs: list[subprocess.Popen[bytes]] = []
    workdir = Path(tempfile.mkdtemp(prefix="chash-bench-caches-"))
    try:
        redis_ports = [free_port() for _ in range(3)]
        for port in redis_ports:
            procs.append(subprocess.Popen(
                [program("redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", str(workdir)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_for(port, procs[-1], "redis-server")
        listen = free_port()
        conf = workdir / "nutcracker.yml"
        conf.write_text(f"pool:\n  listen: 127.0.0.1:{listen}\n  hash: md5\n  distribution: ketama\n"
                        "  redis: true\n  auto_eject_hosts: false\n  servers:\n"
                        + "".join(f"   - 127.0.0.1:{p}:1\n" for p in redis_ports), encoding="utf-8")
        procs.append(subprocess.Popen([program("nutcracker"), "-c", str(conf), "-s", str(free_port()),
                                       "-a", "127.0.0.1", "-o", str(workdir / "nutcracker.log")],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for(listen, procs[-1], "nutcracker")
        memcached_ports = [free_port() for _ in range(3)]
        for port in memcached_ports:
            procs.append(subprocess.Popen(
                [program("memcached"), "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "64", "-t", "1",
                 *(["-u", "root"] if os.geteuid() == 0 else [])], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_for(port, procs[-1], "memcached")
        yield {"redis": redis_ports, "nutcracker": listen, "memcached": memcached_ports}
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)
