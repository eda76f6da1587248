"""chash.AnchorRouter: hash4j's JumpBackAnchor through the Python API,
against every step and checkpoint recorded from hash4j
(tests/vectors/hash4j/anchor.bin: the ids addBucket() gave, getBucket at
the probes after every step, getState() at checkpoints; hash4j's own
stability test replayed with its random stream); state() and from_state(),
pickles, ==, the documented preference list, errors that leave the router
as it was, and a state machine against a plain model of the ids (minimal
movement: removing a node moves only its keys, re-adding it restores)."""
from __future__ import annotations

import copy as copylib
import pickle
import struct

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from _support import hash4j_vectors as hv
from _support.hashes import M64
from chash import AnchorRouter, JumpRouter

KEYS = [f"key-{i}" for i in range(3000)]


def nodes_by_bucket(r: AnchorRouter) -> list[str | None]:
    """What from_state takes: the node of every id below the state's high."""
    high = struct.unpack_from("<I", r.state())[0]
    out: list[str | None] = [None] * high
    for node in r.nodes:
        out[r.bucket_of(node)] = node
    return out


def rebuilt(r: AnchorRouter) -> AnchorRouter:
    return AnchorRouter.from_state(r.state(), nodes_by_bucket(r), hash=r.hash)


class Replay:
    """A history applied to an AnchorRouter: node f"n{step}" for each add."""

    def __init__(self) -> None:
        self.router = AnchorRouter()
        self.node_of: dict[int, str] = {}  # live bucket id -> node

    def apply(self, step: int, op: int, arg: int) -> None:
        r = self.router
        if op == hv.ADD:
            node = f"n{step}"
            r.add_service_node(node)
            assert r.bucket_of(node) == arg, step
            self.node_of[arg] = node
        elif op == hv.REMOVED:
            node = self.node_of.pop(arg)
            r.remove_service_node(node)
        elif op == hv.REFUSED:
            # hash4j refused an id that is not live: no node holds it here.
            assert arg not in self.node_of
            with pytest.raises(KeyError):
                r.remove_service_node(f"never-{arg}")
        else:
            assert op == hv.NOTHING

    def buckets(self, hashes: tuple[int, ...] | list[int]) -> list[int] | None:
        got = self.router.get_target_nodes_by_hash(hashes)
        if not self.router:
            assert got == [None] * len(hashes)
            return None
        return [self.router.bucket_of(g) for g in got]  # type: ignore[arg-type]


def check_checkpoint(replay: Replay, probes: tuple[int, ...], cp: hv.Checkpoint) -> None:
    r = replay.router
    assert len(r) == cp.live
    assert r.state() == cp.state
    if cp.live:
        assert replay.buckets(probes) == list(cp.buckets)
    again = AnchorRouter.from_state(cp.state, nodes_by_bucket(r))
    assert again == r and again.state() == cp.state
    assert again.get_target_nodes_by_hash(probes) == r.get_target_nodes_by_hash(probes)
    again._check()
    r._check()


def test_every_recorded_hash4j_step_and_state() -> None:
    v = hv.anchor()
    steps = checkpoints = 0
    for history in v.histories:
        replay = Replay()
        rnd = hv.SplittableRandom(history.seed)
        live: list[int] = []  # the stability test's own list of ids
        for s, step in enumerate(history.steps):
            if history.kind == 1:
                # hash4j's stability test: its own choice must be the record's
                removing = rnd.next_double() < 0.5
                if removing and live:
                    idx = rnd.next_int_below(len(live))
                    assert (step.op, step.arg) == (hv.REMOVED, live[idx])
                    live[idx] = live[-1]
                    live.pop()
                elif removing:
                    assert step.op == hv.NOTHING
                else:
                    assert step.op == hv.ADD
                    live.append(step.arg)
            replay.apply(s, step.op, step.arg)
            if history.kind == 1:
                hashes = [rnd.next_long() for _ in range(100)] if replay.router else []
                assert hv.digest(replay.buckets(hashes) if hashes else None) == step.digest, s
            else:
                assert hv.digest(replay.buckets(v.probes)) == step.digest, s
            if step.checkpoint:
                check_checkpoint(replay, v.probes, step.checkpoint)
                checkpoints += 1
            steps += 1
        check_checkpoint(replay, v.probes, history.final)
        checkpoints += 1
    assert steps >= 10_000 and checkpoints >= len(v.histories)
    assert any(h.kind == 1 and h.checksum == 0xEB47923B33BD1ACE for h in v.histories)


