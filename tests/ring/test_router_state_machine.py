"""Random sequences of operations on ConsistentHashRouter and on a model.

Every rule is applied to the C router and to a from-scratch Python model
(tests/_support/reference_router.py's ModelRouter, which rebuilds its ring
whenever the nodes change), every answer is compared, and the ring's
invariant checker runs after each step.  Four machines: the documented layout with MD5, the same
with a hash so narrow (64 positions) that most points collide, the Node
layout and the ketama layout.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from _support.hashes import narrow_hash
from _support.reference_router import ModelRouter, as_bytes, assert_same_ring
from chash import ConsistentHashRouter

# Prefixes of each other, empty, NUL, non-ASCII, non-BMP: every byte-order case.
NODE_NAMES = ["", "a", "ab", "abc", "a\x00", "b", "é", "éa", "节点", "\U0001F600"]
WEIGHTS = [0.01, 0.25, 0.5, 1, 1.0, 1.5, 2, 3]


class RouterMachine(RuleBasedStateMachine):
    layout = "python"
    hash: str | Callable[[bytes], int] = "md5"
    vkey = "{node}_virtual_{index}"

    def __init__(self) -> None:
        super().__init__()
        self.router: ConsistentHashRouter | None = None
        self.model: ModelRouter | None = None

    vnode_choices: ClassVar[list[int]] = [1, 2, 3, 7]
    weight_choices: ClassVar[list[float]] = WEIGHTS

    @initialize(data=st.data())
    def start(self, data: st.DataObject) -> None:
        vnodes = data.draw(st.sampled_from(self.vnode_choices))
        self.router = ConsistentHashRouter(vnodes, hash=self.hash, layout=self.layout)
        self.model = ModelRouter(vnodes, self.layout, self.hash)

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
        assert self.router._calculate_hash(key) == self.model.key_point(key)

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
        assert_same_ring(router, model)
        for node in NODE_NAMES:
            assert (node in router) == (node in model.weights)
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

    def keys(self) -> st.SearchStrategy[str | bytes]:
        return KEYS


class NodeLayoutMachine(RouterMachine):
    """The documented Node ring: "{node}#vnode{i}", first 32 bits of MD5."""

    layout = "node"
    vkey = "{node}#vnode{index}"

    def keys(self) -> st.SearchStrategy[str | bytes]:
        return KEYS


class KetamaLayoutMachine(RouterMachine):
    """libketama's points; weights give counts that are not multiples of 4."""

    layout = "ketama"
    vkey = "{node}-{index}"  # only for exact_point_lookup: point 4 * index

    vnode_choices: ClassVar[list[int]] = [40, 160]
    weight_choices: ClassVar[list[float]] = [1, 2, 3]

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
    model = ModelRouter(7, hash=narrow_hash)
    for node in NODE_NAMES:
        model.weights[node] = 1.0
    assert router.node_map == model.node_map()
    router._check()
