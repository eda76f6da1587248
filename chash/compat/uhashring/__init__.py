"""A drop-in for uhashring 2.5: ``from chash.compat.uhashring import HashRing``.

:class:`HashRing` has uhashring's API (constructor, ``add_node``,
``remove_node``, ``get_node`` and the other getters, ``range``,
``iterate_nodes``, mapping access, ``conf``, ``distribution``, ``ring``,
``size``) and places every key on the node uhashring 2.5 places it on, in
its default mode and with ``hash_fn="ketama"``; the continuum is built and
searched in C.  ``monkey.patch_memcache()`` makes python-memcached's
``Client`` pick servers with it, as uhashring's does.

Modules: ``ring`` (``HashRing``), ``monkey`` (``patch_memcache``).
"""
from __future__ import annotations

from chash.compat.uhashring import monkey
from chash.compat.uhashring.monkey import patch_memcache
from chash.compat.uhashring.ring import HashRing

__all__ = ["HashRing", "monkey", "patch_memcache"]
