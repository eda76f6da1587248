"""Random sequences of operations on ConsistentHashRouter and on a model.

Every rule is applied to the C router and to a from-scratch Python model
(tests/reference_router.py's ModelRouter, which rebuilds its ring on every
query), every answer is compared, and the ring's invariant checker runs
after each step.  Four machines: the documented layout with MD5, the same
with a hash so narrow (64 positions) that most points collide, the Node
layout and the ketama layout.
"""
from __future__ import annotations

import bisect
import hashlib
import math
import struct
import zlib
from collections.abc import Callable

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from chash import ConsistentHashRouter
from reference_router import ModelRouter

# Prefixes of each other, empty, NUL, non-ASCII, non-BMP: every byte-order case.
NODE_NAMES = ["", "a", "ab", "abc", "a\x00", "b", "é", "éa", "节点", "\U0001F600"]
WEIGHTS = [0.01, 0.25, 0.5, 1, 1.0, 1.5, 2, 3]


def narrow_hash(data: bytes) -> int:
    """64 ring positions: most points collide, many keys land on a point."""
    return zlib.crc32(data) % 64


def node_point(data: bytes) -> int:
    """The documented Node ring: the first 8 hex digits of the MD5 digest."""
    return int(hashlib.md5(data).hexdigest()[:8], 16)


def as_bytes(key: str | bytes) -> bytes:
    return key.encode("utf-8") if isinstance(key, str) else key


class Model(ModelRouter):
    """ModelRouter plus the queries it lacks, over any point function.

    point=None keeps ModelRouter's own documented MD5 points and lookups.
    """

    def __init__(self, virtual_node_count: int, vkey: str = "{node}_virtual_{index}",
                 point: Callable[[bytes], int] | None = None) -> None:
        super().__init__(virtual_node_count)
        self.vkey = vkey
        self.point = point

    def key_point(self, key: str | bytes) -> int:
        assert self.point is not None
        return self.point(as_bytes(key)) % 2**32

    def points(self) -> list[tuple[int, bytes, str]]:
        if self.point is None:
            return super().points()
        out = []
        for node in self.weights:
            for index in range(self.point_count(node)):
                out.append((self.vpoint(node, index), node.encode("utf-8"), node))
        out.sort()
        return out

    def vpoint(self, node: str, index: int) -> int:
        return self.key_point(self.vkey.format(node=node, index=index))

    def get_target_node(self, key: str | bytes) -> str | None:
        if self.point is None:
            return super().get_target_node(key)
        ring = self.points()
        if not ring:
            return None
        pos = bisect.bisect_left(ring, (self.key_point(key),))
        return ring[pos % len(ring)][2]

    def hash_of(self, key: str | bytes) -> int:
        if self.point is None:
            return int(hashlib.md5(as_bytes(key)).hexdigest(), 16) % 2**32
        return self.key_point(key)

    def preference(self, key: str | bytes, n: int) -> list[str]:
        ring = self.points()
        if not ring:
            return []
        pos = bisect.bisect_left(ring, (self.hash_of(key),))
        out: list[str] = []
        for step in range(len(ring)):
            node = ring[(pos + step) % len(ring)][2]
            if len(out) == n:
                break
            if node not in out:
                out.append(node)
        return out

    def node_map(self) -> dict[int, str]:
        out: dict[int, str] = {}
        for value, _, node in self.points():
            out.setdefault(value, node)  # the smallest id comes first
        return out

    def ownership(self) -> dict[str, float]:
        ring = self.points()
        share = {node: 0.0 for node in self.weights}
        for i, (value, _, node) in enumerate(ring):
            prev = ring[i - 1][0] if i else ring[-1][0] - 2**32
            share[node] += (value - prev) / 2**32
        return share


def ketama_key_point(data: bytes) -> int:
    """libketama: the first four MD5 digest bytes, little-endian."""
    return int.from_bytes(hashlib.md5(data).digest()[:4], "little")


def f32(value: float) -> float:
    """value rounded to single precision, as a C float holds it."""
    return struct.unpack("f", struct.pack("f", value))[0]


