"""chash simulate: the strategies against oracles written from their papers,
the measured figures against theory, the JSON shape, the plot, the CLI."""
from __future__ import annotations

import hashlib
import inspect
import json
import math
import sys
from array import array
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _support.plotting import need_matplotlib
from chash import HASHES, BoundedLoadRouter, ConsistentHashRouter, _chash
from chash.cli import main
from chash.simulate import SimulationConfig, is_prime, key_names, node_names, plot, render, simulate

C = _chash
M64 = (1 << 64) - 1
KEYS = 20_000

# ----------------------------------------------------------------------
# Oracles, written from the papers in plain Python


def jump_oracle(key: int, buckets: int) -> int:
    """Lamping & Veach, "A Fast, Minimal Memory, Consistent Hash Algorithm", figure 1."""
    b, j = -1, 0
    while j < buckets:
        b = j
        key = (key * 2862933555777941757 + 1) & M64
        j = int((b + 1) * (float(1 << 31) / float((key >> 33) + 1)))
    return b


def fmix64(x: int) -> int:
    """MurmurHash3's 64-bit finaliser."""
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & M64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & M64
    x ^= x >> 33
    return x


def rendezvous_oracle(key: int, nodes: list[int]) -> int:
    """Highest score fmix64(key ^ node); ties to the smaller node hash, then index."""
    return max(range(len(nodes)), key=lambda i: (fmix64(key ^ nodes[i]), -nodes[i], -i))


def maglev_oracle(nodes: list[int], size: int) -> list[int]:
    """Eisenbud et al., Maglev, Pseudocode 1, with permutation[i][j] computed on demand."""
    offset = [fmix64(h ^ 0x6A09E667F3BCC908) % size for h in nodes]
    skip = [fmix64(h ^ 0xBB67AE8584CAA73B) % (size - 1) + 1 for h in nodes]
    following = [0] * len(nodes)
    entry = [-1] * size
    filled = 0
    while True:
        for i in range(len(nodes)):
            c = (offset[i] + following[i] * skip[i]) % size
            while entry[c] >= 0:
                following[i] += 1
                c = (offset[i] + following[i] * skip[i]) % size
            entry[c] = i
            following[i] += 1
            filled += 1
            if filled == size:
                return entry


def key_hash_oracle(name: str, key: str) -> int:
    data = key.encode()
    if name in ("md5", "sha1"):
        return int.from_bytes(hashlib.new(name, data).digest()[-8:], "big")
    value: int = _chash._hash(name, data)
    return value & M64


def u64(values: list[int]) -> array[int]:
    return array("Q", values)


# ----------------------------------------------------------------------
# The C strategies


# Published by Guava's consistentHash tests and ClickHouse's jumpConsistentHash tests.
JUMP_KNOWN_ANSWERS = [
    (10863919174838991, 11, 6),
    (2016238256797177309, 11, 3),
    (1673758223894951030, 11, 5),
    (1, 1, 0),
    (42, 57, 43),
    (256, 1024, 520),
    (3735883980, 1, 0),
    (3735883980, 666, 361),
    (16045690984833335023, 255, 237),
]


@pytest.mark.parametrize(("key", "buckets", "expected"), JUMP_KNOWN_ANSWERS)
def test_jump_known_answers(key: int, buckets: int, expected: int) -> None:
    assert jump_oracle(key, buckets) == expected
    assert list(C._jump_assign(u64([key]), buckets)) == [expected]


@settings(deadline=None)
@given(keys=st.lists(st.integers(0, M64), min_size=1, max_size=50), buckets=st.integers(1, 5000))
def test_jump_matches_the_paper_and_only_moves_to_the_new_bucket(keys: list[int], buckets: int) -> None:
    now = list(C._jump_assign(u64(keys), buckets))
    grown = list(C._jump_assign(u64(keys), buckets + 1))
    assert now == [jump_oracle(k, buckets) for k in keys]
    assert all(b in (a, buckets) for a, b in zip(now, grown, strict=True))


