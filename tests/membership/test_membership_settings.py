"""``MembershipSettings``: the drivers' keywords, validated once.

The drivers' public keywords and their defaults must be the settings'
fields, and a bad value must fail the same way whether it is given to the
settings or to a driver (test_membership.py checks the drivers).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Any

import pytest

from chash.membership import AsyncEtcdMembership, AsyncRedisMembership, EtcdMembership, RedisMembership
from chash.membership.settings import QUORUMS, MembershipSettings, default_reporter


@pytest.mark.parametrize("driver", [RedisMembership, AsyncRedisMembership])
def test_the_drivers_keywords_are_the_settings(driver: type) -> None:
    parameters = list(inspect.signature(driver.__init__).parameters.values())
    assert [p.name for p in parameters[:3]] == ["self", "router", "client"]
    keywords = {p.name: p.default for p in parameters[3:]}
    fields = {f.name: f.default for f in dataclasses.fields(MembershipSettings)}
    store = {"min_replicas": None, "replica_timeout": 0.5}  # the Redis store's own
    assert keywords == {**fields, **store}
    assert all(p.kind is p.KEYWORD_ONLY for p in parameters[4:])  # all but name


@pytest.mark.parametrize("driver", [EtcdMembership, AsyncEtcdMembership])
def test_the_etcd_drivers_keywords_are_the_settings_and_the_clients(driver: type) -> None:
    parameters = list(inspect.signature(driver.__init__).parameters.values())
    assert [p.name for p in parameters[:3]] == ["self", "router", "endpoints"]
    keywords = {p.name: p.default for p in parameters[3:]}
    fields = {f.name: f.default for f in dataclasses.fields(MembershipSettings)}
    client = {"username": None, "password": None, "timeout": 2.0}
    assert keywords == {**fields, **client}
    assert all(p.kind is p.KEYWORD_ONLY for p in parameters[4:])  # all but name


def test_defaults_and_accepted_values() -> None:
    settings = MembershipSettings()
    assert (settings.name, settings.quorum, settings.vote_ttl, settings.resync_interval,
            settings.reporter, settings.prefix, settings.bootstrap) \
        == ("default", "majority", 30.0, 5.0, None, "chash", False)
    for quorum in (*QUORUMS, 1, 7):
        assert MembershipSettings(quorum=quorum).quorum == quorum
    assert MembershipSettings(vote_ttl=0.01, resync_interval=1).resync_interval == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.name = "other"  # type: ignore[misc]


def test_default_reporters_differ() -> None:
    first, second = default_reporter(), default_reporter()
    assert first != second
    assert re.fullmatch(r".+:\d+:[0-9a-f]{8}", first)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"name": ""}, ValueError, "name must be a non-empty str without braces, not ''"),
    ({"name": "a{b}"}, ValueError, "name must be a non-empty str without braces"),
    ({"name": 3}, ValueError, "name must be a non-empty str without braces, not 3"),
    ({"prefix": "x}"}, ValueError, "prefix must be a non-empty str without braces"),
    ({"quorum": "most"}, ValueError, "quorum must be 'majority', 'any', 'all' or an int >= 1"),
    ({"quorum": 0}, ValueError, "not 0"),
    ({"quorum": True}, ValueError, "not True"),
    ({"vote_ttl": 0}, ValueError, "vote_ttl must be a positive number of seconds, not 0"),
    ({"vote_ttl": float("nan")}, ValueError, "vote_ttl must be a positive number"),
    ({"vote_ttl": True}, ValueError, "vote_ttl must be a positive number"),
    ({"vote_ttl": 0.001}, ValueError, "vote_ttl must be at least 0.01 seconds, not 0.001"),
    ({"resync_interval": -1}, ValueError, "resync_interval must be a positive number"),
    ({"resync_interval": "5"}, ValueError, "resync_interval must be a positive number"),
    ({"reporter": ""}, ValueError, "reporter must be a non-empty str, not ''"),
    ({"reporter": 5}, ValueError, "reporter must be a non-empty str, not 5"),
    ({"bootstrap": 1}, TypeError, "bootstrap must be a bool, not 1"),
])
def test_bad_values(kwargs: dict[str, Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=re.escape(message)):
        MembershipSettings(**kwargs)


def test_the_shared_config_reads_back_what_an_instance_writes() -> None:
    from chash import ConsistentHashRouter
    from chash.membership.core import MembershipCore
    from chash.membership.settings import MembershipSettings, SharedConfig

    router = ConsistentHashRouter(40, hash="md5", layout="ketama")
    core = MembershipCore(router, MembershipSettings(quorum=2, vote_ttl=12.5))
    shared = SharedConfig.parse(core.config)
    assert shared == SharedConfig("ketama", "md5", 40, "2", 12.5)
    assert shared.quorum_arg() == 2 and SharedConfig.parse(
        core.config.replace("quorum=2", "quorum=majority")).quorum_arg() == "majority"
    made = shared.router()
    assert (made.layout, made.hash, made.virtual_node_count) == ("ketama", "md5", 40)
    # the same settings again: a membership of that router writes the same text
    assert MembershipCore(made, MembershipSettings(quorum=2, vote_ttl=12.5)).config == core.config


@pytest.mark.parametrize("text, message", [
    ("layout=python hash=md5", "not a chash ring"),
    ("layout=python hash=md5 virtual_node_count=x quorum=majority vote_ttl=30",
     "not a chash ring"),
    ("layout=python hash=md5 virtual_node_count=160 quorum=majority vote_ttl=-1",
     "not a chash ring"),
])
def test_settings_that_are_not_a_ring_are_refused(text: str, message: str) -> None:
    from chash.membership.settings import SharedConfig

    with pytest.raises(ValueError, match=message):
        SharedConfig.parse(text)


def test_a_router_this_build_cannot_make_is_refused() -> None:
    from chash.membership.settings import SharedConfig

    with pytest.raises(ValueError, match="application's own"):
        SharedConfig("python", "app.hashes.mine", 160, "majority", 30.0).router()
    with pytest.raises(ValueError, match="make no router"):
        SharedConfig("python", "md5", 0, "majority", 30.0).router()
