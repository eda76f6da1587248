"""A real redis-server on a free loopback port, for the membership tests.

``RedisServer`` starts ``redis-server`` without persistence (so a restart
loses every key, the worst case for the membership), waits until it answers
PING, and can stop and restart it on the same port to simulate an outage.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pytest

from _support.ports import free_port

__all__ = ["RedisServer", "emptied_client", "redis_server_path", "running_server"]

STARTUP_DEADLINE = 15.0


def redis_server_path() -> str:
    """The redis-server executable; skips the test if there is none."""
    path = shutil.which("redis-server")
    if path is None:
        pytest.skip("redis-server not installed: apt-get install redis-server")
    return path


def _pings(port: int) -> bool:
    """Whether a server on ``port`` answers PING (raw RESP, no client)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One redis-server process; ``stop()`` / ``start()`` keep the port."""

    def __init__(self) -> None:
        self.executable = redis_server_path()
        self.port = free_port()
        self.workdir = tempfile.mkdtemp(prefix="chash-redis-")
        self._process: subprocess.Popen[bytes] | None = None
        self._log = os.path.join(self.workdir, "redis.log")

    @property
    def url(self) -> str:
        """redis://127.0.0.1:PORT/0"""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Start the server and wait until it answers PING."""
        if self.running:
            return
        with open(self._log, "ab") as log:
            self._process = subprocess.Popen(
                [self.executable, "--port", str(self.port), "--bind", "127.0.0.1",
                 "--save", "", "--appendonly", "no", "--dir", self.workdir,
                 "--protected-mode", "no"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + STARTUP_DEADLINE
        while not _pings(self.port):
            if self._process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self._process.returncode}: "
                                   f"{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not answer PING on port {self.port} "
                                   f"within {STARTUP_DEADLINE:g}s: {self.log_tail()}")
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and wait for it."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)  # a paused server cannot stop
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def pause(self) -> None:
        """SIGSTOP the server: it keeps its connections and answers nothing
        (a hung Redis)."""
        assert self._process is not None
        self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT the server."""
        assert self._process is not None
        self._process.send_signal(signal.SIGCONT)

    def restart(self) -> None:
        """Stop and start again on the same port, with every key gone."""
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop the server and remove its directory."""
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def client_kwargs(self, *, asyncio: bool = False) -> dict[str, Any]:
        """Keyword arguments for a redis-py client (``redis.asyncio`` if
        ``asyncio``) that notices an outage within a few seconds."""
        from redis.backoff import NoBackoff

        if asyncio:
            from redis.asyncio.retry import Retry as AsyncRetry
            retry: Any = AsyncRetry(NoBackoff(), 1)
        else:
            from redis.retry import Retry
            retry = Retry(NoBackoff(), 1)
        return {"host": "127.0.0.1", "port": self.port, "socket_timeout": 2.0,
                "socket_connect_timeout": 1.0, "retry": retry}

    def connect(self, **kwargs: Any) -> Any:
        """A ``redis.Redis`` of this server; ``kwargs`` go to the client
        (``client_kwargs()``, say)."""
        import redis

        return redis.Redis(**{"host": "127.0.0.1", "port": self.port, **kwargs})

    def log_tail(self, lines: int = 20) -> str:
        """The end of the server's log, for failure messages."""
        try:
            with open(self._log, encoding="utf-8", errors="replace") as log:
                return "".join(log.readlines()[-lines:])
        except OSError:
            return "(no log)"


def running_server() -> Iterator[RedisServer]:
    """A started RedisServer, closed when the generator is closed: the body
    of the tests' server fixtures (``yield from running_server()``).  Skips
    the test when redis-server is not installed."""
    redis_server_path()
    srv = RedisServer()
    srv.start()
    try:
        yield srv
    finally:
        srv.close()


def emptied_client(srv: RedisServer, **kwargs: Any) -> Iterator[Any]:
    """A ``redis.Redis`` of ``srv`` (``kwargs`` go to the client), after
    every key was flushed, closed when the generator is closed: the body of
    the tests' client fixtures (``yield from emptied_client(server)``)."""
    client = srv.connect(**kwargs)
    client.flushall()
    try:
        yield client
    finally:
        client.close()