def test_the_state_of_10000_with_1000_removed_is_4004_bytes() -> None:
    r = AnchorRouter()
    r.add_service_nodes([f"n{i}" for i in range(10_000)])
    for i in range(0, 10_000, 10):
        r.remove_service_node(f"n{i}")
    assert len(r.state()) == 4004
    assert len(r) == 9000
    r._check()


def filled(n: int = 8, removed: tuple[int, ...] = (2, 5)) -> AnchorRouter:
    r = AnchorRouter()
    r.add_service_nodes([f"n{i}" for i in range(n)])
    for i in removed:
        r.remove_service_node(f"n{i}")
    r._check()
    return r


def test_ids_as_hash4j_gives_them() -> None:
    r = filled(8, (2, 5, 7))
    # 7 was the top with 2 and 5 removed: it is stacked like any other
    assert r.state() == struct.pack("<4I", 8, 2, 5, 7)
    r.add_service_node("a")
    r.add_service_node("b")
    r.add_service_node("c")
    r.add_service_node("d")
    assert [r.bucket_of(x) for x in "abcd"] == [7, 5, 2, 8]
    assert r.state() == struct.pack("<I", 9)
    r.add_service_node("a")  # already here: stays
    assert r.bucket_of("a") == 7 and len(r) == 9
    assert r.nodes == ["n0", "n1", "c", "n3", "n4", "b", "n6", "a", "d"]  # by id
    # removing the top id with nothing removed just lowers the count
    r.remove_service_node("d")
    assert r.state() == struct.pack("<I", 8)
    # removing the last node empties the set: ids start again at 0
    for node in list(r.nodes):
        r.remove_service_node(node)
    assert r.state() == struct.pack("<I", 0) and len(r) == 0
    r.add_service_node("z")
    assert r.bucket_of("z") == 0


def test_keys_go_through_the_routers_64_bit_hash() -> None:
    r = filled(20, (3, 11))
    jump = JumpRouter(hash="xxh64")
    for key in [*KEYS[:200], b"raw", ""]:
        h = r._calculate_hash(key)
        assert h == jump._calculate_hash(key)
        assert r.get_target_node(key) == r.get_target_node_by_hash(h)
    assert r.get_target_nodes(KEYS) == r.get_target_nodes_by_hash(
        [r._calculate_hash(k) for k in KEYS])
    other = AnchorRouter(hash="murmur3_128")
    assert other.hash == "murmur3_128"
    assert other._calculate_hash("k") == JumpRouter(hash="murmur3_128")._calculate_hash("k")
    assert AnchorRouter().get_target_node("k") is None
    assert AnchorRouter().get_target_node_by_hash(M64) is None
    assert AnchorRouter().get_preference_list("k", 3) == []


def test_preference_list_is_the_documented_one() -> None:
    r = filled(12, (4, 9))
    for key in KEYS[:150]:
        prefs = r.get_preference_list(key, 5)
        assert len(set(prefs)) == 5 and prefs[0] == r.get_target_node(key)
        # where the key would go if the nodes before it were removed, in order
        scratch = rebuilt(r)
        for k, node in enumerate(prefs):
            assert scratch.get_target_node(key) == node, (key, k)
            scratch.remove_service_node(node)
        assert r.get_preference_list(key, 100) == r.get_preference_list(key, 10)
        assert r.get_preference_list(key, 0) == []


def test_removing_any_node_moves_only_its_keys_and_re_adding_restores() -> None:
    r = filled(10, ())
    before = r.get_target_nodes(KEYS)
    state = r.state()
    r.remove_service_node("n4")
    after = r.get_target_nodes(KEYS)
    moved = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert moved and all(before[i] == "n4" for i in moved)
    assert "n4" not in after
    assert len(moved) == before.count("n4")
    # evenly onto the others
    took = {node: sum(after[i] == node for i in moved) for node in r.nodes}
    assert min(took.values()) > len(moved) / 9 / 2
    r.add_service_node("n4")
    assert r.get_target_nodes(KEYS) == before and r.state() == state
    # a different node re-using the id takes exactly those keys
    r.remove_service_node("n4")
    r.add_service_node("fresh")
    assert r.bucket_of("fresh") == 4
    assert r.get_target_nodes(KEYS) == [("fresh" if b == "n4" else b) for b in before]


