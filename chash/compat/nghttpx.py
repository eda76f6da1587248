"""nghttpx 1.52's session affinity (``affinity=ip`` / ``affinity=cookie``)
as the ``nghttpx`` layout of :class:`chash.ConsistentHashRouter` reads it.

nghttpx places each backend by its address: the ``struct sockaddr`` its
numeric host and port make (so a backend is the node ``"HOST:PORT"``, or
``"[V6]:PORT"``), or, for a backend with nghttpx's ``dns`` flag, the text
``host:port`` itself (the node :func:`nghttpx_id` ``(host, port,
dns=True)`` names).  ``router.get_target_node(client_ip)`` is
``affinity=ip``'s pick for a client address as nghttpx prints it;
``router.get_target_node_by_hash(int(cookie, 16))`` is
``affinity=cookie``'s for a cookie's 8 hex digits.
"""
from __future__ import annotations

import ipaddress

__all__ = ["nghttpx_id"]


def nghttpx_id(host: str, port: int, dns: bool = False) -> str:
    """The node name of the nghttpx backend ``--backend=HOST,PORT``:
    ``"HOST:PORT"`` (``"[HOST]:PORT"`` for an IPv6 address), followed by
    ``";dns"`` when the backend has nghttpx's ``dns`` flag (then nghttpx
    hashes the text ``HOST:PORT`` and ``host`` may be a name).  Without
    ``dns`` nghttpx hashes the resolved address, so ``host`` must be a
    numeric IPv4 or IPv6 address: ValueError otherwise, as for a port
    outside 0..65535.

    >>> nghttpx_id("10.0.0.1", 8080), nghttpx_id("::1", 80), nghttpx_id("app", 80, dns=True)
    ('10.0.0.1:8080', '[::1]:80', 'app:80;dns')
    """
    if not isinstance(host, str) or not host:
        raise ValueError(f"host must be a non-empty str, not {host!r}")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"port must be an int from 0 to 65535, not {port!r}")
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is None and not dns:
        raise ValueError(
            f"nghttpx hashes a backend's resolved address: {host!r} is not a numeric IPv4 or "
            "IPv6 address (pass dns=True for a backend with nghttpx's dns flag)")
    if address is not None and not isinstance(address, ipaddress.IPv4Address) and "%" in host:
        raise ValueError(f"a scoped IPv6 address ({host!r}) is not supported")
    if any(c in host for c in ";,[]") or (address is None and ":" in host):
        raise ValueError(f"{host!r} is not a host nghttpx takes")
    text = f"[{host}]:{port}" if isinstance(address, ipaddress.IPv6Address) else f"{host}:{port}"
    return text + ";dns" if dns else text
