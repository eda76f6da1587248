"""Rings that route exactly like nginx, twemproxy and libmemcached.

The layouts ``nginx``, ``ketama`` and ``libmemcached`` of
:class:`chash.ConsistentHashRouter` build those programs' rings; what they
need besides is each node id spelled as the program spells it, which is
what this package gives:

- :func:`twemproxy_id` / :func:`libmemcached_id`: the string twemproxy and
  libmemcached hash for a server (its name, else ``host:port``, or just
  ``host`` when the port is 11211);
- :func:`nginx_upstream`: a ready router from an nginx ``upstream`` block
  (``hash ... consistent`` and ``server ... weight=N`` lines);
- :func:`twemproxy_pool`: a ready router from a twemproxy (nutcracker)
  pool (``distribution: ketama``, ``hash: md5``);
- :func:`haproxy_backend`: a ready router from an HAProxy 2.6 backend with
  ``hash-type consistent`` (``balance``, ``hash-type`` and ``server``
  lines; layout ``haproxy``);
- :func:`varnish_key`: Varnish's shard director ``key()`` of a string
  (layout ``varnish``);
- :func:`nghttpx_id`: an nghttpx backend's node name, with or without its
  ``dns`` flag (layout ``nghttpx``).

Configuration errors raise :class:`ConfigError` (a ``ValueError``) naming
the line.  No dependency: the small subsets of nginx's configuration
syntax, of HAProxy's and of YAML these files use are read here.

One module a program's grammar: ``nginx``, ``twemproxy`` (with the YAML
subset it reads), ``haproxy``, ``varnish``, ``nghttpx``; beside them ``node_ids`` (the ketama
programs' node names) and ``errors``.  Import every name from
``chash.compat``; the modules are how it is laid out inside.
"""
from __future__ import annotations

from chash.compat.errors import ConfigError
from chash.compat.haproxy import (
    HaproxyBackend,
    HaproxyServer,
    haproxy_backend,
    haproxy_backend_config,
    haproxy_servers,
)
from chash.compat.nghttpx import nghttpx_id
from chash.compat.nginx import NginxServer, nginx_servers, nginx_upstream
from chash.compat.node_ids import KETAMA_DEFAULT_PORT, libmemcached_id, twemproxy_id
from chash.compat.twemproxy import TwemproxyServer, twemproxy_pool, twemproxy_servers
from chash.compat.varnish import varnish_key

__all__ = ["KETAMA_DEFAULT_PORT", "ConfigError", "HaproxyBackend", "HaproxyServer", "NginxServer",
           "TwemproxyServer", "haproxy_backend", "haproxy_backend_config", "haproxy_servers",
           "libmemcached_id", "nghttpx_id", "nginx_servers", "nginx_upstream", "twemproxy_id",
           "twemproxy_pool", "twemproxy_servers", "varnish_key"]
