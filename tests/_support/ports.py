"""Free TCP ports on 127.0.0.1 for test servers, and ports held for a
test server's whole life (``PortClaim``).

A port a test hands to a server it starts (Redis, nginx, etcd, ...) is
free when picked and taken only when the server binds it, a second or two
later.  CI runs several suites side by side, so meanwhile another process
could be given the same port: another suite picking a port, or any
process's outgoing connection (its local port).  So ``free_port`` picks
from below Linux's ephemeral range (``net.ipv4.ip_local_port_range``,
32768-60999 by default), which the kernel never gives to ``bind(port 0)``
or to an outgoing connection, and claims each port it gives out across
processes (of one user): an exclusive ``flock`` on a file named after the port, held for
``CLAIM_S`` seconds (the kernel lets go of it when the process ends, so no
claim outlives a crashed test).  A port in the range is given out only when
no process claims it and binding it succeeds.  Where the ephemeral range
has been moved over ours, ports come from the OS as before.

A test backend that stops (connections refused) and starts again must get
its port back.  Released, the port may meanwhile be taken by any process
on the machine (another suite's listener, an outgoing connection), and the
restart fails with "address already in use".  ``PortClaim`` keeps a socket
bound to the port, never listening, with ``SO_REUSEPORT``: connections to
it are refused while the server is stopped, only sockets that also set
``SO_REUSEPORT`` (the server's own) can bind the port beside it, and the
kernel does not pick it for an outgoing connection.
"""

from __future__ import annotations

import collections
import fcntl
import functools
import os
import random
import socket
import tempfile
import threading
import time
import weakref
from pathlib import Path

#: The ports free_port gives out: below the ephemeral range, and a Redis
#: Cluster node's bus port (its port + 10000) below it too.
FIRST_PORT, END_PORT = 16000, 22768
#: How long a claim is held: longer than any test server takes to bind.
CLAIM_S = 300.0
#: The most claims one process holds at once (each an open file).
MAX_CLAIMS = 256
CLAIMS_DIR = Path(tempfile.gettempdir()) / f"chash-test-ports-{os.getuid()}"

_claims: collections.deque[tuple[float, int]] = collections.deque()
_lock = threading.Lock()
_rng = random.Random(os.getpid() ^ time.time_ns())


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


@functools.cache
def _range_is_ours() -> bool:
    low, high = _ephemeral_range()
    return high < FIRST_PORT or low >= END_PORT + 10000


def _release_old(now: float) -> None:
    while _claims and (now - _claims[0][0] > CLAIM_S or len(_claims) >= MAX_CLAIMS):
        os.close(_claims.popleft()[1])


def claim_port(port: int) -> bool:
    """Claims port for this process (CLAIM_S seconds) unless another claim
    holds it; whether it did."""
    CLAIMS_DIR.mkdir(exist_ok=True)
    fd = os.open(CLAIMS_DIR / str(port), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    with _lock:
        now = time.monotonic()
        _release_old(now)
        _claims.append((now, fd))
    return True


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _os_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def free_port(host: str = "127.0.0.1", *, also: int | None = None) -> int:
    """A TCP port on host (any 127/8 address) that nothing listens on,
    claimed so that no other test process is given it; with also, one
    whose port + also is free and claimed too (a Redis Cluster bus)."""
    if not _range_is_ours():
        return _os_port(host)
    span = END_PORT - FIRST_PORT
    start = _rng.randrange(span)
    for step in range(span):
        port = FIRST_PORT + (start + step) % span
        if not _bindable(host, port) or not claim_port(port):
            continue
        if also is None or (_bindable(host, port + also) and claim_port(port + also)):
            return port
    raise RuntimeError(f"no free port in {FIRST_PORT}-{END_PORT - 1} on {host}")


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct TCP ports free on ``host`` (any 127/8 address),
    each claimed as free_port's."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port(host)
        if port not in ports:
            ports.append(port)
    return ports


def refused_node() -> str:
    """A host:port on 127.0.0.1 where nothing listens."""
    return f"127.0.0.1:{free_port()}"


def _reusing_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    return sock


class PortClaim:
    """A port on 127.0.0.1 chosen by the OS, held until the claim is collected."""

    def __init__(self) -> None:
        self._hold = _reusing_socket()
        self._hold.bind(("127.0.0.1", 0))
        self.port: int = self._hold.getsockname()[1]
        weakref.finalize(self, self._hold.close)

    def listener(self) -> socket.socket:
        """A new socket bound to the port, ready to listen on."""
        sock = _reusing_socket()
        try:
            sock.bind(("127.0.0.1", self.port))
        except BaseException:
            sock.close()
            raise
        return sock
