"""The loads the workers of one gateway share (``chash.gateway.worker_loads``):
the table itself, two workers' ``PromptRoutes`` over one table in this
process, and ``chash gateway --workers 2 --affinity prefix`` routing a
session on what the other worker holds in flight."""
from __future__ import annotations

import logging
from typing import Any

import pytest

from _support.waiting import eventually, run
from chash import ConsistentHashRouter
from chash.gateway.llm import PromptRoutes
from chash.gateway.worker_loads import SharedCounts, WorkerLoads, WorkerRow

NODE = "X-Node"


def ring(*nodes: str) -> ConsistentHashRouter:
    router = ConsistentHashRouter()
    for node in nodes:
        router.add_service_node(node)
    return router


def routes_of(row: WorkerRow, router: ConsistentHashRouter) -> PromptRoutes:
    """One worker's routing of completions, as ``Gateway`` makes it."""
    return PromptRoutes(router, router, row.in_flight, workers=row)


# -- the table ------------------------------------------------------------------------


def test_every_worker_reads_the_sum_of_every_row() -> None:
    table = WorkerLoads(3)
    rows = [table.row(i) for i in range(3)]
    rows[0].in_flight["a"] = 2
    rows[1].in_flight["a"] = 1
    rows[1].in_flight["b"] = 4
    rows[2].set_queued("b", 300.4)
    rows[2].know(["a", "b"])
    for row in rows:
        row.know(["a", "b"])
        assert row.totals() == ({"a": 3, "b": 4}, {"a": 0, "b": 300})
    rows[1].in_flight["b"] -= 4
    assert rows[0].totals()[0] == {"a": 3, "b": 0}
    # The proxy's counts are a dict as before.
    assert isinstance(rows[1].in_flight, SharedCounts) and rows[1].in_flight == {"a": 1, "b": 0}


def test_a_node_has_one_slot_whatever_order_the_workers_meet_the_nodes_in() -> None:
    table = WorkerLoads(2)
    one, other = table.row(0), table.row(1)
    one.know(["a", "b", "c"])
    other.know(["c", "x", "b", "a"])
    assert table.used == 4
    assert [table.slot(n) for n in "abc"] == [0, 1, 2] and table.slot("x") == 3
    other.in_flight["c"] = 5
    assert one.totals()[0]["c"] == 5
    # A node removed (by a reload) and added back finds its slot again.
    assert table.slot("b") == 1 and table.used == 4


def test_counts_a_worker_had_before_it_met_the_slot_are_written_to_it() -> None:
    table = WorkerLoads(2)
    row = table.row(1)
    dict.__setitem__(row.in_flight, "a", 3)  # as if counted before the slot was known
    row.know(["a"])
    reader = table.row(0)
    reader.know(["a"])
    assert reader.totals()[0] == {"a": 3}


def test_a_restarted_worker_leaves_none_of_its_predecessors_counts() -> None:
    table = WorkerLoads(2)
    first, other = table.row(0), table.row(1)
    for row in (first, other):
        row.know(["a", "b"])
    other.in_flight["a"] = 7
    other.set_queued("b", 900.0)
    other.routed("prefix")
    first.in_flight["a"] = 1
    assert first.totals() == ({"a": 8, "b": 0}, {"a": 0, "b": 900})
    # Worker 1 dies with requests in flight; the one started in its place
    # takes the row, zeroed: no stale counts, no stale routed total.
    restarted = table.row(1)
    assert first.totals() == ({"a": 1, "b": 0}, {"a": 0, "b": 0})
    assert first.routed_totals() == {"prefix": 0, "session": 0, "least-loaded": 0}
    restarted.in_flight["b"] = 2
    assert first.totals()[0] == {"a": 1, "b": 2}


def test_a_full_table_leaves_later_nodes_to_each_workers_own_counts(
        caplog: pytest.LogCaptureFixture) -> None:
    table = WorkerLoads(2, capacity=2)
    one, other = table.row(0), table.row(1)
    with caplog.at_level(logging.ERROR, logger="chash.gateway"):
        one.know(["a", "b", "c"])
        other.know(["a", "b", "c"])
    assert table.used == 2 and table.slot("c") == -1
    assert one.unshared == ["c"] and other.unshared == ["c"]
    full = [r for r in caplog.records if "full (2 nodes)" in r.getMessage()]
    assert len(full) == 2 and "'c'" in full[0].getMessage()  # once a worker
    one.in_flight["c"] = 2
    other.in_flight["c"] = 1
    other.in_flight["a"] = 4
    assert one.totals()[0] == {"a": 4, "b": 0, "c": 2}
    assert other.totals()[0] == {"a": 4, "b": 0, "c": 1}
    status = one.status()
    assert status["capacity"] == 2 and status["used"] == 2 and status["unshared"] == ["c"]
    assert [r["in_flight"] for r in status["rows"]] == [{}, {"a": 4}]


