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
