"""Pickles made by an earlier version (tests/vectors/pickles.json, written by
tests/make_pickles.py) load into the current types and route identically:
every layout, zones and HAProxy ids included, and MaglevRouter."""
from __future__ import annotations

import base64
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

import chash

VECTORS = json.loads((Path(__file__).parents[1] / "vectors" / "pickles.json").read_text(encoding="utf-8"))
KEYS: list[str] = VECTORS["keys"]


def load(name: str) -> Any:
    return pickle.loads(base64.b64decode(VECTORS["routers"][name]["pickle"]))


@pytest.mark.parametrize("name", sorted(VECTORS["routers"]))
def test_an_old_pickle_routes_as_it_did(name: str) -> None:
    record = VECTORS["routers"][name]
    router = load(name)
    expected_type = chash.MaglevRouter if name.startswith("maglev") else chash.ConsistentHashRouter
    assert type(router) is expected_type
    router._check()
    assert router.get_target_nodes(KEYS) == record["owners"]
    assert router.fingerprint() == record["fingerprint"]
    if expected_type is chash.ConsistentHashRouter:
        assert router.zones == record["zones"]
    again = pickle.loads(pickle.dumps(router))
    assert again == router and again.fingerprint() == record["fingerprint"]


def test_the_vectors_cover_every_layout_and_maglev() -> None:
    layouts = {load(name).layout for name in VECTORS["routers"] if not name.startswith("maglev")}
    assert layouts == {"python", "node", "ketama", "nginx", "libmemcached", "haproxy", "envoy", "grpc"}
    assert any(name.startswith("maglev") for name in VECTORS["routers"])
    assert any(record["zones"] for record in VECTORS["routers"].values())


# The later set: one pickle of every class and layout, made at ea11c0d
# (tests/make_pickles.py --every), before the four classes shared one shell.
EVERY: dict[str, Any] = VECTORS["every_class"]["routers"]


def test_the_later_set_was_made_at_ea11c0d() -> None:
    assert VECTORS["every_class"]["made_by"].endswith(" at ea11c0d")


@pytest.mark.parametrize("name", sorted(EVERY))
def test_a_pickle_of_every_class_loads_as_a_fresh_router(name: str) -> None:
    from make_pickles import every_class

    record = EVERY[name]
    router = pickle.loads(base64.b64decode(record["pickle"]))
    fresh = every_class()[name]
    assert type(router) is getattr(chash, record["class"]) is type(fresh)
    router._check()
    assert router.get_target_nodes(KEYS) == record["owners"] == fresh.get_target_nodes(KEYS)
    assert router.fingerprint() == record["fingerprint"] == fresh.fingerprint()
    assert router.nodes == fresh.nodes and router.weights == fresh.weights
    assert router.layout == fresh.layout and router.hash == fresh.hash
    if isinstance(router, chash.ConsistentHashRouter):
        assert router.zones == record["zones"] == fresh.zones
    assert router == fresh
    again = pickle.loads(pickle.dumps(router))
    assert type(again) is type(router) and again == router
    assert again.fingerprint() == record["fingerprint"]


def test_the_later_set_covers_every_class_and_layout() -> None:
    seen = {(record["class"], pickle.loads(base64.b64decode(record["pickle"])).layout)
            for record in EVERY.values()}
    routers = {("ConsistentHashRouter", layout) for layout in (
        "python", "node", "ketama", "nginx", "libmemcached", "haproxy", "varnish", "nghttpx",
        "envoy", "grpc")}
    others = {("MaglevRouter", "envoy"), ("JumpRouter", "jump"), ("JumpRouter", "guava")} | {
        ("RendezvousRouter", layout) for layout in ("hrw", "pymemcache", "caddy", "squid")}
    assert seen == routers | others
    assert any(record["zones"] for record in EVERY.values())
    weighted = [record for record in EVERY.values()
                if any(w != 1 for w in pickle.loads(base64.b64decode(record["pickle"])).weights.values())]
    assert len(weighted) >= 10


@pytest.mark.parametrize("name", sorted(EVERY))
def test_every_class_pickles_through_the_one_reconstructor(name: str) -> None:
    from make_pickles import every_class

    router = every_class()[name]
    fn, args, *state = router.__reduce__()
    assert fn is chash._chash._reconstruct and args[0] is type(router)
    again = fn(*args)
    if state:
        again.__setstate__(state[0])
    assert type(again) is type(router) and again == router
    assert again.fingerprint() == router.fingerprint()
    assert again.get_target_nodes(KEYS) == router.get_target_nodes(KEYS)


def test_the_reconstructor_checks_its_arguments() -> None:
    from chash._chash import _reconstruct

    with pytest.raises(ValueError, match="no router family 'ring16'"):
        _reconstruct(chash.ConsistentHashRouter, "ring16", (), [])
    with pytest.raises(TypeError, match="must be a MaglevRouter type"):
        _reconstruct(chash.JumpRouter, "maglev", (251,), [])
    with pytest.raises(TypeError):
        _reconstruct(chash.JumpRouter, "jump", ["jump", "xxh64"], [])
    with pytest.raises(ValueError, match="layout"):
        _reconstruct(chash.JumpRouter, "jump", ("nope", "xxh64"), [])
    with pytest.raises(ValueError):
        _reconstruct(chash.MaglevRouter, "maglev", (251,), [("a", 0.5)])

    mine = Mine(layout="envoy")
    mine.add_service_node("a", 3)
    again = pickle.loads(pickle.dumps(mine))
    assert type(again) is Mine and again == mine


class Mine(chash.ConsistentHashRouter):
    """A subclass, pickled by reference to this module."""
