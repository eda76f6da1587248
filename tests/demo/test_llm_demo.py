"""``chash demo --llm``, shortened: every policy replays the same
completions through the gateway to stand-in engines, every one answered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

aiohttp = pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")

from _support.waiting import run  # noqa: E402
from chash.cli import main  # noqa: E402
from chash.demo.llm import LLM_POLICIES, generated_requests, render_llm, run_llm_demo  # noqa: E402


def test_the_generated_workload_shares_prefixes_and_is_deterministic() -> None:
    requests = generated_requests(200)
    assert requests == generated_requests(200) != generated_requests(200, seed=8)
    arrivals = [r.arrival for r in requests]
    assert arrivals == sorted(arrivals)
    # Groups share their first blocks; each request ends with blocks of its own.
    firsts = {r.hash_ids[:2] for r in requests}
    assert 1 < len(firsts) <= 24
    tails = [r.hash_ids[-1] for r in requests]
    assert len(set(tails)) == len(tails)


def test_every_policy_replays_every_completion() -> None:
    requests = generated_requests(60)
    result = run(run_llm_demo(requests, seconds=1.5))
    assert result.ok and [r.policy for r in result.runs] == list(LLM_POLICIES)
    for policy_run in result.runs:
        assert policy_run.requests == 60 and sum(policy_run.per_engine.values()) == 60
        assert 0 < policy_run.hit_rate < 1
        assert 0 < policy_run.ttft_p50 <= policy_run.ttft_p90 <= policy_run.ttft_p99
    table = render_llm(result)
    assert all(f"\n{policy} " in table for policy in LLM_POLICIES)


def test_the_command_replays_a_trace_file(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(
        json.dumps({"timestamp": 100 * i, "input_length": 1024, "output_length": 16,
                    "hash_ids": [1, 2, 3 + i % 4]}) + "\n" for i in range(30)))
    assert main(["demo", "--llm", "--trace", str(trace), "--requests", "20",
                 "--duration", "3", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["source"] == str(trace)
    assert [r["requests"] for r in result["runs"]] == [20, 20, 20]
    # Every request shares the first two blocks: the ring and chwbl keep
    # them on one engine while loads allow, and prefix finds the cache.
    assert all(r["hit_rate"] > 0.3 for r in result["runs"]), result


def test_a_trace_that_does_not_read_is_told(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--llm", "--trace", str(tmp_path / "none.jsonl")]) == 2
    assert "chash demo --llm:" in capsys.readouterr().err
