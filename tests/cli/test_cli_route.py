"""Tests of ``chash route``: answers checked against the router itself,
node lists from every source, and every bad argument (exit 2, a message)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from chash import ConsistentHashRouter
from chash.cli import main

NODES = ["cache-1", "cache-2", "cache-3", "cache-4"]
KEYS = [f"user:{i}" for i in range(25)]


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    assert main(["route", *argv, "--json"]) == 0
    answers: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    return answers


def expected(router: ConsistentHashRouter, key: str, n: int) -> dict[str, Any]:
    return {"key": key, "point": router._calculate_hash(key),
            "owner": router.get_target_node(key),
            "preference": router.get_preference_list(key, n)}


def test_answers_match_the_router(capsys: pytest.CaptureFixture[str]) -> None:
    router = ConsistentHashRouter()
    for node in NODES:
        router.add_service_node(node)
    answers = run_json(capsys, *KEYS, "--nodes", ",".join(NODES))
    assert answers == [expected(router, key, 3) for key in KEYS]
    # The preference list starts with the owner and holds distinct nodes.
    for answer in answers:
        assert answer["preference"][0] == answer["owner"]
        assert len(set(answer["preference"])) == 3


@pytest.mark.parametrize(("hash_name", "layout"), [
    ("md5", "python"), ("murmur3", "python"), ("xxh3", "node"), ("crc32", "node"),
    ("md5", "ketama"),
])
def test_ring_options(capsys: pytest.CaptureFixture[str], hash_name: str, layout: str) -> None:
    weight = 3.0 if layout == "ketama" else 2.5  # ketama takes integer weights
    router = ConsistentHashRouter(40, hash=hash_name, layout=layout)
    for node in NODES:
        router.add_service_node(node, weight if node == "cache-2" else 1.0)
    answers = run_json(capsys, *KEYS, "--nodes", ",".join(NODES), "--vnodes", "40",
                       "--hash", hash_name, "--layout", layout, "--weight", f"cache-2={weight}",
                       "-n", "4")
    assert answers == [expected(router, key, 4) for key in KEYS]


def test_preference_list_is_capped_by_the_ring(capsys: pytest.CaptureFixture[str]) -> None:
    (answer,) = run_json(capsys, "k", "--nodes", "a,b", "-n", "5")
    assert sorted(answer["preference"]) == ["a", "b"]


def test_readable_output(capsys: pytest.CaptureFixture[str]) -> None:
    router = ConsistentHashRouter()
    for node in NODES:
        router.add_service_node(node)
    assert main(["route", "user:42", "--nodes", ",".join(NODES)]) == 0
    out = capsys.readouterr().out
    owner = router.get_target_node("user:42")
    assert f"owner       {owner}\n" in out
    prefs = router.get_preference_list("user:42", 3)
    assert "preference  " + "  ".join(f"{i}. {n}" for i, n in enumerate(prefs, 1)) in out
    assert f"{router._calculate_hash('user:42'):,} of 2**32" in out


def test_nodes_from_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "nodes.txt"
    path.write_text("# the cache tier\ncache-1\n\ncache-2, cache-3  # rack 2\n  cache-4\n")
    from_file = run_json(capsys, *KEYS, "--nodes-file", str(path))
    assert from_file == run_json(capsys, *KEYS, "--nodes", ",".join(NODES))


@pytest.mark.parametrize("flag", ["--nodes", "--nodes-file"])
def test_nodes_from_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                          flag: str) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(NODES) + "\n"))
    from_stdin = run_json(capsys, *KEYS, flag, "-")
    assert from_stdin == run_json(capsys, *KEYS, "--nodes", ",".join(NODES))


def bad(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exc:
        main(["route", *argv])
    assert exc.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "usage: chash route" in captured.err
    return captured.err


@pytest.mark.parametrize(("argv", "message"), [
    (["k"], "one of the arguments --nodes --nodes-file --nginx-conf --twemproxy-conf --haproxy-conf is required"),
    (["--nodes", "a,b"], "the following arguments are required: KEY"),
    (["k", "--nodes", "a", "--nodes-file", "f"], "not allowed with argument"),
    (["k", "--nodes", ""], "no nodes in ''"),
    (["k", "--nodes", " , ,"], "no nodes in"),
    (["k", "--nodes", "a,b,a"], "node 'a' is listed twice"),
    (["k", "--nodes", "a", "--vnodes", "0"], "argument --vnodes: must be >= 1, not 0"),
    (["k", "--nodes", "a", "--vnodes", "ten"], "argument --vnodes: not a whole number: 'ten'"),
    (["k", "--nodes", "a", "--vnodes", "1000001"], "must be <= 1,000,000"),
    (["k", "--nodes", "a", "-n", "0"], "argument -n: must be >= 1, not 0"),
    (["k", "--nodes", "a", "--hash", "crc64"], "argument --hash: invalid choice: 'crc64'"),
    (["k", "--nodes", "a", "--layout", "jump"], "argument --layout: invalid choice: 'jump'"),
    (["k", "--nodes", "a", "--weight", "a"], "expected NODE=WEIGHT, not 'a'"),
    (["k", "--nodes", "a", "--weight", "a=heavy"], "the weight is not a number"),
    (["k", "--nodes", "a", "--weight", "a=0"], "the weight must be positive"),
    (["k", "--nodes", "a", "--weight", "a=inf"], "the weight must be positive"),
    (["k", "--nodes", "a", "--weight", "b=2"], "--weight names unknown node(s): b"),
    (["k", "--nodes", "a", "--layout", "ketama", "--hash", "xxh3"],
     "cannot build the ring: the ketama layout is defined over md5 only"),
])
def test_bad_arguments(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert message in bad(capsys, *argv)


def test_unreadable_nodes_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = bad(capsys, "k", "--nodes-file", str(tmp_path / "missing.txt"))
    assert "cannot read nodes file" in err and "No such file or directory" in err
    err = bad(capsys, "k", "--nodes-file", str(tmp_path))
    assert "cannot read nodes file" in err


def test_empty_nodes_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "nodes.txt"
    path.write_text("# nothing here\n\n")
    assert "no nodes in" in bad(capsys, "k", "--nodes-file", str(path))


def test_weight_too_large_for_the_ring(capsys: pytest.CaptureFixture[str]) -> None:
    err = bad(capsys, "k", "--nodes", "a", "--vnodes", "1000000", "--weight", "a=1e9")
    assert "cannot build the ring" in err
