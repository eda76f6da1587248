"""Node sets pushed by a service registry: ``DnsSrvDiscovery``.

``records`` turns SRV records into nodes and weights, ``follow`` brings a
router or a membership to a node set, ``dns_srv`` looks the records up
(dnspython: ``pip install 'chash-router[dns]'``) and polls them.
See docs/discovery.md.
"""

from chash.discovery.dns_srv import DiscoveryError, DnsSrvDiscovery

__all__ = ["DiscoveryError", "DnsSrvDiscovery"]
