"""chash.cli.args: the argument types the subcommands share, and the ring
their ring options build (``add_ring_arguments``, ``build_router``)."""
from __future__ import annotations

import argparse
import math

import pytest

from chash import MAX_VIRTUAL_NODES, ConsistentHashRouter
from chash.cli.args import (
    add_ring_arguments,
    build_router,
    int_between,
    positive_int,
    seconds,
    seconds_between,
    weight_arg,
)


def error(parse: object, text: str) -> str:
    assert callable(parse)
    with pytest.raises(argparse.ArgumentTypeError) as info:
        parse(text)
    return str(info.value)


@pytest.mark.parametrize(("text", "value"), [
    ("1", 1), ("42", 42), ("1000000", 1_000_000), ("1_000_000", 1_000_000), ("1,000", 1000), (" 7 ", 7),
])
def test_positive_int_accepts_grouped_digits(text: str, value: int) -> None:
    assert positive_int(text) == value


@pytest.mark.parametrize(("text", "message"), [
    ("0", "must be >= 1, not 0"),
    ("-3", "must be >= 1, not -3"),
    ("ten", "not a whole number: 'ten'"),
    ("1.5", "not a whole number: '1.5'"),
    ("", "not a whole number: ''"),
])
def test_positive_int_names_the_problem(text: str, message: str) -> None:
    assert error(positive_int, text) == message


def test_int_between_bounds() -> None:
    vnodes = int_between(1, MAX_VIRTUAL_NODES)
    assert vnodes("1") == 1 and vnodes(str(MAX_VIRTUAL_NODES)) == MAX_VIRTUAL_NODES
    assert error(vnodes, "0") == "must be >= 1, not 0"
    assert error(vnodes, "1000001") == "must be <= 1,000,000, not 1,000,001"
    users = int_between(3, 2000)
    assert users("3") == 3 and users("2000") == 2000
    assert error(users, "2") == "must be from 3 to 2000, not 2"
    assert error(users, "2001") == "must be from 3 to 2000, not 2001"
    assert error(int_between(5), "4") == "must be >= 5, not 4"


def test_seconds() -> None:
    assert seconds("0.5") == 0.5 and seconds("30") == 30.0
    for bad in ("0", "-1", "nan", "inf", "-inf"):
        assert error(seconds, bad) == f"must be a positive number of seconds, not {bad}"
    assert error(seconds, "soon") == "not a number of seconds: 'soon'"


def test_seconds_between() -> None:
    duration = seconds_between(2, 600)
    assert duration("2") == 2.0 and duration("600") == 600.0
    for bad in ("1.99", "601", "nan", "inf"):
        assert error(duration, bad) == f"must be from 2 to 600 seconds, not {bad}"
    assert error(duration, "later") == "not a number of seconds: 'later'"


def test_weight_arg() -> None:
    assert weight_arg("a=2") == ("a", 2.0)
    assert weight_arg("host:1=0.5") == ("host:1", 0.5)
    assert weight_arg("a=b=3") == ("a=b", 3.0)
    assert error(weight_arg, "a") == "expected NODE=WEIGHT, not 'a'"
    assert error(weight_arg, "=1") == "expected NODE=WEIGHT, not '=1'"
    assert "the weight is not a number" in error(weight_arg, "a=x")
    for bad in ("0", "-1", "nan", "inf"):
        assert "the weight must be positive" in error(weight_arg, f"a={bad}")
    assert math.isfinite(weight_arg("a=1e300")[1])


# -- the ring options -------------------------------------------------------------


def ring_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="test")
    add_ring_arguments(parser)
    return parser


def test_ring_options_default_to_the_layouts_own() -> None:
    parser = ring_parser()
    args = parser.parse_args([])
    assert (args.vnodes, args.hash, args.layout, args.weight) == (None, None, "python", [])
    router = build_router(parser, args, ["a", "b"])
    reference = ConsistentHashRouter()
    reference.add_service_node("a")
    reference.add_service_node("b")
    assert router.nodes == reference.nodes
    assert (router.virtual_node_count, router.hash, router.layout) == \
        (reference.virtual_node_count, reference.hash, reference.layout)
    assert [router.get_target_node(f"k{i}") for i in range(200)] == \
        [reference.get_target_node(f"k{i}") for i in range(200)]


def test_ring_options_build_the_ring_they_name() -> None:
    parser = ring_parser()
    args = parser.parse_args(["--vnodes", "7", "--hash", "crc32", "--layout", "nginx",
                              "--weight", "b=2", "--weight", "c=3"])
    router = build_router(parser, args, ["a", "b", "c"])
    assert (router.virtual_node_count, router.hash, router.layout) == (7, "crc32", "nginx")
    assert router.weights == {"a": 1.0, "b": 2.0, "c": 3.0}


def test_a_weight_for_an_unknown_node_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    parser = ring_parser()
    args = parser.parse_args(["--weight", "z=2", "--weight", "y=3"])
    with pytest.raises(SystemExit) as info:
        build_router(parser, args, ["a"])
    assert info.value.code == 2
    assert "--weight names unknown node(s): y, z" in capsys.readouterr().err


def test_a_ring_that_cannot_be_built_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    parser = ring_parser()
    args = parser.parse_args(["--vnodes", str(MAX_VIRTUAL_NODES), "--weight", "a=1e9"])
    with pytest.raises(SystemExit) as info:
        build_router(parser, args, ["a"])
    assert info.value.code == 2
    assert "cannot build the ring: " in capsys.readouterr().err
