"""Tests of chash.health.membership: LocalMembership takes nodes out of a
router and puts them back with their weights, leaving alone what it does
not own."""

from __future__ import annotations

import pytest

from _support.health_checks import owners
from chash import ConsistentHashRouter
from chash.health.membership import LocalMembership


def test_local_membership_takes_out_and_restores_the_weight() -> None:
    router = ConsistentHashRouter(100)
    router.add_service_node("a", 1.0)
    router.add_service_node("b", 2.5)
    membership = LocalMembership(router)
    before = owners(router)
    membership.mark_down("b", "HTTP 500")
    membership.mark_down("b", "HTTP 500")  # idempotent
    assert router.nodes == ["a"]
    assert membership.taken_out() == {"b": 2.5}
    assert membership.watched_nodes() == {"a": 1.0, "b": 2.5}
    membership.mark_up("b")
    membership.mark_up("b")
    assert router.weights == {"a": 1.0, "b": 2.5}
    assert membership.taken_out() == {}
    assert owners(router) == before


def test_local_membership_ignores_what_it_does_not_own() -> None:
    router = ConsistentHashRouter(100)
    router.add_service_node("a", 1.0)
    membership = LocalMembership(router)
    membership.mark_down("ghost", "x")
    membership.mark_up("ghost")
    membership.mark_up("a")  # in service already: weight untouched
    assert router.weights == {"a": 1.0}
    assert membership.watched_nodes() == {"a": 1.0}


def test_local_membership_forget_works_in_every_state() -> None:
    router = ConsistentHashRouter(100)
    for node in "abc":
        router.add_service_node(node, 1.0)
    membership = LocalMembership(router)
    membership.mark_down("b", "x")
    with pytest.raises(KeyError):  # taken out: the router no longer has it
        router.remove_service_node("b")
    assert membership.forget("b") is True
    assert membership.forget("c") is True
    assert membership.forget("zzz") is False
    membership.mark_up("b")
    assert router.nodes == ["a"]
    assert membership.watched_nodes() == {"a": 1.0}


def test_local_membership_operator_weight_wins_over_the_remembered_one() -> None:
    router = ConsistentHashRouter(100)
    router.add_service_node("a", 1.0)
    membership = LocalMembership(router)
    membership.mark_down("a", "x")
    router.add_service_node("a", 3.0)  # the operator puts it back
    assert membership.watched_nodes() == {"a": 3.0}
    membership.mark_down("a", "x")  # still failing: out again, with 3.0
    assert membership.taken_out() == {"a": 3.0}
    membership.mark_up("a")
    assert router.weights == {"a": 3.0}


def test_a_node_taken_out_comes_back_in_its_zone() -> None:
    from chash.zones import ZonedRouter

    router = ConsistentHashRouter()
    for node, zone in (("a", "eu"), ("b", "eu"), ("c", "us")):
        router.add_service_node(node, 2.0, zone=zone)
    membership = LocalMembership(router)
    membership.mark_down("a", "refused")
    assert "a" not in router.zones
    membership.mark_up("a")
    assert router.zones == {"a": "eu", "b": "eu", "c": "us"} and router.weights["a"] == 2.0
    assert ZonedRouter(router, "eu").local_nodes == ["b", "a"]
    membership.mark_down("c", "refused")
    assert membership.forget("c")
    router.add_service_node("c")  # the operator's own add: no zone remembered
    assert "c" not in router.zones