class KetamaModel(Model):
    """libketama: "{node}-{i // 4}", four little-endian points a digest;
    node k gets floorf(pct * base / 4 * n) * 4 points, pct = w_k / total,
    every step rounded to float; a shared point goes to the node added
    first."""

    def point_count(self, node: str) -> int:
        total = f32(float(sum(self.weights.values())))
        pct = f32(f32(self.weights[node]) / total)
        groups = f32(f32(f32(pct * f32(self.virtual_node_count)) / 4) * f32(len(self.weights)))
        return math.floor(groups) * 4

    def points(self) -> list[tuple[int, bytes, str]]:
        order = {node: rank for rank, node in enumerate(self.weights)}
        out = [(self.vpoint(node, index), order[node], node)
               for node in self.weights for index in range(self.point_count(node))]
        out.sort()
        return [(value, node.encode("utf-8"), node) for value, _, node in out]

    def vpoint(self, node: str, index: int) -> int:
        digest = hashlib.md5(f"{node}-{index // 4}".encode("utf-8")).digest()
        return int.from_bytes(digest[4 * (index % 4):4 * (index % 4) + 4], "little")


class RouterMachine(RuleBasedStateMachine):
    layout = "python"
    hash: str | Callable[[bytes], int] = "md5"
    vkey = "{node}_virtual_{index}"
    point: Callable[[bytes], int] | None = None
    model_class = Model

    def __init__(self) -> None:
        super().__init__()
        self.router: ConsistentHashRouter | None = None
        self.model: Model | None = None

    vnode_choices = [1, 2, 3, 7]
    weight_choices = WEIGHTS

    @initialize(data=st.data())
    def start(self, data: st.DataObject) -> None:
        vnodes = data.draw(st.sampled_from(self.vnode_choices))
        self.router = ConsistentHashRouter(vnodes, hash=self.hash, layout=self.layout)
        self.model = self.model_class(vnodes, self.vkey, self.point)

    def keys(self) -> st.SearchStrategy[str | bytes]:
        raise NotImplementedError

    # -- mutations -----------------------------------------------------------

    @rule(node=st.sampled_from(NODE_NAMES), data=st.data())
    def add(self, node: str, data: st.DataObject) -> None:
        weight = data.draw(st.sampled_from(self.weight_choices))
        self.router.add_service_node(node, weight)
        self.model.weights[node] = float(weight)  # a present node keeps its place

    @rule(node=st.sampled_from(NODE_NAMES))
    def add_default_weight(self, node: str) -> None:
        self.router.add_service_node(node)
        self.model.weights[node] = 1.0

    @precondition(lambda self: self.model is not None and self.model.weights)
    @rule(data=st.data())
    def reweigh(self, data: st.DataObject) -> None:
        weight = data.draw(st.sampled_from(self.weight_choices))
        node = data.draw(st.sampled_from(sorted(self.model.weights)))
        before = self.router.fingerprint()
        old_count = self.model.point_count(node)
        self.router.add_service_node(node, weight=weight)
        self.model.weights[node] = float(weight)
        if self.model.point_count(node) != old_count:
            assert self.router.fingerprint() != before

    @rule(node=st.sampled_from(NODE_NAMES))
    def remove(self, node: str) -> None:
        if node in self.model.weights:
            self.router.remove_service_node(node)
            del self.model.weights[node]
        else:
            before = self.router.hash_ring
            with pytest.raises(KeyError) as info:
                self.router.remove_service_node(node)
            assert info.value.args == (node,)
            assert self.router.hash_ring == before

    @rule(node=st.sampled_from(NODE_NAMES))
    def discard(self, node: str) -> None:
        self.router.discard_service_node(node)
        self.model.weights.pop(node, None)

    # -- queries -------------------------------------------------------------

    @rule(data=st.data())
    def lookup(self, data: st.DataObject) -> None:
        key = data.draw(self.keys())
        expected = self.model.get_target_node(key)
        assert self.router.get_target_node(key) == expected
        assert self.router.get_target_node(as_bytes(key)) == expected
        assert self.router._calculate_hash(key) == self.model.hash_of(key)

    @rule(data=st.data())
    def exact_point_lookup(self, data: st.DataObject) -> None:
        # The virtual key of a point hashes onto the point itself.
        node = data.draw(st.sampled_from(NODE_NAMES))
        index = data.draw(st.integers(0, 20))
        key = self.vkey.format(node=node, index=index)
        assert self.router.get_target_node(key) == self.model.get_target_node(key)

    @rule(data=st.data())
    def batch(self, data: st.DataObject) -> None:
        keys = data.draw(st.lists(self.keys(), max_size=11))
        expected = [self.model.get_target_node(key) for key in keys]
        assert self.router.get_target_nodes(keys) == expected
        counts = {node: 0 for node in self.model.weights}
        for node in expected:
            if node is not None:
                counts[node] += 1
        assert self.router.key_distribution(keys) == counts

    @rule(data=st.data(), n=st.integers(0, len(NODE_NAMES) + 2))
    def preference(self, data: st.DataObject, n: int) -> None:
        key = data.draw(self.keys())
        assert self.router.get_preference_list(key, n) == self.model.preference(key, n)

    # -- after every step ----------------------------------------------------

    @invariant()
    def agrees_with_the_model(self) -> None:
        if self.router is None:
            return
        router, model = self.router, self.model
        router._check()
        assert router.nodes == list(model.weights)
        assert list(router) == list(model.weights)
        assert len(router) == len(model.weights)
        assert router.weights == model.weights
        assert router.points == {node: model.point_count(node) for node in model.weights}
        for node in NODE_NAMES:
            assert (node in router) == (node in model.weights)
        ring = model.points()
        assert router.hash_ring == [value for value, _, _ in ring]
        assert router.node_map == model.node_map()
        ownership = router.ownership()
        assert ownership.keys() == model.weights.keys()
        for node, share in model.ownership().items():
            assert math.isclose(ownership[node], share, abs_tol=1e-9)

    @invariant()
    def fingerprint_ignores_insertion_order(self) -> None:
        if self.router is None:
            return
        fresh = ConsistentHashRouter(self.router.virtual_node_count, hash=self.hash, layout=self.layout)
        for node, weight in sorted(self.model.weights.items(), reverse=True):
            fresh.add_service_node(node, weight)
        assert fresh.fingerprint() == self.router.fingerprint()
        assert fresh.hash_ring == self.router.hash_ring
        assert fresh.node_map == self.router.node_map
        # In the layouts that give ties to the node added first, the order
        # is part of the configuration (and these rings have no tie).
        assert (fresh == self.router) == (self.layout in ("python", "node")
                                          or fresh.nodes == self.router.nodes)