def test_repr_properties_and_equality() -> None:
    r = filled(5, (1,))
    assert repr(r) == "AnchorRouter(hash='xxh64', nodes=4)"
    assert r.layout == "anchor" and r.weight_rule == "none" and r.hash == "xxh64"
    assert r.weights == {n: 1.0 for n in r.nodes}
    assert r.ownership() == {n: 0.25 for n in r.nodes}
    dist = r.key_distribution(KEYS)
    assert set(dist) == set(r.nodes) and sum(dist.values()) == len(KEYS)
    assert list(r) == r.nodes and "n0" in r and "n1" not in r and 3 not in r
    assert r == filled(5, (1,)) and r.fingerprint() == filled(5, (1,)).fingerprint()
    # same nodes, another history: another mapping, another fingerprint
    other = filled(5, ())
    other.remove_service_node("n4")
    other.add_service_node("n4")
    assert other != filled(5, (4,))
    renamed = AnchorRouter.from_state(r.state(), ["n0", None, "n2", "n3", "x"])
    assert renamed != r and renamed.fingerprint() != r.fingerprint()
    assert AnchorRouter(hash="sha256") != AnchorRouter()
    assert AnchorRouter() == AnchorRouter()
    with pytest.raises(TypeError):
        hash(r)


def test_pickles_and_copies() -> None:
    r = filled(50, (3, 17, 40, 0))
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        again = pickle.loads(pickle.dumps(r, proto))
        assert again == r and again.state() == r.state() and again.nodes == r.nodes
        assert again.get_target_nodes(KEYS) == r.get_target_nodes(KEYS)
        again._check()
    for clone in (copylib.copy(r), copylib.deepcopy(r)):
        assert clone == r and clone is not r
        clone.remove_service_node("n1")
        assert "n1" in r
    h = AnchorRouter(hash="sha256")
    assert pickle.loads(pickle.dumps(h)).hash == "sha256"


def test_from_state_reads_what_state_writes() -> None:
    r = filled(30, (29, 4, 12))
    again = rebuilt(r)
    assert again == r and again.get_target_nodes(KEYS) == r.get_target_nodes(KEYS)
    assert AnchorRouter.from_state(bytearray(r.state()), tuple(nodes_by_bucket(r))) == r
    assert AnchorRouter.from_state(memoryview(r.state()), iter(nodes_by_bucket(r))) == r
    empty = AnchorRouter.from_state(b"\0\0\0\0", [])
    assert empty == AnchorRouter() and len(empty) == 0


@pytest.mark.parametrize("state, nodes, exc, match", [
    (b"", [], ValueError, "does not parse: its length must be 4 \\+ 4"),
    (b"\x01\0\0", [], ValueError, "not 3 bytes"),
    (struct.pack("<II", 2, 5), ["a", None], ValueError, "does not parse: every removed id"),
    (struct.pack("<III", 3, 1, 1), ["a", None, "c"], ValueError, "does not parse"),
    (struct.pack("<II", 1, 0), [None], ValueError, "does not parse"),
    (struct.pack("<I", 1 << 25), [], ValueError, "more than the 16777216"),
    (struct.pack("<I", 0xFFFFFFFF), [], ValueError, "does not parse"),
    (struct.pack("<II", 3, 1), ["a", None], ValueError, "one entry per bucket id of the state \\(3"),
    (struct.pack("<II", 3, 1), ["a", "b", "c"], ValueError, "nodes_by_bucket\\[1\\] must be None"),
    (struct.pack("<II", 3, 1), [None, None, "c"], ValueError, "nodes_by_bucket\\[0\\] is None"),
    (struct.pack("<II", 3, 1), ["a", None, "a"], ValueError, "names 'a' twice"),
    (struct.pack("<II", 3, 1), ["a", None, 3], TypeError, "node id must be str"),
    (struct.pack("<I", 1), 5, TypeError, "iterable"),
    ("text", [], TypeError, "bytes-like"),
])
def test_from_state_refusals(state: object, nodes: object, exc: type[Exception],
                             match: str) -> None:
    r = filled(4, (1,))
    before = (r.state(), r.nodes, r.fingerprint())
    with pytest.raises(exc, match=match):
        AnchorRouter.from_state(state, nodes)  # type: ignore[arg-type]
    assert (r.state(), r.nodes, r.fingerprint()) == before


def test_from_state_takes_a_hash() -> None:
    r = AnchorRouter(hash="sha1")
    r.add_service_nodes(["a", "b"])
    assert AnchorRouter.from_state(r.state(), ["a", "b"], hash="sha1") == r
    with pytest.raises(ValueError, match="unknown hash 'md6'"):
        AnchorRouter.from_state(r.state(), ["a", "b"], hash="md6")  # type: ignore[arg-type]