@settings(deadline=None)
@given(keys=st.lists(st.integers(0, M64), min_size=1, max_size=40),
       nodes=st.lists(st.integers(0, M64), min_size=1, max_size=12))
def test_rendezvous_matches_the_oracle(keys: list[int], nodes: list[int]) -> None:
    got = list(C._rendezvous_assign(u64(keys), u64(nodes)))
    assert got == [rendezvous_oracle(k, nodes) for k in keys]


@settings(deadline=None, max_examples=30)
@given(nodes=st.lists(st.integers(0, M64), min_size=1, max_size=9),
       size=st.sampled_from([11, 13, 101, 251, 1009]))
def test_maglev_matches_the_paper(nodes: list[int], size: int) -> None:
    if size < len(nodes):
        size = 1009
    table = list(C._maglev_table(u64(nodes), size))
    assert table == maglev_oracle(nodes, size)
    counts = [table.count(i) for i in range(len(nodes))]
    assert max(counts) - min(counts) <= 1


def test_maglev_default_table_matches_the_paper() -> None:
    nodes = list(C._key_hashes(node_names(5), "md5"))
    assert list(C._maglev_table(u64(nodes))) == maglev_oracle(nodes, 65537)


def test_modulo_and_table_lookup() -> None:
    keys = u64([0, 1, 2, 3, 10, M64])
    assert list(C._modulo_assign(keys, 3)) == [k % 3 for k in keys]
    table = array("I", [2, 0, 1])
    assert list(C._table_assign(keys, table)) == [table[k % 3] for k in keys]


@pytest.mark.parametrize("name", HASHES)
def test_key_hashes_are_the_last_eight_digest_bytes(name: str) -> None:
    # Nine keys: two groups of four (MD5 runs four at once) and one left over,
    # with lengths around MD5's one-block limit of 55 bytes.
    keys = ["", "a", "user_7", "ключ", "x" * 100, "y" * 56, "z" * 55, "w" * 64, "v"]
    assert list(C._key_hashes(keys, name)) == [key_hash_oracle(name, k) for k in keys]
    assert list(C._key_hashes([k.encode() for k in keys], name)) == list(C._key_hashes(keys, name))


def test_key_hash_low_bits_are_the_ring_position() -> None:
    router = ConsistentHashRouter(10)
    keys = key_names(200)
    assert [h & 0xFFFFFFFF for h in C._key_hashes(keys)] == [router._calculate_hash(k) for k in keys]


def test_buffers_in_every_accepted_form() -> None:
    hashes = C._key_hashes(key_names(100))
    expected = list(C._jump_assign(hashes, 7))
    raw = hashes.tobytes()
    misaligned = memoryview(b"\0" + raw)[1:]
    assert list(C._jump_assign(raw, 7)) == expected
    assert list(C._jump_assign(misaligned, 7)) == expected
    assert list(C._jump_assign(memoryview(raw).cast("Q"), 7)) == expected
    assert list(C._jump_assign(b"", 7)) == []
    out = C._jump_assign(hashes, 7)
    assert isinstance(out, array) and out.typecode == "I"
    assert C._key_hashes([]).typecode == "Q"


@pytest.mark.parametrize("factor", [1.0, 1.25, 2.0])
def test_bounded_assign_is_bounded_load_router_placing_keys_in_order(factor: float) -> None:
    nodes = node_names(6)
    router = ConsistentHashRouter(10)
    for node in nodes:
        router.add_service_node(node)
    keys = key_names(3000)
    placed = list(C._bounded_assign(router, C._key_hashes(keys), factor))
    bounded = BoundedLoadRouter(router, balance_factor=factor)
    assert [nodes[i] for i in placed] == [bounded.acquire(k) for k in keys]
    assert max(C._counts(array("I", placed), len(nodes))) <= math.ceil(factor * len(keys) / len(nodes))


def test_bounded_assign_with_no_bound_is_the_ring() -> None:
    nodes = node_names(8)
    router = ConsistentHashRouter(50)
    for node in nodes:
        router.add_service_node(node)
    keys = key_names(5000)
    placed = C._bounded_assign(router, C._key_hashes(keys), 1e300)
    assert list(placed) == list(C._node_indices(router.get_target_nodes(keys), nodes))


