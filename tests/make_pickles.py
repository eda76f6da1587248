"""Writes tests/vectors/pickles.json: routers of every layout, and
MaglevRouter, pickled by the version that runs this, with the owners of a
fixed set of keys and their fingerprints.  tests/ring/test_old_pickles.py
loads the pickles with the current version and checks that they route
identically.  Run from the repository root with a built chash (the file
committed was made by chash 0.1.0 at commit 96eb399, before the binding
became one router type):

    python tests/make_pickles.py
"""
from __future__ import annotations

import base64
import json
import pickle
import subprocess
from pathlib import Path
from typing import Any

import chash

KEYS = [f"user_{i}" for i in range(200)] + ["", "é", "节点", "a" * 300]


def routers() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for layout in ("python", "node", "ketama", "nginx", "libmemcached"):
        r = chash.ConsistentHashRouter(layout=layout)
        r.add_service_node("alpha:11211", 1)
        r.add_service_node("beta:11211", 2)
        r.add_service_node("gamma:11211", 1, zone="eu-2")
        r.add_service_nodes(["delta:11211", "epsilon:11211"])
        out[layout] = r
    r = chash.ConsistentHashRouter(50, hash="xxh64")
    r.add_service_nodes(["n1", "n2", "n3"], weight=1.5)
    out["python-xxh64-50"] = r
    r = chash.ConsistentHashRouter(layout="haproxy")
    r.add_service_node("s1", 1)
    r.add_service_node("s2", 3, id=7)
    r.add_service_node("s3", 2, zone="dc-a")
    r.add_service_node("s4", 1)
    out["haproxy"] = r
    for layout, hash_name in (("envoy", "xxh64"), ("envoy", "murmur2_64"), ("grpc", "xxh64")):
        r = chash.ConsistentHashRouter(layout=layout, hash=hash_name, minimum_ring_size=64,
                                       maximum_ring_size=4096)
        r.add_service_node("10.0.0.1:80", 1)
        r.add_service_node("10.0.0.2:80", 3, zone="us-1")
        r.add_service_nodes(["10.0.0.3:80", "10.0.0.4:80"], weight=2)
        out[f"{layout}-{hash_name}"] = r
    m = chash.MaglevRouter(251)
    m.add_service_node("h1", 1)
    m.add_service_node("h2", 4)
    m.add_service_nodes(["h3", "h4"], weight=2)
    out["maglev-251"] = m
    out["maglev-empty"] = chash.MaglevRouter()
    out["python-empty"] = chash.ConsistentHashRouter()
    return out


def main() -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    records = {}
    for name, router in routers().items():
        records[name] = {
            "pickle": base64.b64encode(pickle.dumps(router, protocol=4)).decode(),
            "owners": router.get_target_nodes(KEYS),
            "fingerprint": router.fingerprint(),
            "zones": router.zones if hasattr(router, "zones") else {},
        }
    doc = {"made_by": f"chash {chash.__version__} at {commit}", "keys": KEYS, "routers": records}
    path = Path(__file__).parent / "vectors" / "pickles.json"
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}: {len(records)} routers")


if __name__ == "__main__":
    main()
