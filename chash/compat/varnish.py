"""Varnish 7.1's shard director (``directors.shard()``) as the ``varnish``
layout of :class:`chash.ConsistentHashRouter` reads it.

A backend is a node named by its ident (the backend's VCL name, or the
``ident`` given to ``add_backend``), its weight the ``weight`` given there
(>= 1), and ``virtual_node_count`` the ``replicas`` of ``reconfigure()``
(67 by default).  ``router.get_target_node(value)`` is
``d.backend(by=KEY, key=d.key(value))``; :func:`varnish_key` is that key as
a number, for ``router.get_target_node_by_hash`` (``by=KEY`` with a key of
your own, or ``by=BLOB``'s first 4 bytes read big-endian).
"""
from __future__ import annotations

import hashlib

__all__ = ["varnish_key"]


def varnish_key(value: str | bytes) -> int:
    """The shard director's ``key(value)``: the last 4 bytes of the SHA-256
    of ``value`` (UTF-8 for a str), read little-endian, as Varnish's
    ``VRT_HashStrands32`` reads them; a ring position (0 .. 2**32 - 1).

    >>> varnish_key("abc")
    2903834866
    """
    if isinstance(value, str):
        data = value.encode("utf-8")
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    else:
        raise TypeError(f"value must be str or bytes, not {type(value).__name__}")
    return int.from_bytes(hashlib.sha256(data).digest()[-4:], "little")
