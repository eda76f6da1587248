"""The router as a long-running gateway sees it: no leaks, threads, re-imports,
introspectable signatures and stubs that match the extension."""
from __future__ import annotations

import ast
import ctypes
import gc
import inspect
import pathlib
import pickle
import random
import subprocess
import sys
import sysconfig
import textwrap
import threading
import tracemalloc
import weakref

import pytest

import chash
import chash._chash
from chash import ConsistentHashRouter

PACKAGE = pathlib.Path(chash.__file__).parent


# -- leaks -----------------------------------------------------------------------


def _malloc_in_use() -> int | None:
    """Bytes the C allocator has handed out (glibc mallinfo2), or None."""
    try:
        libc = ctypes.CDLL(None)
        mallinfo2 = libc.mallinfo2
    except (OSError, AttributeError):
        return None

    class Mallinfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                     "fsmblks", "uordblks", "fordblks", "keepcost")]

    mallinfo2.restype = Mallinfo2
    info = mallinfo2()
    return info.uordblks + info.hblkhd


NAMES = ["".join(["node-", str(i)]) for i in range(8)]
KEYS = ["".join(["key-", str(i)]) for i in range(64)]
BATCH = KEYS[:9]
SURROGATE = "\ud800"

# One error path a cycle, in turn.
ERROR_PATHS = [
    (lambda r, n: r.remove_service_node(n), KeyError),
    (lambda r, n: r.discard_service_node(1), TypeError),
    (lambda r, n: r.get_target_node(1), TypeError),
    (lambda r, n: r.get_target_node(SURROGATE), UnicodeEncodeError),
    (lambda r, n: r.add_service_node(n, 0), ValueError),
    (lambda r, n: r.add_service_node(n, "2"), TypeError),
    (lambda r, n: r.add_service_node(SURROGATE), UnicodeEncodeError),
    (lambda r, n: r.get_target_nodes(["a", "b", "c", "d", 5]), TypeError),
    (lambda r, n: r.key_distribution(["a", SURROGATE]), UnicodeEncodeError),
    (lambda r, n: r.get_preference_list("k", -1), ValueError),
    (lambda r, n: r.get_preference_list(None, 2), TypeError),
    (lambda r, n: ConsistentHashRouter(0), ValueError),
    (lambda r, n: r.add_service_nodes([n, "other", 3]), TypeError),
]


def cycle(router: ConsistentHashRouter, i: int) -> None:
    node = NAMES[i & 7]
    if i & 1:
        router.add_service_nodes([node, "base"], 1.5)  # base present: reweighed
    else:
        router.add_service_node(node, 1.5)
    if router.get_target_node(KEYS[i & 63]) is None:
        raise AssertionError("a non-empty ring answered None")
    router.get_target_node(b"bytes-key")
    router.get_target_nodes(BATCH)
    router.get_preference_list(KEYS[i & 63], 3)
    router.add_service_node(node, 0.5)
    router.remove_service_node(node)
    call, exc = ERROR_PATHS[i % len(ERROR_PATHS)]
    try:
        call(router, node)
    except exc:
        pass
    else:
        raise AssertionError("the error path did not fail")
    if i % 97 == 0:
        router.ownership()
        router.key_distribution(BATCH)
        router.fingerprint()
        router.hash_ring, router.node_map, router.weights, router.points, repr(router)
        pickle.loads(pickle.dumps(router))


def test_add_remove_lookup_cycles_do_not_leak() -> None:
    router = ConsistentHashRouter(4)
    router.add_service_node("base")
    refcounts = [sys.getrefcount(s) for s in NAMES + KEYS]
    for i in range(5000):  # warm-up: caches, free lists, tracemalloc's own tables
        cycle(router, i)
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(2000):
            cycle(router, i)
        gc.collect()
        traced_before = tracemalloc.get_traced_memory()[0]
        objects_before = len(gc.get_objects())
        malloc_before = _malloc_in_use()
        for i in range(100_000):
            cycle(router, i)
        gc.collect()
        traced_growth = tracemalloc.get_traced_memory()[0] - traced_before
        objects_growth = len(gc.get_objects()) - objects_before
        malloc_after = _malloc_in_use()
    finally:
        tracemalloc.stop()
    # A leak of one small object a cycle would be 100,000 objects, megabytes.
    assert traced_growth < 100_000, traced_growth
    assert abs(objects_growth) < 100, objects_growth
    if malloc_before is not None:
        # The engine's own allocations (malloc, not traced by tracemalloc).
        assert malloc_after - malloc_before < 256_000, malloc_after - malloc_before
    router._check()
    assert router.nodes == ["base"]
    assert [sys.getrefcount(s) for s in NAMES + KEYS] == refcounts


