"""Free TCP ports on 127.0.0.1, as the OS reports them."""

from __future__ import annotations

import socket


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
