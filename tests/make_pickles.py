"""Writes tests/vectors/pickles.json: routers of every class and layout
pickled by the version that runs this, with the owners of a fixed set of
keys and their fingerprints.  tests/ring/test_old_pickles.py loads the
pickles with the current version and checks that they route identically
(and, for the later set, as a router built fresh by ``every_class()``).
Run from the repository root with a built chash:

    python tests/make_pickles.py            # the set of routers(), as in 0.1.0
    python tests/make_pickles.py --every    # the set of every_class()

Each run replaces the set it writes and keeps the other.  The file
committed holds two sets: ``routers`` made by chash 0.1.0 at commit 96eb399
(before the binding became one router type), and ``every_class`` made at
commit ea11c0d (before the four router classes shared one shell): one
pickle of every layout of ConsistentHashRouter, MaglevRouter, JumpRouter and
RendezvousRouter.
"""
from __future__ import annotations

import base64
import json
import pickle
import subprocess
import sys
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


def every_class() -> dict[str, Any]:
    """One router of every class and layout, with a few nodes, weights where
    the layout takes them (whole or real as it takes them) and zones on one.
    The test builds these again to compare with the pickles' routers."""
    out: dict[str, Any] = {}
    real = {"python", "node", "varnish"}
    weightless = {"nghttpx"}
    for layout in ("python", "node", "ketama", "nginx", "libmemcached", "haproxy", "varnish",
                   "nghttpx", "envoy", "grpc"):
        r = chash.ConsistentHashRouter(layout=layout)
        heavy = 1.0 if layout in weightless else 2.5 if layout in real else 3.0
        r.add_service_node("10.0.0.1:80", 1)
        r.add_service_node("10.0.0.2:80", heavy, zone="eu-1" if layout == "python" else None)
        r.add_service_nodes(["10.0.0.3:80", "10.0.0.4:80"])
        r.add_service_node("10.0.0.5:80", 1)
        r.remove_service_node("10.0.0.3:80")
        out[f"router-{layout}"] = r
    m = chash.MaglevRouter(1021)
    m.add_service_node("h1", 1)
    m.add_service_node("h2", 3)
    m.add_service_nodes(["h3", "h4", "h5"])
    m.remove_service_node("h4")
    out["maglev-envoy"] = m
    for layout, hash_name in (("jump", "xxh64"), ("guava", "murmur3_128")):
        j = chash.JumpRouter(layout=layout, hash=hash_name)
        j.add_service_nodes(["b0", "b1", "b2"])
        j.add_service_node("b3")
        j.add_service_node("b4")
        j.remove_service_node("b4")
        out[f"jump-{layout}"] = j
    for layout in ("hrw", "pymemcache", "caddy", "squid"):
        v = chash.RendezvousRouter(layout=layout)
        heavy = 1.0 if layout in ("pymemcache", "caddy") else 2.5 if layout == "hrw" else 3.0
        v.add_service_node("10.0.0.1:80", 1)
        v.add_service_node("10.0.0.2:80", heavy)
        v.add_service_nodes(["10.0.0.3:80", "10.0.0.4:80"])
        v.remove_service_node("10.0.0.3:80")
        out[f"rendezvous-{layout}"] = v
    return out


def record(router: Any) -> dict[str, Any]:
    return {
        "class": type(router).__name__,
        "pickle": base64.b64encode(pickle.dumps(router, protocol=4)).decode(),
        "owners": router.get_target_nodes(KEYS),
        "fingerprint": router.fingerprint(),
        "zones": router.zones if hasattr(router, "zones") else {},
    }


def main() -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    every = "--every" in sys.argv[1:]
    made = routers() if not every else every_class()
    records = {name: record(router) for name, router in made.items()}
    path = Path(__file__).parent / "vectors" / "pickles.json"
    doc = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"keys": KEYS}
    if doc["keys"] != KEYS:
        raise SystemExit(f"{path} was made with other keys: write both sets again")
    made_by = f"chash {chash.__version__} at {commit}"
    if every:
        doc["every_class"] = {"made_by": made_by, "routers": records}
    else:
        doc.update(made_by=made_by, routers=records)
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}: {len(records)} routers")


if __name__ == "__main__":
    main()