def test_the_ring_holds_one_reference_per_node_and_lookups_return_it() -> None:
    """With the GIL the ring keeps the caller's str and returns it; on a
    free-threaded build it keeps the interned (immortal) str of that value,
    a copy, and leaves the caller's object alone (docs/reliability.md)."""
    free = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    held = 0 if free else 1
    node = "".join(["stored-", "node"])
    other = "".join(["other-", "node"])
    start = sys.getrefcount(node)
    router = ConsistentHashRouter(50)
    router.add_service_node(node)
    router.add_service_node(other)
    assert sys.getrefcount(node) == start + held
    stored = router.nodes[0]
    assert stored == node
    assert (stored is node) is not free
    hits = [key for key in KEYS if router.get_target_node(key) is stored]
    assert hits, "some key routes to the node"
    for key in KEYS * 10:
        router.get_target_node(key)
    router.get_target_nodes(KEYS * 10)
    router.get_preference_list("x", 2)
    assert all(result is stored for result in router.get_target_nodes(hits))
    del stored
    router.add_service_node(node, 2)  # reweigh
    router.add_service_node(node, 2)  # no-op
    with pytest.raises(ValueError):
        router.add_service_node(node, -1)
    assert sys.getrefcount(node) == start + held
    router.remove_service_node(node)
    assert sys.getrefcount(node) == start
    router.add_service_node(node)
    del router
    gc.collect()
    assert sys.getrefcount(node) == start


def test_str_subclass_node_ids_are_stored_as_str() -> None:
    class Name(str):
        pass

    router = ConsistentHashRouter(5)
    router.add_service_node(Name("sub"))
    assert type(router.nodes[0]) is str
    assert type(router.get_target_node("k")) is str
    assert "sub" in router and Name("sub") in router
    router.remove_service_node(Name("sub"))
    assert len(router) == 0


def test_the_hash_callable_is_released_with_the_router_even_in_a_cycle() -> None:
    class Hasher:
        router: ConsistentHashRouter | None = None

        def __call__(self, data: bytes) -> int:
            return len(data)

    hasher = Hasher()
    start = sys.getrefcount(hasher)
    router = ConsistentHashRouter(3, hash=hasher)
    assert sys.getrefcount(hasher) == start + 1
    del router
    assert sys.getrefcount(hasher) == start
    # A cycle router -> hasher -> router is found by the garbage collector.
    hasher.router = ConsistentHashRouter(3, hash=hasher)
    hasher.router.add_service_node("a")
    alive = weakref.ref(hasher)
    del hasher
    gc.collect()
    assert alive() is None


# -- threads ---------------------------------------------------------------------