def test_assignment_helpers() -> None:
    a = array("I", [0, 1, 2, 1])
    b = array("I", [0, 2, 2, 0])
    assert C._moved(a, b) == 2
    assert C._counts(a, 4) == [1, 2, 1, 0]
    assert list(C._relabel(a, array("I", [7, 8, 9]))) == [7, 8, 9, 8]
    assert list(C._node_indices(["b", "a", "b"], ["a", "b"])) == [1, 0, 1]
    assert list(C._node_indices(["a"], ["a", "b", "a"])) == [0]


H = array("Q", [1, 2, 3])
TABLE = array("I", [0, 1])
ROUTER = ConsistentHashRouter(10)
ROUTER.add_service_nodes(["a", "b"])

ERRORS = [
    (TypeError, "_jump_assign", ([1, 2], 3)),
    (TypeError, "_jump_assign", (array("d", [1.0]), 3)),
    (TypeError, "_jump_assign", (array("q", [1]), 3)),
    (TypeError, "_jump_assign", (array("I", [1]), 3)),
    (ValueError, "_jump_assign", (b"1234567", 3)),
    (ValueError, "_jump_assign", (H, 0)),
    (ValueError, "_jump_assign", (H, 1 << 31)),
    (TypeError, "_jump_assign", (H,)),
    (ValueError, "_modulo_assign", (H, 0)),
    (ValueError, "_modulo_assign", (H, -1)),
    (ValueError, "_rendezvous_assign", (H, b"")),
    (TypeError, "_rendezvous_assign", (H, "nodes")),
    (ValueError, "_maglev_table", (H, 65536)),
    (ValueError, "_maglev_table", (H, 2)),
    (ValueError, "_maglev_table", (H, 2147483647)),
    (ValueError, "_maglev_table", (b"",)),
    (ValueError, "_table_assign", (H, b"")),
    (TypeError, "_table_assign", (H, H)),
    (ValueError, "_bounded_assign", (ConsistentHashRouter(10), H, 1.25)),
    (TypeError, "_bounded_assign", (H, H, 1.25)),
    (TypeError, "_bounded_assign", (ROUTER, array("I", [1]), 1.25)),
    (ValueError, "_bounded_assign", (ROUTER, b"1234567", 1.25)),
    (ValueError, "_bounded_assign", (ROUTER, H, 0.99)),
    (ValueError, "_bounded_assign", (ROUTER, H, math.nan)),
    (ValueError, "_bounded_assign", (ROUTER, H, math.inf)),
    (ValueError, "_moved", (TABLE, array("I", [0]))),
    (ValueError, "_counts", (TABLE, 1)),
    (ValueError, "_counts", (TABLE, 0)),
    (ValueError, "_relabel", (TABLE, array("I", [5]))),
    (ValueError, "_node_indices", (["c"], ["a", "b"])),
    (TypeError, "_node_indices", (5, ["a"])),
    (TypeError, "_key_hashes", ([1],)),
    (ValueError, "_key_hashes", (["a"], "nope")),
]


@pytest.mark.parametrize(("error", "name", "args"), ERRORS, ids=[f"{e[1]}-{i}" for i, e in enumerate(ERRORS)])
def test_bad_arguments(error: type[Exception], name: str, args: tuple[Any, ...]) -> None:
    with pytest.raises(error):
        getattr(C, name)(*args)


@pytest.mark.parametrize("name", sorted(n for n in dir(C) if n.endswith(("_assign", "_table"))
                                        or n in ("_key_hashes", "_moved", "_counts", "_relabel",
                                                 "_node_indices")))
def test_signatures_are_introspectable(name: str) -> None:
    signature = inspect.signature(getattr(C, name))
    assert all(p.kind is inspect.Parameter.POSITIONAL_ONLY for p in signature.parameters.values())


# ----------------------------------------------------------------------
# The simulation against theory


def sampling(p: float) -> float:
    """Five binomial standard deviations of a fraction p measured on KEYS keys."""
    return 5 * math.sqrt(p * (1 - p) / KEYS)