KEYS = st.one_of(st.text(max_size=10), st.binary(max_size=10))


class DocumentedLayoutMachine(RouterMachine):
    """MD5 and "{node}_virtual_{i}", against ModelRouter itself."""

    def keys(self) -> st.SearchStrategy[str | bytes]:
        return KEYS


class CollidingMachine(RouterMachine):
    """A 64-position hash: shared points everywhere, keys often on a point."""

    hash = staticmethod(narrow_hash)
    point = staticmethod(narrow_hash)

    def keys(self) -> st.SearchStrategy[str | bytes]:
        return KEYS


class NodeLayoutMachine(RouterMachine):
    """The documented Node ring: "{node}#vnode{i}", first 32 bits of MD5."""

    layout = "node"
    vkey = "{node}#vnode{index}"
    point = staticmethod(node_point)

    def keys(self) -> st.SearchStrategy[str | bytes]:
        return KEYS


class KetamaLayoutMachine(RouterMachine):
    """libketama's points and weighted counts, which every weight changes."""

    layout = "ketama"
    vkey = "{node}-{index}"  # only for exact_point_lookup: point 4 * index
    point = staticmethod(ketama_key_point)
    model_class = KetamaModel
    vnode_choices = [40, 160]
    weight_choices = [1, 2, 3]

    def keys(self) -> st.SearchStrategy[str | bytes]:
        return KEYS


STEPS = settings(stateful_step_count=30)
TestDocumentedLayout = DocumentedLayoutMachine.TestCase
TestDocumentedLayout.settings = STEPS
TestColliding = CollidingMachine.TestCase
TestColliding.settings = STEPS
TestNodeLayout = NodeLayoutMachine.TestCase
TestNodeLayout.settings = STEPS
TestKetamaLayout = KetamaLayoutMachine.TestCase
TestKetamaLayout.settings = STEPS


def test_the_colliding_machine_really_collides() -> None:
    # The narrow hash shares points between nodes and the smallest id owns them.
    router = ConsistentHashRouter(7, hash=narrow_hash)
    for node in NODE_NAMES:
        router.add_service_node(node)
    ring = router.hash_ring
    assert len(set(ring)) < len(ring)
    model = Model(7, point=narrow_hash)
    for node in NODE_NAMES:
        model.weights[node] = 1.0
    assert router.node_map == model.node_map()
    router._check()
