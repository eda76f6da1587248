"""JumpRouter(layout="jumpback"): hash4j's jumpBackHashSplitMix64() through
the Python API, against every (hash, n, bucket) triple recorded from hash4j
(tests/vectors/hash4j/jumpback.bin) and a plain-Python oracle
(tests/_support/jump_reference.py); keys over the router's 64-bit key hash,
the documented preference list, repr, layout, pickles, == and errors."""
from __future__ import annotations

import pickle
import random

import pytest

from _support import hash4j_vectors
from _support import jump_reference as ref
from _support.hashes import M64
from chash import JumpRouter


def names(n: int) -> list[str]:
    return [f"b{i}" for i in range(n)]


def router(n: int) -> JumpRouter:
    r = JumpRouter(layout="jumpback")
    r.add_service_nodes(names(n))
    r._check()
    return r


def test_every_recorded_hash4j_answer() -> None:
    v = hash4j_vectors.jumpback()
    assert len(v.hashes) * len(v.counts) >= 100_000
    assert v.counts[0] == 1 and v.counts[-1] == 10**6
    everyone = names(v.counts[-1])
    r = JumpRouter(layout="jumpback")
    wrong = 0
    for n, want in zip(v.counts, v.buckets, strict=True):
        r.add_service_nodes(everyone[len(r):n])  # appended in order: nodes b0..b(n-1)
        assert len(r) == n
        got = r.get_target_nodes_by_hash(v.hashes)
        wrong += sum(g != everyone[b] for g, b in zip(got, want, strict=True))
        # one at a time too, on a sample
        for h, b in list(zip(v.hashes, want, strict=True))[::97]:
            assert r.get_target_node_by_hash(h) == everyone[b]
    assert wrong == 0


def test_the_oracle_agrees_with_the_recorded_answers() -> None:
    v = hash4j_vectors.jumpback()
    for n, want in list(zip(v.counts, v.buckets, strict=True))[::7]:
        assert [ref.jumpback(h, n) for h in v.hashes[:100]] == list(want[:100])


def test_keys_go_through_the_routers_64_bit_hash() -> None:
    rng = random.Random(3)
    for n in [1, 2, 10, 97, 1000]:
        r = router(n)
        plain = JumpRouter(hash=r.hash)
        keys = [f"key-{rng.getrandbits(40)}" for _ in range(300)] + [b"bytes", ""]
        for key in keys:
            h = r._calculate_hash(key)
            assert h == plain._calculate_hash(key)
            assert r.get_target_node(key) == names(n)[ref.jumpback(h, n)]
        assert r.get_target_nodes(keys) == [r.get_target_node(k) for k in keys]
    assert JumpRouter(layout="jumpback").get_target_node("k") is None
    assert JumpRouter(layout="jumpback").get_target_node_by_hash(5) is None


def test_other_hashes_and_edges() -> None:
    r = JumpRouter(layout="jumpback", hash="murmur3_128")
    r.add_service_nodes(names(5))
    assert r.hash == "murmur3_128"
    for h in [0, 1, M64, 1 << 63]:
        assert r.get_target_node_by_hash(h) == names(5)[ref.jumpback(h, 5)]


def test_preference_list_is_the_documented_one() -> None:
    rng = random.Random(11)
    for n in [1, 2, 5, 16, 100]:
        r = router(n)
        for _ in range(60):
            key = f"k{rng.getrandbits(32)}"
            h = r._calculate_hash(key)
            for want in [0, 1, 3, n, n + 4]:
                got = r.get_preference_list(key, want)
                assert got == [names(n)[b] for b in ref.preference(ref.jumpback, h, n, want)]
                assert len(set(got)) == len(got) == min(want, n)
            assert r.get_preference_list(key, 1) == [r.get_target_node(key)]


def test_repr_layout_weight_rule_and_equality() -> None:
    r = router(3)
    assert r.layout == "jumpback"
    assert r.weight_rule == "none"
    assert repr(r) == "JumpRouter(layout='jumpback', hash='xxh64', nodes=3)"
    assert r == router(3)
    plain = JumpRouter()
    plain.add_service_nodes(names(3))
    assert r != plain  # the layout decides routing
    assert r.fingerprint() != plain.fingerprint()
    assert r.fingerprint() == router(3).fingerprint()


def test_pickles_keep_the_layout() -> None:
    r = router(40)
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        again = pickle.loads(pickle.dumps(r, proto))
        assert again == r and again.layout == "jumpback" and again.nodes == r.nodes
        assert again.get_target_nodes_by_hash(range(500)) == r.get_target_nodes_by_hash(range(500))
        again._check()
    r.__setstate__(("jump", "xxh64", names(2)))
    assert r.layout == "jump" and r.nodes == names(2)
    r.__setstate__(("jumpback", "sha256", names(4)))
    assert r.layout == "jumpback" and r.hash == "sha256" and len(r) == 4


@pytest.mark.parametrize("call, exc, match", [
    (lambda r: r.remove_service_node("b0"), ValueError, "only drop the last bucket"),
    (lambda r: r.add_service_node("x", 2), ValueError, "weight must be 1"),
    (lambda r: r.get_target_node_by_hash(-1), ValueError, "between 0 and 2\\*\\*64 - 1 for the jumpback"),
    (lambda r: r.get_target_node_by_hash(1 << 64), ValueError, "not 18446744073709551616"),
    (lambda r: r.get_target_node_by_hash("1"), TypeError, "hash must be int"),
    (lambda r: r.get_target_nodes_by_hash([1, -1]), ValueError, "not -1"),
    (lambda r: r.get_target_node(3), TypeError, "key must be str or bytes"),
    (lambda r: r.add_service_node(3), TypeError, "node id must be str"),
    (lambda r: r.remove_service_node("nope"), KeyError, "nope"),
    (lambda r: r.__setstate__(("jumpback2", "xxh64", [])), ValueError, "'jumpback'"),
])
def test_errors_leave_the_router_as_it_was(call: object, exc: type[Exception], match: str) -> None:
    r = router(3)
    before = (r.nodes, r.fingerprint(), r.layout, r.hash)
    with pytest.raises(exc, match=match):
        call(r)  # type: ignore[operator]
    assert (r.nodes, r.fingerprint(), r.layout, r.hash) == before
    r._check()


def test_layout_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'jump', 'guava' or 'jumpback', not 'jump-back'"):
        JumpRouter(layout="jump-back")
