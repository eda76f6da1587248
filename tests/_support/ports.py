"""Free TCP ports on 127.0.0.1, as the OS reports them, and ports held
for a test server's whole life (``PortClaim``).

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

import socket
import weakref


def free_port() -> int:
    """A TCP port on 127.0.0.1 that the OS reports free (nothing listens)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct TCP ports the OS reports free on ``host`` (any
    127/8 address): each is held bound until all are picked, so none repeats."""
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(sock)
            sock.bind((host, 0))
        return [int(sock.getsockname()[1]) for sock in held]
    finally:
        for sock in held:
            sock.close()


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
