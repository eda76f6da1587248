"""chash: a consistent-hash router for Python gateways, with a C ring engine.

``ConsistentHashRouter`` routes exactly like the documented pure-Python
router (MD5, ``{node}_virtual_{i}``, first point >= the key's hash), only
faster, and adds weights, other hash functions and layouts, replica lists.
"""
from chash._chash import (
    HASHES,
    LAYOUTS,
    MAX_NODE_POINTS,
    MAX_NODES,
    MAX_POINTS,
    MAX_VIRTUAL_NODES,
    ConsistentHashRouter,
)
from chash.bounded import BoundedLoadRouter

__all__ = [
    "BoundedLoadRouter",
    "ConsistentHashRouter",
    "HASHES",
    "LAYOUTS",
    "MAX_NODE_POINTS",
    "MAX_NODES",
    "MAX_POINTS",
    "MAX_VIRTUAL_NODES",
]
__version__ = "0.1.0"