def _stress(hash_fn, writers: int, iterations: int) -> tuple[ConsistentHashRouter, list[str]]:
    router = ConsistentHashRouter(10, hash=hash_fn)
    base = ["base-0", "base-1", "base-2"]
    pool = [f"pool-{i}" for i in range(8)]
    for node in base + pool[:4]:
        router.add_service_node(node)
    ever = set(base) | set(pool)
    failures: list[BaseException] = []
    sizes_seen: set[int] = set()
    start = threading.Barrier(4 + writers)
    writers_finished: list[int] = []
    writers_done = threading.Event()

    def reader(seed: int) -> None:
        rng = random.Random(seed)
        try:
            start.wait()
            # Read for as long as any writer runs (at least `iterations`
            # rounds, at most a bounded number), so a reader that the
            # scheduler starved at first still overlaps the changes.
            for done in range(iterations * 50):
                if done >= iterations and writers_done.is_set():
                    break
                key = f"key-{rng.randrange(10**6)}"
                sizes_seen.add(len(router))
                assert router.get_target_node(key) in ever
                batch = [f"b-{rng.randrange(10**6)}" for _ in range(rng.randrange(1, 12))]
                answers = router.get_target_nodes(batch)
                assert len(answers) == len(batch) and set(answers) <= ever
                prefs = router.get_preference_list(key, rng.randrange(0, 6))
                assert len(set(prefs)) == len(prefs) and set(prefs) <= ever
                if rng.random() < 0.05:
                    counts = router.key_distribution(batch)
                    assert sum(counts.values()) == len(batch) and set(counts) <= ever
                    assert set(router.ownership()) <= ever
                    assert set(router.nodes) <= ever
        except BaseException as exc:
            failures.append(exc)

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        try:
            start.wait()
            # Change the ring at least `iterations` times and on until a
            # reader has seen it change (at most a bounded number), so the
            # overlap does not rest on the scheduler running the readers
            # while this thread runs.
            for done in range(iterations * 50):
                if done >= iterations and len(sizes_seen) > 1:
                    break
                node = rng.choice(pool)
                op = rng.randrange(4)
                try:
                    if op == 0:
                        router.add_service_node(node)
                    elif op == 1:
                        router.discard_service_node(node)
                    elif op == 2:
                        router.add_service_node(node, rng.choice([0.5, 1, 2, 3]))
                    else:
                        router.remove_service_node(node)
                except KeyError:
                    pass
                except RuntimeError as exc:
                    # Two writers and a Python hash: the other writer changed
                    # the node while this one computed its points.
                    assert writers > 1 and "changed while its points were computed" in str(exc)
        except BaseException as exc:
            failures.append(exc)
        finally:
            writers_finished.append(seed)
            if len(writers_finished) == writers:
                writers_done.set()

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(4)]
    threads += [threading.Thread(target=writer, args=(100 + i,)) for i in range(writers)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        sys.setswitchinterval(interval)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == []
    assert len(sizes_seen) > 1, "the readers never saw the ring change"
    router._check()
    return router, base


def _assert_consistent(router: ConsistentHashRouter, base: list[str]) -> None:
    assert set(base) <= set(router.nodes)
    assert list(router.weights) == router.nodes
    for node, weight in router.weights.items():
        assert router.points[node] == max(1, round(router.virtual_node_count * weight))
    assert sum(router.points.values()) == len(router.hash_ring)


def test_threads_route_while_a_writer_changes_the_ring() -> None:
    router, base = _stress("md5", writers=1, iterations=5000)
    _assert_consistent(router, base)


def test_threads_route_while_a_writer_changes_a_ring_with_a_python_hash() -> None:
    # A Python hash lets other threads run in the middle of every call.
    router, base = _stress(lambda data: hash(data) & 0xFFFFFFFF, writers=1, iterations=2000)
    _assert_consistent(router, base)


def test_two_writers_with_a_python_hash_never_corrupt_the_ring() -> None:
    router, base = _stress(lambda data: hash(data) & 0xFFFFFFFF, writers=2, iterations=2000)
    _assert_consistent(router, base)


MUTATING_HASH = textwrap.dedent("""
    from chash import ConsistentHashRouter
    keys = []

    def clearing_hash(data):
        keys.clear()  # frees the list's item array and, with it, the keys
        return len(data)

    router = ConsistentHashRouter(2, hash=clearing_hash)
    router.add_service_node("n")
    for method, expected in [("get_target_nodes", ["n"] * 50), ("key_distribution", {"n": 50})]:
        keys[:] = ["".join(["key-", str(i)]) for i in range(50)]
        try:
            result = getattr(router, method)(keys)
        except RuntimeError as exc:
            print(method, "refused:", exc)
        else:
            assert result == expected, result
            print(method, "routed")
""")


def test_a_hash_that_empties_the_key_list_cannot_crash_a_batch() -> None:
    # A Python hash runs between keys: it (or another thread) may change the
    # list being routed.  -X dev fills freed memory, so a stale read crashes.
    result = subprocess.run([sys.executable, "-X", "dev", "-c", MUTATING_HASH],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["get_target_nodes", "key_distribution"]


# -- re-import -------------------------------------------------------------------


REIMPORT = textwrap.dedent("""
    import importlib, sys
    import chash
    first_type = chash.ConsistentHashRouter
    router = chash.ConsistentHashRouter(20)
    router.add_service_node("a")
    router.add_service_node("b")
    before = router.get_target_nodes(["k1", "k2", "k3"])
    for name in [m for m in sys.modules if m == "chash" or m.startswith("chash.")]:
        del sys.modules[name]
    import chash as again
    # Multi-phase init: a fresh module object with its own type.
    assert again.ConsistentHashRouter is not first_type
    fresh = again.ConsistentHashRouter(20)
    fresh.add_service_node("a")
    fresh.add_service_node("b")
    assert fresh.get_target_nodes(["k1", "k2", "k3"]) == before
    # Objects of the first module keep working.
    assert router.get_target_nodes(["k1", "k2", "k3"]) == before
    router.remove_service_node("a")
    router._check()
    importlib.reload(again)
    importlib.reload(sys.modules["chash._chash"])
    third = sys.modules["chash"].ConsistentHashRouter(20)
    third.add_service_node("a")
    third.add_service_node("b")
    assert third.get_target_nodes(["k1", "k2", "k3"]) == before
    import pickle
    assert pickle.loads(pickle.dumps(third)) == third
    del router, fresh, third
    import gc
    gc.collect()
    print("ok")
""")


def test_reimport_and_reload_in_a_fresh_interpreter() -> None:
    result = subprocess.run([sys.executable, "-X", "dev", "-c", REIMPORT],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


# -- signatures and stubs ------------------------------------------------------------

SIGNATURES = {
    "add_service_node": "(self, /, real_node_id, weight=1.0, *, id=None, zone=None)",
    "remove_service_node": "(self, real_node_id, /)",
    "discard_service_node": "(self, real_node_id, /)",
    "get_target_node": "(self, request_key, /)",
    "get_target_nodes": "(self, keys, /)",
    "get_target_node_by_hash": "(self, hash, /)",
    "get_target_nodes_by_hash": "(self, hashes, /)",
    "get_preference_list": "(self, key, n, /, *, distinct_zones=False)",
    "ownership": "(self, /)",
    "key_distribution": "(self, keys, /)",
    "fingerprint": "(self, /)",
    "diff": "(self, other, /)",
    "_calculate_hash": "(self, key, /)",
    "_check": "(self, /)",
}


def test_every_public_method_has_a_signature() -> None:
    public = {name for name in dir(ConsistentHashRouter)
              if not name.startswith("__") and callable(getattr(ConsistentHashRouter, name))}
    assert set(SIGNATURES) <= public
    for name in public:
        method = getattr(ConsistentHashRouter, name)
        signature = inspect.signature(method)  # from the docstring's signature line
        assert next(iter(signature.parameters)) == "self", name
        if name in SIGNATURES:
            assert str(signature) == SIGNATURES[name], name
        doc = inspect.getdoc(method)
        assert doc and len(doc) > 20 and not doc.startswith(name), name
    assert str(inspect.signature(ConsistentHashRouter)) == (
        "(virtual_node_count=None, *, hash=None, layout='python', "
        "minimum_ring_size=None, maximum_ring_size=None)")


def test_signatures_agree_with_how_the_methods_parse_arguments() -> None:
    router = ConsistentHashRouter(5)
    router.add_service_node(real_node_id="a", weight=2)
    assert router.weights == {"a": 2.0}
    for name in SIGNATURES:
        signature = inspect.signature(getattr(router, name))
        for param in signature.parameters.values():
            if param.kind is inspect.Parameter.POSITIONAL_ONLY:
                with pytest.raises(TypeError):
                    getattr(router, name)(**{param.name: "a"})
    assert ConsistentHashRouter(virtual_node_count=7, hash="sha1", layout="node").virtual_node_count == 7


def _stub_names(tree: ast.Module) -> tuple[set[str], list[str] | None, dict[str, ast.ClassDef]]:
    names: set[str] = set()
    exported: list[str] | None = None
    classes = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
            if isinstance(node, ast.ClassDef):
                classes[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
                    if target.id == "__all__":
                        exported = list(ast.literal_eval(node.value))
        elif isinstance(node, ast.ImportFrom):
            # "from x import A as A" is the stub idiom for a re-export.
            names.update(a.name for a in node.names if a.asname == a.name)
    return names, exported, classes


# Type aliases and type variables that exist only in stubs.
STUB_ALIASES = {"HashName", "LayoutName", "Key", "WideHashName", "WideLayoutName", "JumpLayoutName",
                "_Head", "RendezvousLayoutName", "RendezvousHashName", "BoundedRouter",
                "WeightRule", "_AnyRouter"}


# chash/__init__.py is typed source itself; the extension needs a stub.
@pytest.mark.parametrize("stub,module", [("_chash.pyi", chash._chash)],
                         ids=["chash._chash"])
def test_stub_names_match_the_runtime(stub: str, module) -> None:
    path = PACKAGE / stub
    assert path.exists(), f"{stub} is missing"
    names, exported, classes = _stub_names(ast.parse(path.read_text(encoding="utf-8")))
    runtime_public = set(getattr(module, "__all__", None) or
                         [n for n in dir(module) if not n.startswith("_")])
    if exported is not None:
        assert sorted(exported) == sorted(module.__all__)
    assert runtime_public - {"__version__"} <= names
    for name in names - STUB_ALIASES:
        assert hasattr(module, name), f"{stub} declares {name}, which {module.__name__} lacks"
    # Private names too: a stub that omits one leaves its callers untyped.
    runtime_all = {n for n in dir(module) if not n.startswith("__")}
    assert runtime_all <= names, f"{stub} omits {sorted(runtime_all - names)}"
    if not hasattr(module, "ConsistentHashRouter"):
        return

    stub_class = classes.get("ConsistentHashRouter")
    if stub_class is None:
        assert "ConsistentHashRouter" in names  # re-exported rather than declared here
        return
    members = {}
    for node in stub_class.body:
        if isinstance(node, ast.FunctionDef):
            members[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            members[node.target.id] = node
    runtime_members = {n for n in dir(ConsistentHashRouter) if not n.startswith("__")}
    assert set(members) - {m for m in members if m.startswith("__")} == runtime_members
    for name, node in members.items():
        assert hasattr(ConsistentHashRouter, name), name
        if isinstance(node, ast.FunctionDef) and name in SIGNATURES:
            stub_params = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
            runtime_params = list(inspect.signature(getattr(ConsistentHashRouter, name)).parameters)
            assert stub_params == runtime_params, name