def test_modulo_moves_all_but_one_nth(result: dict[str, Any]) -> None:
    for step in result["remap"]["growth"]:
        expected = 1 - 1 / step["to"]
        assert step["moved"]["modulo"] == pytest.approx(expected, abs=sampling(expected))


@pytest.mark.parametrize("strategy", ["jump", "rendezvous"])
def test_jump_and_rendezvous_move_one_nth_on_growth(result: dict[str, Any], strategy: str) -> None:
    for step in result["remap"]["growth"]:
        assert step["moved"][strategy] == pytest.approx(step["ideal"], abs=sampling(step["ideal"]))


@pytest.mark.parametrize(("vnodes", "step_tolerance", "mean_tolerance"),
                         [(150, 0.35, 0.1), (1000, 0.2, 0.05)])
def test_ring_moves_about_one_nth(result: dict[str, Any], vnodes: int,
                                  step_tolerance: float, mean_tolerance: float) -> None:
    ratios = [step["moved"][f"ring-{vnodes}"] / step["ideal"] for step in result["remap"]["growth"]]
    assert all(abs(r - 1) < step_tolerance for r in ratios), ratios
    assert abs(sum(ratios) / len(ratios) - 1) < mean_tolerance


def test_maglev_moves_close_to_one_nth(result: dict[str, Any]) -> None:
    for step in result["remap"]["growth"]:
        assert step["moved"]["maglev"] == pytest.approx(step["ideal"], abs=sampling(step["ideal"]) + 0.01)


def test_a_failure_moves_exactly_the_failed_nodes_keys_on_ring_and_rendezvous(result: dict[str, Any]) -> None:
    ids = [s["id"] for s in result["strategies"] if s["id"].startswith("ring-")] + ["rendezvous"]
    for failure in result["remap"]["failure"]:
        for strategy in ids:
            assert failure["moved"][strategy] == failure["owned"][strategy]


def test_failures_of_modulo_and_jump(result: dict[str, Any]) -> None:
    small, large = result["remap"]["failure"]
    assert (small["from"], small["to"], small["failed"]) == (3, 2, "node-02")
    assert (large["from"], large["to"], large["failed"]) == (20, 19, "node-10")
    # hash % 3 -> % 2 keeps only h % 6 in {0, 5}: two thirds move.
    assert small["moved"]["modulo"] == pytest.approx(2 / 3, abs=sampling(2 / 3))
    # Jump hands the failed bucket to the last node: its keys move, and the
    # last node's keys move unless they land in the failed bucket.
    for failure in (small, large):
        n = failure["from"]
        expected = 1 / n + (1 / n) * (n - 2) / (n - 1)
        assert failure["moved"]["jump"] == pytest.approx(expected, abs=sampling(expected))


def test_bounded_loads_keep_their_bound(result: dict[str, Any]) -> None:
    factor = result["config"]["balance_factor"]
    nodes = result["config"]["last_nodes"]
    for row in result["balance_by_strategy"]:
        if row["id"].startswith("bounded-"):
            assert max(row["loads"]) <= math.ceil(factor * KEYS / nodes)
            assert sum(row["loads"]) == KEYS


def test_balance_improves_with_virtual_nodes(result: dict[str, Any]) -> None:
    rows = {row["virtual_nodes"]: row for row in result["balance_by_vnodes"]}
    assert list(rows) == [50, 100, 150, 200, 500, 1000]
    assert rows[1000]["arc_relative_stddev"] < rows[50]["arc_relative_stddev"] / 2
    assert rows[1000]["relative_stddev"] < rows[50]["relative_stddev"]
    for row in rows.values():
        assert row["max_over_mean"] >= 1 >= row["min_over_mean"]
        assert sum(row["loads"]) == KEYS


