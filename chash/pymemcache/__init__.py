"""memcached from Python, sharded as libmemcached and twemproxy shard it.

``HashClient`` is pymemcache's ``HashClient`` with a chash ring placing the
keys; ``hasher`` is the same ring as a hasher class for pymemcache's own
``HashClient(servers, hasher=...)``.  With the layouts ``"libmemcached"``
(the default) and ``"ketama"`` every key goes where pylibmc, PHP's
memcached extension and twemproxy put it, so a pool shared with them hits.
Needs the ``pymemcache`` extra: ``pip install 'chash-router[pymemcache]'``.
See docs/clients.md.

* ``ring``: the hasher (no pymemcache import);
* ``client``: ``HashClient``.
"""
from __future__ import annotations

from chash.pymemcache.client import HashClient
from chash.pymemcache.ring import RingHasher, hasher, ring_name

__all__ = ["HashClient", "RingHasher", "hasher", "ring_name"]
