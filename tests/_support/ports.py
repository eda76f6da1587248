"""Free TCP ports on 127.0.0.1, as the OS reports them."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that the OS reports free (nothing listens)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def refused_node() -> str:
    """A host:port on 127.0.0.1 where nothing listens."""
    return f"127.0.0.1:{free_port()}"