def test_hash_strategies_balance_like_random_throws(result: dict[str, Any]) -> None:
    floor = result["random_relative_stddev"]
    assert floor == pytest.approx(math.sqrt(KEYS / 20 * (1 - 1 / 20)) / (KEYS / 20))
    rows = {row["id"]: row for row in result["balance_by_strategy"]}
    for strategy in ("modulo", "jump", "rendezvous", "maglev"):
        assert rows[strategy]["relative_stddev"] < 3 * floor
        assert rows[strategy]["max_over_mean"] < 1 + 5 * floor


def test_ring_cost_grows_with_virtual_nodes(result: dict[str, Any]) -> None:
    rows = result["ring_cost"]
    memory = [row["memory_bytes"] for row in rows]
    assert memory == sorted(memory) and len(set(memory)) == len(memory)
    for row in rows:
        assert row["points"] == 20 * row["virtual_nodes"]
        assert 8 <= row["bytes_per_point"] < 16
        assert row["python_bytes"] > 5 * row["memory_bytes"]
        assert row["build_ms"] > 0 and row["batch_build_ms"] > 0 and row["lookup_ns_per_key"] > 0


def test_round_robin_has_no_affinity(result: dict[str, Any]) -> None:
    rows = {row["id"]: row for row in result["comparison"]}
    rr = rows["round-robin"]
    assert rr["same_node_on_repeat"] == pytest.approx(1 / 20, abs=sampling(1 / 20))
    assert rr["growth_moved"] == pytest.approx(1 - 1 / 20, abs=sampling(1 / 20))
    assert rows["jump"]["same_node_on_repeat"] == 1.0


def as_json(value: Any) -> Any:
    """``value`` as JSON reads it back: tuples become lists; anything JSON
    has no form for (a set, an object, a key that is not a string, NaN or
    an infinity) raises, as ``--json`` would."""
    return json.loads(json.dumps(value, allow_nan=False))


