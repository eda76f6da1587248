"""The gateway's retry policy, ``next_attempt``, without sockets."""

from __future__ import annotations

import pytest

from chash.gateway.retry import IDEMPOTENT_METHODS, Outcome, next_attempt

NODES = ("a", "b", "c")


@pytest.mark.parametrize("method", ["GET", "POST", "PATCH", "PUT"])
def test_undelivered_requests_go_to_the_next_node_whatever_the_method(method: str) -> None:
    assert next_attempt(NODES, 0, method, Outcome.NOT_DELIVERED) == 1
    assert next_attempt(NODES, 1, method, Outcome.NOT_DELIVERED) == 2
    # Even a body already streamed elsewhere: nothing was sent to this node.
    assert next_attempt(NODES, 0, method, Outcome.NOT_DELIVERED, replayable=False) == 1


@pytest.mark.parametrize("outcome", [Outcome.FAILED, Outcome.RETRY_STATUS])
def test_maybe_delivered_requests_are_retried_only_when_safe(outcome: Outcome) -> None:
    for method in IDEMPOTENT_METHODS:
        assert next_attempt(NODES, 0, method, outcome) == 1
        assert next_attempt(NODES, 0, method, outcome, replayable=False) is None
    for method in ("POST", "PATCH", "CONNECT"):
        assert next_attempt(NODES, 0, method, outcome) is None
        assert next_attempt(NODES, 0, method, outcome, retry_unsafe=True) == 1
        assert next_attempt(NODES, 0, method, outcome, retry_unsafe=True,
                            replayable=False) is None


@pytest.mark.parametrize("outcome", list(Outcome))
def test_the_last_node_and_an_answer_end_the_request(outcome: Outcome) -> None:
    assert next_attempt(NODES, 2, "GET", outcome, retry_unsafe=True) is None
    assert next_attempt(("a",), 0, "GET", outcome) is None
    assert next_attempt((), 0, "GET", outcome) is None
    assert next_attempt(NODES, 0, "GET", Outcome.ANSWERED) is None


def test_every_combination_matches_the_documented_table() -> None:
    """The whole table, written the other way round."""
    for index in range(len(NODES)):
        for method in ("GET", "HEAD", "PUT", "DELETE", "POST", "PATCH"):
            for outcome in Outcome:
                for unsafe in (False, True):
                    for replayable in (False, True):
                        got = next_attempt(NODES, index, method, outcome,
                                           retry_unsafe=unsafe, replayable=replayable)
                        last = index == len(NODES) - 1
                        if outcome is Outcome.ANSWERED or last:
                            want = None
                        elif outcome is Outcome.NOT_DELIVERED or (
                                replayable and (unsafe or method in IDEMPOTENT_METHODS)):
                            want = index + 1
                        else:
                            want = None
                        assert got == want, (index, method, outcome, unsafe, replayable)