def test_a_slot_map_left_locked_leaves_the_node_unshared_not_the_worker_stuck(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import chash.gateway.worker_loads as worker_loads

    monkeypatch.setattr(worker_loads, "LOCK_TIMEOUT", 0.05)
    table = WorkerLoads(2)
    row = table.row(0)
    # A worker killed while it held the lock (taking a slot) never frees it.
    assert table._lock.acquire(timeout=1)
    with caplog.at_level(logging.ERROR, logger="chash.gateway"):
        row.in_flight["a"] = 1
    assert row.unshared == ["a"] and row.totals()[0] == {"a": 1}
    assert "stayed locked" in caplog.text and "'a'" in caplog.text


@pytest.mark.parametrize(("workers", "capacity", "worker", "message"), [
    (0, 8, 0, "workers must be"), (2, 0, 0, "capacity must be"), (True, 8, 0, "workers must"),
    (2, 8, 2, r"worker must be 0 \.\. 1"), (2, 8, -1, "worker must be")])
def test_bad_sizes_are_refused(workers: Any, capacity: Any, worker: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        WorkerLoads(workers, capacity).row(worker)


# -- two workers' routing over one table -------------------------------------------------


def test_a_session_is_bounded_on_what_the_other_worker_holds() -> None:
    table = WorkerLoads(2)
    router = ring("a", "b", "c")
    rows = [table.row(i) for i in range(2)]
    one, other = (routes_of(row, ring("a", "b", "c")) for row in rows)
    owner = router.get_preference_list("user-1", 1)[0]
    # Two in flight on the owner at worker 0: ceil(1.25 x 3) = 4 over 3
    # nodes is 2 each, so worker 1 sends the session elsewhere...
    rows[0].in_flight[owner] = 2
    choice = other.choose(None, b"user-1", 3)
    assert choice.how == "session" and choice.nodes[0] != owner
    # ...as it would had it those two itself; with them gone, to the owner.
    rows[0].in_flight[owner] = 0
    assert other.choose(None, b"user-1", 3).nodes[0] == owner
    assert one.routed_totals() == {"prefix": 0, "session": 2, "least-loaded": 0}
    assert other.routed == {"prefix": 0, "session": 2, "least-loaded": 0}
    assert one.routed == {"prefix": 0, "session": 0, "least-loaded": 0}


def test_a_prefix_is_routed_as_one_process_holding_every_workers_loads_would() -> None:
    body = b'{"model": "m", "prompt": "' + b"the same long system prompt " * 40 + b'"}'
    table = WorkerLoads(2)
    rows = [table.row(i) for i in range(2)]
    one, other = (routes_of(row, ring("a", "b", "c")) for row in rows)
    counts: dict[str, int] = {}
    alone = PromptRoutes(ring("a", "b", "c"), ring("a", "b", "c"), counts)
    first = other.choose(body, None, 3)
    assert alone.choose(body, None, 3).nodes[0] == first.nodes[0]
    # Worker 1's estimate of the prefill it sent is in worker 0's view.
    node = first.nodes[0]
    assert one.views(["a", "b", "c"])[1][node] == round(other.queued[node]) > 0
    other.done(first)
    alone.queued.clear()
    # Work piles up on the first choice at worker 0; worker 1 decides as
    # the single process holding the same loads and queued work does.
    choices = []
    for held in range(12):
        rows[0].in_flight[node] = counts[node] = held
        rows[0].set_queued(node, 300.0 * held)
        alone.queued[node] = 300.0 * held
        mine, its = other.choose(body, None, 3), alone.choose(body, None, 3)
        assert mine.nodes[0] == its.nodes[0], held
        choices.append(mine.nodes[0])
        other.done(mine)
        alone.done(its)
        alone.queued[node] = 300.0 * held
    assert choices[0] == node and set(choices) - {node}, choices  # it did spill


def test_a_stream_estimate_leaves_the_table_when_it_ends() -> None:
    table = WorkerLoads(2)
    one, other = (routes_of(table.row(i), ring("a", "b")) for i in range(2))
    body = b'{"model": "m", "prompt": "' + b"x" * 2000 + b'"}'
    choice = one.choose(body, None, 2)
    node = choice.nodes[0]
    assert other.views(["a", "b"])[1][node] == 500
    assert other.status()["queued_tokens"] == {node: 500}
    one.done(choice)
    assert other.views(["a", "b"])[1][node] == 0 and other.status()["queued_tokens"] == {}


# -- the program ---------------------------------------------------------------------------


def test_chash_gateway_workers_bound_a_session_on_each_others_requests_in_flight() -> None:
    pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")
    httpx = pytest.importorskip("httpx", reason="httpx (the test extra) is not installed")
    from _support.gateway_processes import gateway_process, status
    from chash.demo.engine import StandInEngine

    session = {"x-session-id": "user-42"}

    def body(tokens: int, stream: bool = False) -> dict[str, Any]:
        return {"model": "m", "messages": [{"role": "user", "content": "hello"}],
                "max_tokens": tokens, "stream": stream}

    async def main() -> None:
        engines = {name: await StandInEngine(name, token_rate=20.0).start() for name in "ab"}
        backends = ",".join(f"{e.name}={e.address}" for e in engines.values())
        try:
            async with gateway_process(
                    "--backend", backends, "--affinity", "prefix", "--no-health",
                    "--node-header", NODE, "--workers", "2",
                    "--admin-listen", "127.0.0.1:0") as running, \
                    httpx.AsyncClient(timeout=30.0) as holding:
                assert running.admin is not None
                admin = running.admin

                async def rows() -> list[dict[str, Any]]:
                    page = await status(admin)
                    found: list[dict[str, Any]] = page["affinity"]["workers"]["rows"]
                    return found

                async def in_flight(node: str) -> int:
                    return sum(row["in_flight"].get(node, 0) for row in await rows())

                # Two slow streams of the session, held in flight: both on
                # its owner (one in flight of two: under its bound of 2).
                streams = []
                for count in (1, 2):
                    request = holding.build_request("POST", f"{running.url}/v1/chat/completions",
                                                    json=body(600, stream=True), headers=session)
                    streams.append(await holding.send(request, stream=True))
                    owner = streams[0].headers[NODE]
                    assert streams[-1].headers[NODE] == owner
                    await eventually(lambda n=count, o=owner: _equal(in_flight(o), n),
                                     f"{count} in flight on the owner")
                (other,) = set(engines) - {owner}
                held = {row["worker"]: row["in_flight"].get(owner, 0) for row in await rows()}
                assert sum(held.values()) == 2
                # Quick requests of the session on new connections, until
                # each worker has routed some: all go to the other engine,
                # whichever worker takes them, including one holding fewer
                # than the two (on its own counts, it would pick the owner).
                routed_by: dict[int, int] = {}
                seen = {row["worker"]: row["routed"]["session"] for row in await rows()}
                for _ in range(60):
                    async with httpx.AsyncClient(timeout=30.0) as fresh:
                        answer = await fresh.post(f"{running.url}/v1/chat/completions",
                                                  json=body(1), headers=session)
                    assert answer.status_code == 200, answer.text
                    assert answer.headers[NODE] == other, (held, routed_by)
                    await eventually(lambda: _equal(in_flight(other), 0), "the quick one ended")
                    now = {row["worker"]: row["routed"]["session"] for row in await rows()}
                    (worker,) = [w for w in now if now[w] != seen[w]]
                    routed_by[worker] = routed_by.get(worker, 0) + 1
                    seen = now
                    if len(routed_by) == 2:
                        break
                assert set(routed_by) == {0, 1}, routed_by
                assert any(held[w] < 2 for w in routed_by), (held, routed_by)
                page = await status(admin)
                affinity = page["affinity"]
                routed = 2 + sum(routed_by.values())
                assert affinity["routed"]["session"] == routed
                assert affinity["workers"]["unshared"] == []
                # The metrics count every worker's completions as well.
                metrics = (await holding.get(f"{admin}/metrics")).text
                assert f'chash_gateway_completions_routed_total{{how="session"}} {routed}.0' \
                    in metrics
                for stream in streams:
                    await stream.aclose()
                await eventually(lambda: _equal(in_flight(owner), 0), "the streams ended")
        finally:
            for engine in engines.values():
                await engine.stop()
    run(main())


async def _equal(value: Any, expected: int) -> bool:
    return bool(await value == expected)
