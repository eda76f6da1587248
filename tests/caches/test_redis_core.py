"""chash.redis's core without I/O: where commands' keys are, hash tags as
twemproxy reads them, node lines, the plans of split commands, ejection."""
from __future__ import annotations

from typing import Any

import pytest

from chash.compat import twemproxy_pool, twemproxy_servers
from chash.redis.commands import RoutingError, command_keys
from chash.redis.core import Ejection, Shard, Shards, encode_key, hash_part, merge, parse_node

NODES = ["127.0.0.1:7001:1", "127.0.0.1:7002:2 cache-b", "127.0.0.1:7003:1"]


def shards(**kwargs: Any) -> Shards:
    return Shards(NODES, encode=encode_key, **kwargs)


@pytest.mark.parametrize(("args", "keys"), [
    (["GET", "a"], [1]), (["set", "a", "v", "EX", 5], [1]), ([b"HSET", "h", "f", "v"], [1]),
    (["MGET", "a", "b", "c"], [1, 2, 3]), (["MSET", "a", 1, "b", 2], [1, 3]),
    (["DEL", "a", "b"], [1, 2]), (["RENAME", "a", "b"], [1, 2]), (["BLPOP", "a", "b", 0], [1, 2]),
    (["EVAL", "return 1", 2, "a", "b", "arg"], [3, 4]), (["EVALSHA", "abc", "1", "k"], [3]),
    (["ZUNIONSTORE", "d", 2, "a", "b", "WEIGHTS", 1, 2], [1, 3, 4]),
    (["XREAD", "COUNT", 2, "STREAMS", "s1", "s2", "0", "0"], [4, 5]),
    (["SORT", "a", "STORE", "d"], [1, 3]), (["OBJECT ENCODING", "a"], [1]),
    (["BITOP", "AND", "d", "a", "b"], [2, 3, 4]), (["MSETNX", "a", 1, "b", 2], [1, 3]),
])
def test_command_keys(args: list[Any], keys: list[int]) -> None:
    assert command_keys(args) == keys


@pytest.mark.parametrize(("args", "message"), [
    (["PING"], "no key chash knows"), (["FLUSHALL"], "no key chash knows"), ([], "empty command"),
    (["EVAL", "return 1", 0], "has no key"), (["EVAL", "s", 3, "a"], "3 keys announced"),
    (["EVAL", "s", "x", "a"], "not a number"), (["XREAD", "STREAMS", "a"], "as many ids"),
    ([42], "str or bytes"),
])
def test_commands_that_cannot_be_routed(args: list[Any], message: str) -> None:
    with pytest.raises(RoutingError, match=message):
        command_keys(args)


@pytest.mark.parametrize(("key", "part"), [
    (b"user:{42}:name", b"42"), (b"{a}{b}", b"a"), (b"{}x", b"{}x"), (b"x{", b"x{"),
    (b"a}b{c}", b"c"), (b"no tag", b"no tag"), (b"{{x}}", b"{x"),
])
def test_hash_tags_as_twemproxy_reads_them(key: bytes, part: bytes) -> None:
    assert hash_part(key, b"{}") == part
    assert hash_part(key, None) == key


def test_node_lines_and_their_names() -> None:
    assert parse_node("10.0.0.1:6379:2") == Shard("10.0.0.1:6379", "10.0.0.1", 6379, 2)
    assert parse_node("10.0.0.1:11211:1") == Shard("10.0.0.1", "10.0.0.1", 11211, 1)
    assert parse_node("10.0.0.1:6379:1 cache-a").name == "cache-a"
    assert parse_node("10.0.0.1:6379") == Shard("10.0.0.1:6379", "10.0.0.1", 6379, 1)
    assert parse_node("/tmp/r.sock:3 s").path == "/tmp/r.sock"
    for bad in ("nonsense", "h:0:1", "h:1:0", "h:70000:1"):
        with pytest.raises(ValueError):
            parse_node(bad)
    with pytest.raises(TypeError):
        parse_node(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="two nodes are named"):
        Shards(["a:1:1 x", "b:2:1 x"], encode=encode_key)
    with pytest.raises(ValueError, match="at least one node"):
        Shards([], encode=encode_key)
    with pytest.raises(ValueError, match="hash_tag is two characters"):
        shards(hash_tag="{")


def test_the_ring_is_twemproxys() -> None:
    yaml = "p:\n  hash: md5\n  distribution: ketama\n  servers:\n" + "".join(f"   - {n}\n" for n in NODES)
    ours = Shards(twemproxy_servers(yaml, "p"), encode=encode_key)
    assert ours.router.hash_ring == twemproxy_pool(yaml, "p").hash_ring
    assert shards().router.hash_ring == ours.router.hash_ring
    keys = [f"k{i}" for i in range(2000)]
    assert ours.router.get_target_nodes(keys) == twemproxy_pool(yaml, "p").get_target_nodes(keys)


def test_split_commands_and_their_merge() -> None:
    core = shards()
    keys = [f"k{i}" for i in range(30)]
    plan = core.plan(["MGET", *keys])
    assert plan.merge == "list" and len(plan.parts) == 3
    assert sorted(i for part in plan.parts for i in part.keys) == list(range(30))
    for part in plan.parts:
        assert all(core.shard_of(a) == part.shard for a in part.args[1:])
    answers = [[f"v{i}" for i in part.keys] for part in plan.parts]
    assert merge(plan, answers) == [f"v{i}" for i in range(30)]
    mset = core.plan(["MSET", *[x for k in keys for x in (k, f"v-{k}")]])
    for part in mset.parts:
        assert [part.args[i] for i in range(2, len(part.args), 2)] == [f"v-{a}" for a in part.args[1::2]]
    assert merge(mset, [True] * len(mset.parts)) is True
    assert merge(core.plan(["DEL", *keys]), [1, 2, 3]) == 6
    error = ValueError("x")
    assert merge(plan, [error, [], []]) is error


def test_multi_key_commands_need_a_shared_tag() -> None:
    with pytest.raises(RoutingError, match="share a hash tag"):
        shards().plan(["RENAME", "a", "b"])
    tagged = shards(hash_tag="{}")
    plan = tagged.plan(["RENAME", "{u}a", "{u}b"])
    assert len(plan.parts) == 1 and plan.parts[0].shard == tagged.shard_of("u")
    with pytest.raises(RoutingError, match="share a hash tag"):
        tagged.plan(["EVAL", "s", 2, "{u}a", "{v}b"])
    mget = tagged.plan(["MGET", "{u}a", "{u}b", "{u}c"])
    assert len(mget.parts) == 1 and mget.merge is None


def test_ejection_as_twemproxys() -> None:
    core = shards(ejection=Ejection(True, 2, 1000))
    victim = core.shard_of("k")
    assert not core.failed(victim, 10.0)
    core.succeeded(victim)             # a success resets the count
    assert not core.failed(victim, 10.0)
    assert core.failed(victim, 10.5)
    assert victim not in core.router.nodes and core.ejected == {victim: 11.5}
    core.refresh(11.4)
    assert victim not in core.router.nodes
    core.refresh(11.5)
    assert victim in core.router.nodes and core.shard_of("k") == victim
    assert not core.failed(victim, 12.0)   # the count starts over
    off = shards()
    for _ in range(5):
        assert not off.failed(victim, 1.0)
    with pytest.raises(ValueError):
        Ejection(True, 0, 10)
    with pytest.raises(ValueError):
        Ejection(True, 1, 0)
