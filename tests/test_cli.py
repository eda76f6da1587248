"""The ``chash`` command as a whole: shared argument types, help, version,
the output's wording."""
from __future__ import annotations

import argparse
import math

import pytest

from chash import MAX_VIRTUAL_NODES
from chash._cli_args import int_between, plural, positive_int, seconds, seconds_between, weight_arg
from chash.cli import SUBCOMMANDS, build_parser, main


def error(parse: object, text: str) -> str:
    assert callable(parse)
    with pytest.raises(argparse.ArgumentTypeError) as info:
        parse(text)
    return str(info.value)


# -- the argument types ---------------------------------------------------------


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


@pytest.mark.parametrize(("count", "text"), [
    (0, "0 nodes"), (1, "1 node"), (2, "2 nodes"), (1000, "1,000 nodes"),
])
def test_plural(count: int, text: str) -> None:
    assert plural(count, "node") == text


def test_plural_irregular() -> None:
    assert plural(1, "virtual node per", "virtual nodes per") == "1 virtual node per"
    assert plural(2, "virtual node per", "virtual nodes per") == "2 virtual nodes per"


# -- one type for one kind of argument -----------------------------------------------


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def test_every_subcommand_is_registered() -> None:
    assert set(_actions(build_parser())) == set(SUBCOMMANDS)


@pytest.mark.parametrize(("command", "option"), [
    ("route", "-n"), ("gateway", "--attempts"), ("gateway", "--fall"), ("gateway", "--rise"),
    ("simulate", "--keys"), ("simulate", "--maglev-size"), ("spread", "--keys"), ("spread", "--vnodes"),
])
def test_positive_counts_share_one_type(command: str, option: str) -> None:
    sub = _actions(build_parser())[command]
    (action,) = [a for a in sub._actions if option in a.option_strings]
    assert action.type is positive_int


@pytest.mark.parametrize(("argv", "message"), [
    (["spread", "--keys", "0"], "argument --keys: must be >= 1, not 0"),
    (["spread", "--keys", "many"], "argument --keys: not a whole number: 'many'"),
    (["spread", "--vnodes", "-2"], "argument --vnodes: must be >= 1, not -2"),
    (["simulate", "--keys", "0"], "argument --keys: must be >= 1, not 0"),
    (["gateway", "--backend", "127.0.0.1:1", "--attempts", "0"], "argument --attempts: must be >= 1, not 0"),
    (["gateway", "--backend", "127.0.0.1:1", "--health-interval", "0"],
     "argument --health-interval: must be a positive number of seconds, not 0"),
    (["route", "k", "--nodes", "a", "--vnodes", "2000000"], "argument --vnodes: must be <= 1,000,000"),
])
def test_bad_counts_exit_2_naming_the_option(argv: list[str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.out == ""