@pytest.mark.parametrize("call, exc, match", [
    (lambda r: r.add_service_node("x", 2), ValueError, "no weights"),
    (lambda r: r.add_service_node(3), TypeError, "node id must be str"),
    (lambda r: r.add_service_node("x", id=3), TypeError, "id"),
    (lambda r: r.add_service_nodes(["x", "y", 3]), TypeError, "node id must be str"),
    (lambda r: r.add_service_nodes(["x"], weight=0.5), ValueError, "no weights"),
    (lambda r: r.add_service_nodes(5), TypeError, ""),
    (lambda r: r.remove_service_node("absent"), KeyError, "absent"),
    (lambda r: r.remove_service_node("n1"), KeyError, "n1"),
    (lambda r: r.bucket_of("absent"), KeyError, "absent"),
    (lambda r: r.bucket_of(3), TypeError, "node id must be str"),
    (lambda r: r.get_target_node(3), TypeError, "key must be str or bytes"),
    (lambda r: r.get_target_nodes(["a", 3]), TypeError, "key must be str or bytes"),
    (lambda r: r.get_target_node_by_hash(-1), ValueError, "between 0 and 2\\*\\*64 - 1"),
    (lambda r: r.get_target_node_by_hash(1 << 64), ValueError, "not 18446744073709551616"),
    (lambda r: r.get_target_nodes_by_hash([1, "2"]), TypeError, "hash must be int"),
    (lambda r: r.get_preference_list("k", -1), ValueError, ""),
    (lambda r: r.get_preference_list("k", 2, distinct_zones=True), TypeError, "keyword"),
])
def test_errors_leave_the_router_as_it_was(call: object, exc: type[Exception], match: str) -> None:
    r = filled(6, (1,))
    before = (r.state(), r.nodes, r.fingerprint())
    with pytest.raises(exc, match=match or None):
        call(r)  # type: ignore[operator]
    assert (r.state(), r.nodes, r.fingerprint()) == before
    r._check()


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"hash": "md6"}, ValueError, "unknown hash 'md6'"),
    ({"hash": 3}, TypeError, "hash must be str"),
    ({"layout": "anchor"}, TypeError, "layout"),
])
def test_constructor_errors(kwargs: dict[str, object], exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        AnchorRouter(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        AnchorRouter("xxh64")  # type: ignore[misc]


def test_discard_and_batch_adds() -> None:
    r = filled(4, ())
    r.discard_service_node("absent")
    r.discard_service_node("n2")
    assert "n2" not in r and len(r) == 3
    r.add_service_nodes(["n2", "n2", "n0", "new"])  # n2 takes id 2 back; n0 stays
    assert r.bucket_of("n2") == 2 and r.bucket_of("new") == 4 and len(r) == 5
    r._check()


def test_no_leaks_in_lookups_changes_errors_and_pickles() -> None:
    import gc
    import sys

    hosts = [f"host-{i}" for i in range(6)]
    refcounts = [sys.getrefcount(h) for h in hosts]

    def cycle() -> None:
        r = AnchorRouter()
        r.add_service_nodes(hosts[:5])
        r.add_service_node(hosts[5])
        r.remove_service_node(hosts[2])
        r.get_target_nodes(KEYS[:50])
        r.get_target_nodes_by_hash(range(50))
        r.get_preference_list("k", 4)
        r.key_distribution(KEYS[:50])
        r.ownership()
        r.fingerprint()
        pickle.loads(pickle.dumps(r))
        rebuilt(r)
        for bad in (lambda: r.add_service_node("x", 2), lambda: r.get_target_nodes(["a", 1]),
                    lambda: r.add_service_nodes(["q", 1]), lambda: r.bucket_of("none"),
                    lambda: AnchorRouter.from_state(b"\x02\0\0\0\x07\0\0\0", ["a", None])):
            try:
                bad()
            except (TypeError, ValueError, KeyError):
                pass
        r.add_service_node(hosts[2])

    for _ in range(50):
        cycle()
    gc.collect()
    before = len(gc.get_objects())
    for _ in range(200):
        cycle()
    gc.collect()
    assert len(gc.get_objects()) - before < 50
    assert [sys.getrefcount(h) for h in hosts] == refcounts


NODES = [f"n{i}" for i in range(10)]


class AnchorMachine(RuleBasedStateMachine):
    """Adds and removes applied to an AnchorRouter and to a plain model of
    hash4j's ids (a stack of removed ids, high); after each, the ids and
    the state agree, a removal moved only the removed node's keys, and a
    re-add of the last removed node restored the mapping before it."""

    def __init__(self) -> None:
        super().__init__()
        self.router = AnchorRouter(hash="xxh3")
        self.ids: dict[str, int] = {}
        self.stack: list[int] = []
        self.high = 0
        self.mapping = self.router.get_target_nodes(KEYS[:400])
        self.undo: list[tuple[str, list[str | None]]] = []  # (removed node, mapping before)

    def model_add(self, node: str) -> None:
        if node in self.ids:
            return
        if self.stack:
            self.ids[node] = self.stack.pop()
        else:
            self.ids[node] = self.high
            self.high += 1

    @rule(node=st.sampled_from(NODES))
    def add(self, node: str) -> None:
        before = self.mapping
        present = node in self.ids
        restoring = not present and bool(self.undo) and self.undo[-1][0] == node
        self.router.add_service_node(node)
        self.model_add(node)
        self.mapping = self.router.get_target_nodes(KEYS[:400])
        # a new node takes keys only for itself
        assert all(b in (a, node) for a, b in zip(before, self.mapping, strict=True))
        if restoring:
            assert self.mapping == self.undo.pop()[1]
        elif not present:
            self.undo.clear()

    @rule(nodes=st.lists(st.sampled_from(NODES), max_size=4))
    def add_many(self, nodes: list[str]) -> None:
        self.router.add_service_nodes(nodes)
        for node in nodes:
            self.model_add(node)
        self.mapping = self.router.get_target_nodes(KEYS[:400])
        self.undo.clear()

    @precondition(lambda self: bool(self.ids))
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        node = data.draw(st.sampled_from(sorted(self.ids)))
        before = self.mapping
        self.router.remove_service_node(node)
        b = self.ids.pop(node)
        if not self.ids:
            self.stack, self.high = [], 0
        elif b == self.high - 1 and not self.stack:
            self.high -= 1
        else:
            self.stack.append(b)
        self.mapping = self.router.get_target_nodes(KEYS[:400])
        for was, now in zip(before, self.mapping, strict=True):
            assert now == was if was != node else now != node
        self.undo.append((node, before))

    @rule(node=st.sampled_from(["absent", *NODES[:2]]))
    def remove_absent(self, node: str) -> None:
        if node in self.ids:
            return
        with pytest.raises(KeyError):
            self.router.remove_service_node(node)

    @invariant()
    def agrees(self) -> None:
        r = self.router
        r._check()
        assert {n: r.bucket_of(n) for n in r.nodes} == self.ids
        assert r.state() == struct.pack(f"<{1 + len(self.stack)}I", self.high, *self.stack)
        assert rebuilt(r) == r


TestAnchorMachine = AnchorMachine.TestCase
TestAnchorMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None,
                                      derandomize=True)


def test_setstate_swaps_in_a_recorded_mapping_whole() -> None:
    r = filled(6, (1,))
    source = filled(9, (0, 4))
    r.__setstate__(("xxh64", source.state(), nodes_by_bucket(source)))
    assert r == source and r.get_target_nodes(KEYS) == source.get_target_nodes(KEYS)
    r._check()
    before = (r.state(), r.nodes)
    for bad, exc in [(("xxh64", b"\x01\0\0", []), ValueError),
                     (("xxh64", source.state(), ["x"]), ValueError),
                     (("md6", source.state(), nodes_by_bucket(source)), ValueError),
                     ("nope", TypeError)]:
        with pytest.raises(exc):
            r.__setstate__(bad)  # type: ignore[arg-type]
        assert (r.state(), r.nodes) == before


def test_lookups_while_another_thread_removes_and_re_adds() -> None:
    import threading

    r = filled(12, ())
    stop = threading.Event()
    errors: list[BaseException] = []

    def change() -> None:
        try:
            for i in range(300):
                node = f"n{i % 12}"
                r.remove_service_node(node)
                r.add_service_nodes([node, f"extra-{i}"])
                r.remove_service_node(f"extra-{i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            stop.set()

    t = threading.Thread(target=change)
    t.start()
    allowed = {f"n{i}" for i in range(12)} | {f"extra-{i}" for i in range(300)}
    while not stop.is_set():
        got = r.get_target_nodes(KEYS[:100])
        assert None not in got and set(got) <= allowed  # type: ignore[operator]
        assert set(r.get_preference_list("k", 3)) <= allowed
    t.join(timeout=60)
    assert not errors
    assert sorted(r.nodes) == sorted(f"n{i}" for i in range(12))
    r._check()
