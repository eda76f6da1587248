"""chash simulate --trace: the LLM serving model, its policies and the command.

A trace worked by hand pins the model's rules (hits, FIFO prefill, TTFT, the
loads and queued work a policy sees, strict in-flight ends, eviction); a
plain oracle of the model, written separately, is compared with the replay on
random traces, replicas included; the baselines are checked against their
rules on views made for them.
"""
from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest

from chash.cli import main
from chash.simulate.policies import (
    POLICIES,
    CacheAware,
    Chwbl,
    LeastLoaded,
    bounded_choice,
    compare,
    ring_key,
)
from chash.simulate.serving import BlockLRU, ServingConfig, View, percentile, replay
from chash.simulate.trace import TraceRequest, parse_trace, read_trace


def request(ms: float, tokens: int, out: int, ids: Sequence[int]) -> dict[str, Any]:
    return {"timestamp": ms, "input_length": tokens, "output_length": out, "hash_ids": list(ids)}


def write_trace(path: Path, records: Sequence[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def random_trace(rng: random.Random, n: int = 120) -> list[dict[str, Any]]:
    """Requests sharing prefixes from a few families, arriving in bursts."""
    records, ms, fresh = [], 0.0, 10_000
    for _ in range(n):
        ms += rng.choice([0, 0, 5, 40, 250])
        family = rng.randrange(6)
        shared = rng.randrange(0, 5)
        own = rng.randrange(0, 4)
        ids = [family * 100 + k for k in range(shared)] + list(range(fresh, fresh + own))
        fresh += own
        tokens = max(1, 512 * len(ids) - rng.randrange(0, 300))
        records.append(request(ms, tokens, rng.randrange(0, 300), ids))
    return records


# -- the hand-worked trace ------------------------------------------------

# 2 workers, C = 3 blocks, P = 1024 tokens/s, D = 0.25 s/token, round robin.
HAND = [
    request(0, 1024, 4, [1, 2]),       # w0: no hit, 0 -> 1.0, TTFT 1.0, in flight to 2.0
    request(500, 1024, 0, [3, 4]),     # w1: no hit, 0.5 -> 1.5, TTFT 1.0
    request(1000, 1536, 0, [1, 2, 5]),  # w0: 2 hits (1024 cached), 1.0 -> 1.5, TTFT 0.5
    request(2000, 768, 0, [3, 6]),     # w1: 1 hit (512), 2.0 -> 2.25, TTFT 0.25
    request(2000, 256, 0, [7]),        # w0: 2.0 -> 2.25, TTFT 0.25; evicts block 1
    request(3000, 1024, 0, [1, 2]),    # w1 holds 4, 3, 6: no hit, TTFT 1.0; evicts 4, 3
    request(4000, 512, 0, [1]),        # w0 holds 2, 5, 7: no hit, TTFT 0.5
]
HAND_CONFIG = ServingConfig(workers=2, cache_blocks=3, prefill_rate=1024.0, decode_time=0.25)


class Recorder:
    """Round robin that keeps every view it is shown."""

    views: ClassVar[list[tuple[list[int], list[float]]]] = []

    def __init__(self, config: ServingConfig) -> None:
        self.workers = config.workers

    def choose(self, request: TraceRequest, view: View) -> int:
        Recorder.views.append((list(view.loads), list(view.queued)))
        return view.index % self.workers


def test_hand_worked_trace_gives_the_hand_figures() -> None:
    Recorder.views = []
    result = replay(parse_trace(json.dumps(r) for r in HAND), Recorder, HAND_CONFIG)
    assert result["hit_rate"] == 1536 / 6144
    ttfts = sorted([1.0, 1.0, 0.5, 0.25, 0.25, 1.0, 0.5])
    assert result["ttft"] == {"mean": sum(ttfts) / 7, "p50": 0.5, "p90": 1.0, "p99": 1.0}
    assert result["routed"] == [4, 3]
    assert result["max_mean_load"] == 4 / 3.5
    assert Recorder.views == [
        ([0, 0], [0.0, 0.0]),
        ([1, 0], [0.5, 0.0]),
        ([1, 1], [0.0, 0.5]),      # w0's prefill ended exactly at 1.0: nothing queued
        ([0, 0], [0.0, 0.0]),      # the first request's in-flight end (2.0) is not > 2.0
        ([0, 1], [0.0, 0.25]),
        ([0, 0], [0.0, 0.0]),
        ([0, 0], [0.0, 0.0]),      # the sixth is in flight to 4.0 exactly, not > 4.0
    ]


def test_block_lru_keeps_the_most_recent() -> None:
    lru = BlockLRU(3)
    lru.insert([1, 2, 3])
    lru.insert([1, 4])          # 1 made most recent, 2 evicted
    assert list(lru.blocks) == [3, 1, 4]
    assert lru.match([3, 1, 9, 4]) == 2
    assert lru.match([2, 3]) == 0
    assert len(lru) == 3


def test_percentile_is_the_floor_index_capped() -> None:
    values = [float(v) for v in range(10)]
    assert percentile(values, 0.5) == 5.0
    assert percentile(values, 0.99) == 9.0
    assert percentile([7.0], 0.9) == 7.0


# -- an oracle of the model, written plainly ------------------------------

def oracle(records: Sequence[dict[str, Any]], name: str, config: ServingConfig) -> dict[str, Any]:
    """The model from its rules with lists and scans, for least-loaded and
    cache-aware."""
    n, cap = config.workers, config.cache_blocks
    caches: list[list[int]] = [[] for _ in range(n)]
    memo = [[[] for _ in range(n)] for _ in range(config.replicas)]  # type: list[list[list[int]]]
    sent: list[tuple[int, int, float, float, float]] = []  # replica, worker, start, end, done
    prefill_end = [0.0] * n
    rng = random.Random(config.seed)
    ttfts, cached_total, tokens_total = [], 0, 0

    def put(lru: list[int], ids: Sequence[int]) -> None:
        for h in ids:
            if h in lru:
                lru.remove(h)
            lru.append(h)
        del lru[:max(0, len(lru) - cap)]

    def match(lru: list[int], ids: Sequence[int]) -> int:
        k = 0
        while k < len(ids) and ids[k] in lru:
            k += 1
        return k

    for rec in records:
        t = rec["timestamp"] / 1000
        ids = rec["hash_ids"]
        r = rng.randrange(config.replicas)
        mine = config.replicas > 1 and not config.shared_loads
        seen = [s for s in sent if s[0] == r] if mine else sent
        loads = [sum(1 for s in seen if s[1] == j and s[4] > t) for j in range(n)]
        if mine:
            queued = [sum(s[3] - max(s[2], t) for s in seen if s[1] == j and s[3] > t) for j in range(n)]
        else:
            queued = [max(0.0, prefill_end[j] - t) for j in range(n)]
        if name == "least-loaded":
            j = loads.index(min(loads))
        else:
            if max(loads) - min(loads) > 64 and max(loads) > 1.5 * min(loads):
                j = loads.index(min(loads))
            else:
                m = [match(memo[r][w], ids) for w in range(n)]
                best = sorted(range(n), key=lambda w: (-m[w], loads[w], w))[0]
                if ids and m[best] / len(ids) > 0.3:
                    j = best
                else:
                    j = sorted(range(n), key=lambda w: (len(memo[r][w]), loads[w], w))[0]
        del queued
        cached = min(rec["input_length"], 512 * match(caches[j], ids))
        put(caches[j], ids)
        put(memo[r][j], ids)
        start = max(t, prefill_end[j])
        end = start + (rec["input_length"] - cached) / config.prefill_rate
        prefill_end[j] = end
        sent.append((r, j, start, end, end + rec["output_length"] * config.decode_time))
        ttfts.append(end - t)
        cached_total += cached
        tokens_total += rec["input_length"]
    ttfts.sort()
    return {"hit_rate": cached_total / tokens_total, "mean": sum(ttfts) / len(ttfts),
            "p99": ttfts[min(math.floor(0.99 * len(ttfts)), len(ttfts) - 1)]}


@pytest.mark.parametrize("replicas,shared", [(1, False), (3, False), (3, True)])
@pytest.mark.parametrize("name", ["least-loaded", "cache-aware"])
@pytest.mark.parametrize("seed", [1, 2])
def test_replay_matches_the_oracle(name: str, replicas: int, shared: bool, seed: int) -> None:
    records = random_trace(random.Random(seed * 31 + replicas))
    config = ServingConfig(workers=3, cache_blocks=12, prefill_rate=5000.0, decode_time=0.01,
                           replicas=replicas, seed=seed, shared_loads=shared)
    got = replay(parse_trace(json.dumps(r) for r in records), POLICIES[name], config)
    want = oracle(records, name, config)
    assert got["hit_rate"] == pytest.approx(want["hit_rate"])
    assert got["ttft"]["mean"] == pytest.approx(want["mean"])
    assert got["ttft"]["p99"] == pytest.approx(want["p99"])


def test_queued_work_of_own_requests_is_what_the_oracle_sees() -> None:
    """Unshared replicas: queued work is the part of their own prefills
    still ahead, so over all replicas it adds up to the cluster's."""
    seen: list[tuple[float, list[float]]] = []

    class Spy:
        def __init__(self, config: ServingConfig) -> None:
            pass

        def choose(self, request: TraceRequest, view: View) -> int:
            seen.append((request.arrival, list(view.queued)))
            return 0

    records = [request(0, 1024, 0, [1]), request(0, 1024, 0, [2]), request(500, 10, 0, [3])]
    config = ServingConfig(workers=1, prefill_rate=1024.0, replicas=2, seed=5)
    replay(parse_trace(json.dumps(r) for r in records), Spy, config)
    rng = random.Random(5)
    owners = [rng.randrange(2) for _ in range(3)]
    # at 0.5 the first prefill (0 -> 1) has 0.5 s left, the second (1 -> 2) all its 1 s
    mine = (0.5 if owners[0] == owners[2] else 0.0) + (1.0 if owners[1] == owners[2] else 0.0)
    assert [arrival for arrival, _ in seen] == [0.0, 0.0, 0.5]
    assert seen[2][1] == [pytest.approx(mine)]


# -- the baselines on views made for them ----------------------------------

def view(loads: list[int], records: list[list[int]] | None = None, cap: int = 100) -> View:
    lrus = []
    for held in records or [[] for _ in loads]:
        lru = BlockLRU(cap)
        lru.insert(held)
        lrus.append(lru)
    return View(loads, [0.0] * len(loads), lrus)


def trace_request(ids: Sequence[int]) -> TraceRequest:
    return TraceRequest(0.0, 512 * len(ids), 1, tuple(ids))


def test_least_loaded_ties_to_the_lowest_index() -> None:
    assert LeastLoaded(ServingConfig()).choose(trace_request([1]), view([3, 1, 1, 2])) == 1


def test_cache_aware_rules() -> None:
    policy = CacheAware(ServingConfig(workers=3))
    ids = [1, 2, 3, 4, 5]
    # longest match 2 of 5 (> 0.3) wins
    assert policy.choose(trace_request(ids), view([5, 0, 0], [[1, 2], [1], []])) == 0
    # a tie in match goes to the lower load
    assert policy.choose(trace_request(ids), view([5, 4, 0], [[1, 2], [1, 2, 9], []])) == 1
    # match 1 of 5 (0.2): the smallest record, ties to lower load then index
    assert policy.choose(trace_request(ids), view([0, 2, 1], [[1, 8, 9], [7], [6]])) == 2
    # imbalance beyond both thresholds: least-loaded, whatever the match
    assert policy.choose(trace_request(ids), view([100, 30, 20], [[1, 2, 3, 4, 5], [], []])) == 2
    # 65 apart but not 1.5 times: the cache rule still decides
    assert policy.choose(trace_request(ids), view([200, 135, 140], [[1, 2, 3, 4, 5], [], []])) == 0


def test_bounded_choice_follows_the_weighted_rule() -> None:
    # T = ceil(1.25 * (4 + 1)) = 7; equal weights over 2: bound ceil(3.5) = 4
    assert bounded_choice([0, 1], [4, 0], [1.0, 1.0], 1.25) == 1
    assert bounded_choice([0, 1], [3, 1], [1.0, 1.0], 1.25) == 0
    # weight 3 of 4 with T = ceil(1.25 * 1) = 2: bounds ceil(1.5) = 2 and max(ceil(0.5), 1) = 1
    assert bounded_choice([1, 0], [0, 1], [3.0, 1.0], 1.25) == 0
    assert bounded_choice([1, 0], [0, 0], [3.0, 1.0], 1.25) == 1


def test_chwbl_routes_as_bounded_choice_over_the_preference_list() -> None:
    # Chwbl asks the ring's get_bounded; the rule stated over indexes agrees.
    rng = random.Random(3)
    for workers in (1, 2, 5, 16):
        config = ServingConfig(workers=workers, key_blocks=2, balance_factor=1.1)
        policy = Chwbl(config)
        moved = 0
        for _ in range(300):
            ids = [rng.randrange(50) for _k in range(3)]
            loads = [rng.randrange(8) for _ in range(workers)]
            names = policy.router.get_preference_list(ring_key(ids, 2), workers)
            expected = bounded_choice([policy.index[n] for n in names], loads,
                                      [1.0] * workers, 1.1)
            got = policy.choose(trace_request(ids), view(loads))
            assert got == expected
            moved += got != policy.index[names[0]]
        assert moved > 0 or workers == 1


def test_ring_and_chwbl_use_the_router_on_the_leading_blocks() -> None:
    config = ServingConfig(workers=4, key_blocks=2)
    policy = Chwbl(config)
    ids = [7, 8, 9]
    assert ring_key(ids, 2) == "7,8"
    names = policy.router.get_preference_list("7,8", 4)
    first = int(names[0][1:])
    assert POLICIES["ring"](config).choose(trace_request(ids), view([0] * 4)) == first
    assert policy.choose(trace_request(ids), view([0] * 4)) == first
    loads = [0] * 4
    loads[first] = 5  # T = ceil(1.25 * 6) = 8, bound 2: the next in the list
    assert policy.choose(trace_request(ids), view(loads)) == int(names[1][1:])


def test_shared_loads_with_a_load_only_policy_match_one_replica() -> None:
    records = parse_trace(json.dumps(r) for r in random_trace(random.Random(3)))
    one = replay(records, POLICIES["least-loaded"], ServingConfig(workers=3))
    shared = replay(records, POLICIES["least-loaded"],
                    ServingConfig(workers=3, replicas=3, shared_loads=True))
    assert (one["ttft"], one["hit_rate"]) == (shared["ttft"], shared["hit_rate"])


# -- traces and the command ------------------------------------------------

@pytest.mark.parametrize("line,message", [
    ("[1]", "expected a JSON object"),
    ("{", "not JSON"),
    ('{"timestamp": -1, "input_length": 1, "output_length": 1, "hash_ids": []}', "'timestamp'"),
    ('{"timestamp": 1, "input_length": "x", "output_length": 1, "hash_ids": []}', "'input_length'"),
    ('{"timestamp": 1, "input_length": 1, "hash_ids": []}', "'output_length'"),
    ('{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1.5]}', "'hash_ids'"),
])
def test_bad_trace_lines_name_the_line(line: str, message: str) -> None:
    good = json.dumps(request(0, 1, 1, [1]))
    with pytest.raises(ValueError, match=f"line 2: .*{message}|line 2: {message}"):
        parse_trace([good, line])


def test_empty_trace_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no requests"):
        read_trace(str(path))


def test_config_refuses_bad_values() -> None:
    for bad in ({"workers": 0}, {"prefill_rate": 0.0}, {"decode_time": -1.0},
                {"balance_factor": 0.5}, {"replicas": True}):
        with pytest.raises(ValueError):
            ServingConfig(**bad)


def test_compare_averages_seeds_only_with_replicas() -> None:
    records = parse_trace(json.dumps(r) for r in random_trace(random.Random(4), 60))
    one = compare(records, ServingConfig(workers=3), ["round-robin"])
    assert one["seeds"] == [1]
    three = compare(records, ServingConfig(workers=3, replicas=3), ["least-loaded"], (1, 2, 3))
    runs = [replay(records, LeastLoaded, ServingConfig(workers=3, replicas=3, seed=s))
            for s in (1, 2, 3)]
    assert three["policies"][0]["ttft"]["mean"] == pytest.approx(
        sum(run["ttft"]["mean"] for run in runs) / 3)


def test_cli_trace_table_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(tmp_path / "t.jsonl", random_trace(random.Random(5)))
    out = tmp_path / "r.json"
    argv = ["simulate", "--trace", str(trace), "--workers", "3", "--cache-blocks", "50",
            "--prefill-rate", "4000", "--replicas", "2", "--seed", "1,2", "--json", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    for name in POLICIES:
        if name in {"round-robin", "least-loaded", "ring", "chwbl", "cache-aware"}:
            assert f"\n{name} " in text
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["seeds"] == [1, 2] and data["config"]["replicas"] == 2
    assert data["config"]["cache_blocks"] == 50 and data["requests"] == 120
    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    png = tmp_path / "p.png"
    assert main(["simulate", "--trace", str(trace), "--workers", "3", "--policy", "ring",
                 "--plot", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_cli_trace_json_alone_prints_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(tmp_path / "t.jsonl", random_trace(random.Random(6), 30))
    assert main(["simulate", "--trace", str(trace), "--workers", "2", "--policy", "prefix",
                 "--policy", "ring", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [row["policy"] for row in data["policies"]] == ["prefix", "ring"]
    assert data["trace"] == "t.jsonl" and data["seeds"] == [1]


@pytest.mark.parametrize("argv", [
    ["--trace", "/nonexistent.jsonl"], ["--prefill-rate", "0"], ["--decode-time", "-1"],
    ["--seed", "x"], ["--policy", "nope"], ["--workers", "0"],
])
def test_cli_trace_errors(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(tmp_path / "t.jsonl", [request(0, 1, 1, [1])])
    full = ["simulate", "--trace", str(trace), *argv]
    try:
        code = main(full)
    except SystemExit as exc:
        code = int(exc.code or 0)
    assert code == 2
    assert "error" in capsys.readouterr().err


class PrefixRule:
    """The prefix policy's documented rule in plain Python: along the ring's
    preference list for the first K ids, queued x P + 3 x uncached tokens +
    rank x 512; its own LRU record a worker."""

    def __init__(self, config: ServingConfig) -> None:
        self.router = POLICIES["ring"](config).router  # type: ignore[attr-defined]
        self.config = config
        self.records = [BlockLRU(config.cache_blocks) for _ in range(config.workers)]

    def choose(self, request: TraceRequest, view: View) -> int:
        names = self.router.get_preference_list(ring_key(request.hash_ids, self.config.key_blocks),
                                                self.config.workers)
        tokens = request.input_length or 512 * len(request.hash_ids)
        costs = []
        for rank, name in enumerate(names):
            j = int(name[1:])
            hits = self.records[j].match(request.hash_ids)
            costs.append(view.queued[j] * self.config.prefill_rate
                         + 3 * max(0, tokens - 512 * hits) + 512 * rank)
        j = int(names[costs.index(min(costs))][1:])
        self.records[j].insert(request.hash_ids)
        return j


@pytest.mark.parametrize("replicas,shared", [(1, False), (3, False), (3, True)])
def test_prefix_policy_follows_its_rule(replicas: int, shared: bool) -> None:
    records = parse_trace(json.dumps(r) for r in random_trace(random.Random(8), 200))
    config = ServingConfig(workers=4, cache_blocks=20, prefill_rate=3000.0, replicas=replicas,
                           shared_loads=shared)
    got = replay(records, POLICIES["prefix"], config)
    want = replay(records, PrefixRule, config)
    assert got["routed"] == want["routed"]
    assert got["ttft"] == pytest.approx(want["ttft"]) and got["hit_rate"] == want["hit_rate"]


def test_prefix_on_a_hand_trace() -> None:
    # The first three hand requests with room for 8 blocks a worker; the
    # ring puts both keys "1,2" and "3,4" first on w0.
    config = replace(HAND_CONFIG, cache_blocks=8)
    ring = Chwbl(config).router
    assert [ring.get_preference_list(k, 2)[0] for k in ("1,2", "3,4")] == ["w0", "w0"]
    result = replay(parse_trace(json.dumps(r) for r in HAND[:3]), POLICIES["prefix"], config)
    # Costs are queued x P + 3 x uncached + 512 a step down the list.
    # 1: w0 idle, 0 -> 1.0.  2 at 0.5: w0 costs 512 queued + 3 x 1024 = 3584, w1
    # 3 x 1024 + 512 = 3584: the tie goes to w0, 1.0 -> 2.0.  3 at 1.0: w0 costs
    # 1024 queued + 3 x 512 (2 blocks held) = 2560, w1 3 x 1536 + 512: w0, 2.0 -> 2.5.
    assert result["routed"] == [3, 0]
    assert result["hit_rate"] == 1024 / (1024 + 1024 + 1536)
    assert result["ttft"] == {"mean": 4.0 / 3, "p50": 1.5, "p90": 1.5, "p99": 1.5}