def json_values(value: Any) -> Any:
    """``value`` with its tuples as lists: what it should read back as."""
    if isinstance(value, dict):
        return {key: json_values(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_values(item) for item in value]
    return value


@pytest.mark.parametrize("bad", [{"x": math.nan}, {"x": math.inf}, {1: "int key"}, {"x": {1, 2}},
                                 {"x": object()}, {"x": [1.5, (2, -math.inf)]}])
def test_the_json_check_catches_what_json_cannot_carry(bad: dict[Any, Any]) -> None:
    with pytest.raises((ValueError, TypeError, AssertionError)):
        assert as_json(bad) == json_values(bad)


def test_json_shape(result: dict[str, Any]) -> None:
    # What ``--json`` prints reads back as the same values: JSON's own types
    # only (tuples as arrays), string keys, finite numbers.
    assert as_json(result) == json_values(result)
    assert set(result) >= {"config", "keys", "nodes", "strategies", "remap", "balance_by_vnodes",
                           "balance_by_strategy", "ring_cost", "comparison", "seconds"}
    ids = [s["id"] for s in result["strategies"]]
    assert ids == ["modulo", "ring-10", "ring-150", "ring-1000", "jump", "jumpback", "anchor",
                   "rendezvous", "maglev", "bounded-10", "bounded-150"]
    growth = result["remap"]["growth"]
    assert [(s["from"], s["to"]) for s in growth] == [(n, n + 1) for n in range(3, 20)]
    for step in growth:
        assert set(step["moved"]) == set(ids)
        assert step["ideal"] == pytest.approx(1 / step["to"])
    assert [row["id"] for row in result["comparison"]] == [*ids, "round-robin"]
    assert result["nodes"] == node_names(20)


def test_jumpback_and_anchor_columns(result: dict[str, Any]) -> None:
    # Both grow as jump does (only the new node's share moves); a failure
    # in the middle moves exactly the failed node's keys for anchor, while
    # jumpback (as jump) also moves the last node's onto its bucket.
    keys = result["keys"]
    for step in result["remap"]["growth"]:
        for sid in ("jumpback", "anchor"):
            assert step["moved"][sid] == pytest.approx(step["ideal"], abs=0.02)
    for failure in result["remap"]["failure"]:
        assert failure["moved"]["anchor"] == failure["owned"]["anchor"] > 0
        assert failure["moved"]["jumpback"] > failure["owned"]["jumpback"] * 1.5
    rows = {row["id"]: row for row in result["comparison"]}
    assert rows["jumpback"]["state_bytes"] == 0
    assert rows["anchor"]["state_bytes"] == 4  # 20 nodes, none removed: its state() alone
    assert keys > 0


def test_render_has_every_table(result: dict[str, Any]) -> None:
    text = render(result)
    for title in ("Keys remapped", "Load balance by virtual nodes", "Load balance by strategy",
                  "Ring memory and build time", "Strategies side by side", "19 -> 20",
                  "20 -> 19, node-10 fails", "round robin"):
        assert title in text


def test_the_same_config_measures_the_same_numbers() -> None:
    config = SimulationConfig(keys=2000, first_nodes=2, last_nodes=5, ring_vnodes=(20,),
                              balance_vnodes=(20,), bounded_vnodes=(20,), maglev_size=101,
                              hash="xxh3")
    a, b = simulate(config), simulate(config)
    assert a["remap"] == b["remap"]
    assert a["balance_by_strategy"] == b["balance_by_strategy"]


@pytest.mark.parametrize("kwargs", [
    {"keys": 0}, {"first_nodes": 1}, {"first_nodes": 5, "last_nodes": 5}, {"balance_vnodes": ()},
    {"ring_vnodes": (10, 10)}, {"balance_factor": 0.5}, {"balance_factor": math.nan},
    {"maglev_size": 65536}, {"maglev_size": 19}, {"hash": "nope"},
])
def test_config_rejects(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        SimulationConfig(**kwargs)


def test_is_prime() -> None:
    assert [n for n in range(30) if is_prime(n)] == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]
    assert is_prime(65537) and not is_prime(65536)


# ----------------------------------------------------------------------
# Pictures and the command line


def test_plot_writes_a_png(result: dict[str, Any], tmp_path: Any) -> None:
    need_matplotlib()
    path = tmp_path / "simulate.png"
    plot(result, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_names_the_extra(result: dict[str, Any], tmp_path: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"pip install 'chash-router\[plot\]'"):
        plot(result, str(tmp_path / "x.png"))


def test_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--keys", "3000", "--nodes", "3:6", "--vnodes", "50,100", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["keys"] == 3000
    assert [row["virtual_nodes"] for row in data["balance_by_vnodes"]] == [50, 100]
    assert [(s["from"], s["to"]) for s in data["remap"]["growth"]] == [(3, 4), (4, 5), (5, 6)]


def test_cli_tables_and_plot(capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    need_matplotlib()
    path = tmp_path / "out.png"
    assert main(["simulate", "--keys", "3000", "--nodes", "3:5", "--plot", str(path)]) == 0
    captured = capsys.readouterr()
    assert "Keys remapped" in captured.out
    assert str(path) in captured.err
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_cli_plot_without_matplotlib_fails_before_measuring(
        capsys: pytest.CaptureFixture[str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["simulate", "--keys", "100", "--plot", str(tmp_path / "x.png")]) == 1
    captured = capsys.readouterr()
    assert "pip install 'chash-router[plot]'" in captured.err
    assert captured.out == ""


def exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.mark.parametrize("argv", [
    ["--keys", "0"], ["--keys", "many"], ["--nodes", "5:3"], ["--nodes", "1:4"], ["--nodes", "4"],
    ["--nodes", "a:b"], ["--vnodes", "0"], ["--vnodes", "10,x"], ["--vnodes", "10,10"],
    ["--ring-vnodes", ""], ["--balance-factor", "0.5"], ["--balance-factor", "nan"],
    ["--balance-factor", "inf"], ["--maglev-size", "65536"], ["--maglev-size", "7"],
    ["--maglev-size", "2147483647"], ["--hash", "nope"], ["--plot", "/nonexistent/dir/x.png"],
    ["--no-such-option"],
])
def test_cli_errors_exit_2_with_a_message(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code(["simulate", "--keys", "100", *argv]) == 2
    captured = capsys.readouterr()
    assert "error:" in captured.err
    assert captured.out == ""
