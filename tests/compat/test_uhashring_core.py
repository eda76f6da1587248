"""chash._chash._UHashRing, the C continuum under HashRing: its own
contracts (bad input refused with the ring unchanged, references and
memory kept), apart from the comparisons with uhashring."""
from __future__ import annotations

import sys

import pytest

from _support.leaks import assert_cycles_do_not_leak
from chash._chash import _UHashRing
from chash.compat.uhashring import HashRing


def test_private_calls_refuse_bad_input_and_leave_the_ring_as_it_was() -> None:
    core = _UHashRing()
    core._build([("a", 10), ("b", 20)], False, 1)
    points = core._points()
    for call, error in ((lambda: core._build([("a", 1), ("a", 2)], False, 1), ValueError),
                        (lambda: core._build([("a",)], False, 1), TypeError),
                        (lambda: core._build([("a", "x")], False, 1), TypeError),
                        (lambda: core._build([("a", 1)], True, 5), ValueError),
                        (lambda: core._build(5, False, 1), TypeError),
                        (lambda: core._set_node("c", 2**40), ValueError),
                        (lambda: core._set_node("c", "3"), TypeError),
                        (lambda: core._set_node([], 3), TypeError),
                        (lambda: core._remove("absent"), KeyError),
                        (lambda: core._walk("k"), TypeError)):
        with pytest.raises(error):
            call()
        assert core._points() == points
        core._check()
    assert core._size() == 30 and core.get_node("k") in ("a", "b")


def test_a_node_set_again_replaces_its_points_and_a_removal_renumbers() -> None:
    core = _UHashRing()
    for name, count in (("a", 5), ("b", 7), ("c", 3)):
        core._set_node(name, count)
    core._set_node("a", 2)
    core._check()
    assert sorted(n for _, n in core._points()) == ["a"] * 2 + ["b"] * 7 + ["c"] * 3
    core._remove("a")
    core._check()
    assert sorted(n for _, n in core._points()) == ["b"] * 7 + ["c"] * 3
    core._remove("b")
    core._remove("c")
    core._check()
    assert core._points() == [] and core.get_node("k") is None and core._walk("k", True) == []


def test_cycles_do_not_leak() -> None:
    names = ["".join(["leak-", str(i)]) for i in range(6)]
    keys = ["".join(["key-", str(i)]) for i in range(16)]
    rings = [HashRing(vnodes=20), HashRing(vnodes=10, hash_fn="ketama")]

    def cycle(i: int) -> None:
        for ring in rings:
            ring.add_node(names[i % 6], {"weight": 1 + i % 3, "instance": i})
            ring.get_node(keys[i % 16])
            ring[keys[i % 16]]
            ring.get(keys[i % 16])
            ring.get_server(keys[i % 16])
            list(ring.range(keys[i % 16]))
            ring.get_bounded(keys[i % 16], {names[0]: 3})
            if names[(i + 3) % 6] in ring.nodes:
                ring.remove_node(names[(i + 3) % 6])
            try:
                ring.remove_node("absent")
            except KeyError:
                pass
            if i % 50 == 0:
                ring.ring, ring.get_points(), ring.regenerate()

    refcounts = [sys.getrefcount(s) for s in names + keys]
    assert_cycles_do_not_leak(cycle)
    for ring in rings:
        ring._check()
        while ring.nodes:
            ring.remove_node(next(iter(ring.nodes)))
    assert [sys.getrefcount(s) for s in names + keys] == refcounts


class ChangesTheRing:
    """A node name whose formatting (f"{name}-{i}") removes node "a"."""

    def __init__(self, core: _UHashRing) -> None:
        self.core = core

    def __format__(self, spec: str) -> str:
        self.core._remove("a")
        return "sneaky"


def test_python_code_that_changes_the_ring_mid_call_is_refused() -> None:
    core = _UHashRing()
    core._build([("a", 5), ("b", 5)], False, 1)
    with pytest.raises(RuntimeError, match="changed during the call"):
        core._set_node(ChangesTheRing(core), 3)
    core._check()
    assert sorted(n for _, n in core._points()) == ["b"] * 5
    core._set_node("a", 5)
    with pytest.raises(RuntimeError, match="changed during the call"):
        core._build([(ChangesTheRing(core), 3), ("b", 2)], False, 1)
    core._check()
    assert sorted(n for _, n in core._points()) == ["b"] * 5


@pytest.mark.parametrize("mode", ["md5", "ketama", "hash_fn"])
def test_lookups_during_changes_from_another_thread_see_the_ring_before_or_after(mode: str) -> None:
    import hashlib
    import threading

    def sha_point(key: object) -> int:
        return int.from_bytes(hashlib.sha1(str(key).encode()).digest()[:8], "big")

    kwargs: dict[str, object] = {"ketama": {"hash_fn": "ketama"}, "hash_fn": {"hash_fn": sha_point},
                                 "md5": {}}[mode]
    base = [f"node-{i}" for i in range(5)]
    keys = [f"key-{i}" for i in range(300)]
    without = HashRing(base, **kwargs)
    with_f = HashRing([*base, "node-f"], **kwargs)
    allowed = {key: {without.get_node(key), with_f.get_node(key)} for key in keys}
    ring = HashRing(base, **kwargs)
    stop = threading.Event()
    wrong: list[tuple[str, object]] = []
    lookups = [0]

    def read() -> None:
        while not stop.is_set():
            for key in keys:
                got = ring.get_node(key)
                if got not in allowed[key]:
                    wrong.append((key, got))
            lookups[0] += 1

    readers = [threading.Thread(target=read) for _ in range(2)]
    for thread in readers:
        thread.start()
    try:
        for _ in range(150):
            ring.add_node("node-f")
            ring.remove_node("node-f")
    finally:
        stop.set()
        for thread in readers:
            thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in readers)
    assert wrong == []
    assert lookups[0] > 0
    assert [ring.get_node(key) for key in keys] == [without.get_node(key) for key in keys]
