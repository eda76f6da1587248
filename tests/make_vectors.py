"""Prints the known-answer routing table of tests/ring/test_router_documented.py.

The documented example cluster (three order-service nodes, 50 virtual
nodes) routed by the documented pure-Python router (tests/_support/reference_router.py),
for user_0 .. user_9, plus the ring position of each key.  Run it from the
repository root and paste its output over the tables in the test:

    python tests/make_vectors.py
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _support.reference_router import DocumentedRouter

NODES = ["order-service-v1", "order-service-v2", "order-service-v3"]
VIRTUAL_NODE_COUNT = 50
KEYS = [f"user_{i}" for i in range(10)]


def routes() -> dict[str, str]:
    router = DocumentedRouter(virtual_node_count=VIRTUAL_NODE_COUNT)
    for node in NODES:
        router.add_service_node(node)
    out = {}
    for key in KEYS:
        node = router.get_target_node(key)
        assert node is not None
        out[key] = node
    return out


def hashes() -> dict[str, int]:
    router = DocumentedRouter(virtual_node_count=VIRTUAL_NODE_COUNT)
    return {key: router._calculate_hash(key) for key in KEYS}


def main() -> None:
    print("KNOWN_ROUTES = {")
    for key, node in routes().items():
        print(f"    {key!r}: {node!r},")
    print("}")
    print("KNOWN_HASHES = {")
    for key, value in hashes().items():
        print(f"    {key!r}: {value:#010x},")
    print("}")


if __name__ == "__main__":
    main()
