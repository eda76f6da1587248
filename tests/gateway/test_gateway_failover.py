"""The failover walk plain requests and WebSocket handshakes share
(chash.gateway.failover), without sockets: time is passed in."""
from __future__ import annotations

import pytest

from chash.gateway.failover import Failover
from chash.gateway.retry import Outcome

NODES = ["a", "b", "c"]


def walk(method: str = "GET", *, replayable: bool = True, retry_unsafe: bool = False,
         deadline: float = 100.0) -> Failover:
    return Failover(NODES, method, retry_unsafe=retry_unsafe, replayable=replayable,
                    deadline=deadline, limit=30.0)


def test_an_answered_attempt_ends_the_walk_at_the_owner() -> None:
    w = walk()
    assert list(w) == ["a"] and w.owner == "a" and w.tried == []


def test_each_failure_moves_to_the_next_node_until_none_is_left() -> None:
    w = walk()
    seen = []
    for node in w:
        seen.append((node, w.attempt))
        w.failed("connection refused", Outcome.NOT_DELIVERED, now=0.0)
    assert seen == [("a", 0), ("b", 1), ("c", 2)]
    assert w.verdict() == (502, "no backend answered (a: connection refused; "
                                "b: connection refused; c: connection refused)")


def test_the_answer_of_a_later_node_ends_it_there() -> None:
    w = walk()
    for node in w:
        if node == "a":
            w.failed("timed out after 5s", Outcome.FAILED, now=1.0)
    assert w.node == "b" and w.tried == ["a: timed out after 5s"]


def test_the_policy_stops_an_unsafe_or_streamed_request_after_it_was_sent() -> None:
    for w in (walk("POST"), walk(replayable=False)):
        assert list(_failing(w, "disconnected before answering", Outcome.FAILED)) == ["a"]
        assert w.verdict()[0] == 502
    # Nothing delivered: any request goes on, streamed or not.
    w = walk("POST", replayable=False)
    assert list(_failing(w, "connection refused", Outcome.NOT_DELIVERED)) == NODES
    w = walk("POST", retry_unsafe=True)
    assert list(_failing(w, "HTTP 503", Outcome.RETRY_STATUS)) == NODES


def test_last_says_whether_an_answer_to_retry_from_is_the_one_the_client_gets() -> None:
    w = walk()
    it = iter(w)
    assert next(it) == "a" and not w.last(Outcome.RETRY_STATUS) and w.last(Outcome.ANSWERED)
    w.failed("HTTP 503", Outcome.RETRY_STATUS, now=0.0)
    assert next(it) == "b"
    w.failed("HTTP 503", Outcome.RETRY_STATUS, now=0.0)
    assert next(it) == "c" and w.last(Outcome.RETRY_STATUS)
    assert walk("POST").last(Outcome.RETRY_STATUS)


def test_the_deadline_ends_the_walk_with_a_504() -> None:
    w = walk(deadline=10.0)
    for _ in w:
        w.failed("connection refused", Outcome.NOT_DELIVERED, now=10.0)
    assert w.tried == ["a: connection refused", "deadline of 30s passed"]
    assert w.verdict() == (504, "no backend answered in time (a: connection refused; "
                                "deadline of 30s passed)")


def test_a_timeout_on_the_last_node_makes_a_504_and_an_error_after_it_a_502() -> None:
    w = walk()
    for node in w:
        w.failed("connection refused" if node != "c" else "no free connection before the "
                 "deadline", Outcome.NOT_DELIVERED, now=0.0)
    assert w.verdict()[0] == 504
    w = walk()
    for node in w:
        w.failed("timed out after 5s" if node == "a" else "cannot connect: x",
                 Outcome.NOT_DELIVERED, now=0.0)
    assert w.verdict()[0] == 502


def test_no_node_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one node"):
        Failover([], "GET", retry_unsafe=False, replayable=True, deadline=1.0, limit=1.0)


def _failing(w: Failover, detail: str, outcome: Outcome) -> list[str]:
    tried = []
    for node in w:
        tried.append(node)
        w.failed(detail, outcome, now=0.0)
    return tried
