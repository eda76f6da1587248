"""Where a Redis command's keys are, and how a multi-key command splits.

No I/O and no redis-py: a command is its argument list as a client sends
it (``["MGET", "a", "b"]``).  :func:`command_keys` answers the positions of
its keys, from a table in the shape of Redis's own ``COMMAND INFO`` key
specs (first key, last key, step) with the commands whose key count is an
argument (``EVAL``'s ``numkeys``, ``XREAD``'s ``STREAMS``) written out;
:data:`SPLIT` names the multi-key commands that are split per shard and how
their answers merge.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["READS", "SINGLE", "SPLIT", "Merge", "RoutingError", "command_keys", "command_name", "sub_command"]


class RoutingError(ValueError):
    """A command that cannot be sent to one shard: it has no key, its keys
    lie on several shards and it cannot be split, or chash does not know
    where its keys are.  The message says which and what to do."""


#: How the answers of a split command merge, one of ``"list"`` (in the
#: keys' order: ``MGET``), ``"all"`` (True when every part is: ``MSET``) and
#: ``"sum"`` (of the parts' counts: ``DEL``, ``EXISTS``, ``UNLINK``, ``TOUCH``).
Merge = str

#: Multi-key commands split per shard: (merge, step: 1 for keys, 2 for
#: key-value pairs).
SPLIT: dict[str, tuple[Merge, int]] = {
    "MGET": ("list", 1), "MSET": ("all", 2),
    "DEL": ("sum", 1), "EXISTS": ("sum", 1), "UNLINK": ("sum", 1), "TOUCH": ("sum", 1),
}

def _names(text: str) -> list[str]:
    return text.split()


#: Commands that only read their keys: during a resharding everything
#: else counts as a write.
READS: frozenset[str] = frozenset(_names(
    "GET MGET EXISTS STRLEN GETRANGE SUBSTR GETBIT BITCOUNT BITPOS BITFIELD_RO TTL PTTL EXPIRETIME "
    "PEXPIRETIME TYPE DUMP SORT_RO HGET HMGET HEXISTS HGETALL HKEYS HVALS HLEN HSTRLEN HSCAN "
    "HRANDFIELD HTTL HPTTL HEXPIRETIME HPEXPIRETIME LLEN LRANGE LINDEX LPOS SMEMBERS SISMEMBER "
    "SMISMEMBER SCARD SRANDMEMBER SSCAN SINTER SUNION SDIFF SINTERCARD ZSCORE ZMSCORE ZCARD ZCOUNT "
    "ZRANGE ZREVRANGE ZRANGEBYSCORE ZREVRANGEBYSCORE ZRANGEBYLEX ZREVRANGEBYLEX ZRANK ZREVRANK "
    "ZLEXCOUNT ZSCAN ZRANDMEMBER ZUNION ZINTER ZDIFF ZINTERCARD PFCOUNT XLEN XRANGE XREVRANGE XREAD "
    "XPENDING XINFO GEODIST GEOHASH GEOPOS GEOSEARCH GEORADIUS_RO GEORADIUSBYMEMBER_RO EVAL_RO "
    "EVALSHA_RO FCALL_RO LCS OBJECT MEMORY"))

_ONE = (1, 1, 1)
_TWO = (1, 2, 1)
_ALL = (1, -1, 1)
_ALL_BUT_TIMEOUT = (1, -2, 1)

#: name -> (first, last, step) as in COMMAND INFO: key positions from
#: ``first`` to ``last`` (negative: from the end) every ``step``.
_RANGES: dict[str, tuple[int, int, int]] = {
    **{name: _ONE for name in _names(
        # strings, bits and keys
        "GET SET SETNX SETEX PSETEX GETSET GETDEL GETEX APPEND STRLEN INCR DECR INCRBY DECRBY "
        "INCRBYFLOAT GETRANGE SETRANGE SUBSTR GETBIT SETBIT BITCOUNT BITPOS BITFIELD BITFIELD_RO "
        "EXPIRE PEXPIRE EXPIREAT PEXPIREAT EXPIRETIME PEXPIRETIME TTL PTTL PERSIST TYPE DUMP "
        "RESTORE SORT SORT_RO "
        # hashes
        "HSET HSETNX HGET HMSET HMGET HDEL HEXISTS HGETALL HKEYS HVALS HLEN HINCRBY HINCRBYFLOAT "
        "HSTRLEN HSCAN HRANDFIELD HEXPIRE HPEXPIRE HEXPIREAT HPEXPIREAT HTTL HPTTL HPERSIST "
        "HEXPIRETIME HPEXPIRETIME HGETDEL HGETEX HSETEX "
        # lists, sets, sorted sets
        "LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LLEN LRANGE LINDEX LSET LREM LTRIM LINSERT LPOS "
        "SADD SREM SMEMBERS SISMEMBER SMISMEMBER SCARD SPOP SRANDMEMBER SSCAN "
        "ZADD ZREM ZSCORE ZMSCORE ZINCRBY ZCARD ZCOUNT ZRANGE ZREVRANGE ZRANGEBYSCORE "
        "ZREVRANGEBYSCORE ZRANGEBYLEX ZREVRANGEBYLEX ZRANK ZREVRANK ZREMRANGEBYRANK "
        "ZREMRANGEBYSCORE ZREMRANGEBYLEX ZLEXCOUNT ZPOPMIN ZPOPMAX ZSCAN ZRANDMEMBER "
        # hyperloglog, streams, geo
        "PFADD XADD XLEN XRANGE XREVRANGE XDEL XTRIM XACK XCLAIM XAUTOCLAIM XPENDING XSETID "
        "GEOADD GEODIST GEOHASH GEOPOS GEOSEARCH GEORADIUS GEORADIUS_RO GEORADIUSBYMEMBER "
        "GEORADIUSBYMEMBER_RO")},
    **{name: _TWO for name in
       _names("RENAME RENAMENX SMOVE LMOVE BLMOVE RPOPLPUSH BRPOPLPUSH COPY LCS ZRANGESTORE GEOSEARCHSTORE")},
    **{name: _ALL for name in
       _names("SINTER SUNION SDIFF SINTERSTORE SUNIONSTORE SDIFFSTORE PFCOUNT PFMERGE WATCH")},
    **{name: _ALL_BUT_TIMEOUT for name in _names("BLPOP BRPOP BZPOPMIN BZPOPMAX")},
    "MSETNX": (1, -1, 2),
    "BITOP": (2, -1, 1),
    "OBJECT": (2, 2, 1), "MEMORY": (2, 2, 1), "XGROUP": (2, 2, 1), "XINFO": (2, 2, 1),
    **{name: (1, -1, 1) for name in SPLIT if SPLIT[name][1] == 1},
    "MSET": (1, -1, 2),
}

#: The commands whose one key is argument 1, by the spellings callers use
#: (redis-py's upper case, and lower case): the routing's fast path.
SINGLE: dict[str, str] = {spelling: name for name, span in _RANGES.items() if span == _ONE
                          for spelling in (name, name.lower())}

#: name -> (index of numkeys, keys before it): the keys follow numkeys.
_NUMKEYS: dict[str, tuple[int, int]] = {
    **{name: (2, 0) for name in _names("EVAL EVALSHA EVAL_RO EVALSHA_RO FCALL FCALL_RO")},
    **{name: (2, 1) for name in _names("ZUNIONSTORE ZINTERSTORE ZDIFFSTORE")},
    **{name: (1, 0) for name in _names("ZUNION ZINTER ZDIFF ZINTERCARD SINTERCARD LMPOP ZMPOP")},
    **{name: (2, 0) for name in _names("BLMPOP BZMPOP")},
}

_KEYLESS_HINT = ("send it to each shard's own client (ShardedRedis.clients), or use scan_iter() "
                 "for SCAN")


def command_name(args: Sequence[Any]) -> str:
    """The command's name, upper case (``args[0]``, str or bytes)."""
    if not args:
        raise RoutingError("an empty command")
    head = args[0]
    if isinstance(head, bytes | bytearray | memoryview):
        head = bytes(head).decode("ascii", "replace")
    if not isinstance(head, str):
        raise RoutingError(f"a command's name is str or bytes, not {head!r}")
    return head.split(" ", 1)[0].upper()


def _int_arg(args: Sequence[Any], index: int, name: str) -> int:
    try:
        value = args[index]
        number = int(value.decode() if isinstance(value, bytes) else value)
    except (IndexError, ValueError, TypeError):
        raise RoutingError(f"{name}: the key count (argument {index}) is missing or not a number") from None
    if number < 0 or index + number > len(args) - 1:
        raise RoutingError(f"{name}: {number} keys announced, {len(args) - index - 1} arguments follow")
    return number


def command_keys(args: Sequence[Any]) -> list[int]:
    """The positions of the keys in ``args`` (``args[0]`` the name);
    RoutingError for a command without a key or whose keys chash does not
    know.  A two-word name (``"OBJECT ENCODING"``) counts as its first."""
    name = command_name(args)
    if " " in str(args[0]):   # redis-py's "OBJECT ENCODING", key at 1
        words = len(str(args[0]).split())
        args = [name, *str(args[0]).split()[1:], *args[1:]]
        return [i - (words - 1) for i in command_keys(args)]
    if name in _NUMKEYS:
        at, before = _NUMKEYS[name]
        count = _int_arg(args, at, name)
        keys = list(range(1, 1 + before)) + list(range(at + 1, at + 1 + count))
    elif name in ("XREAD", "XREADGROUP"):
        upper = [a.upper() if isinstance(a, str) else a.upper() if isinstance(a, bytes) else a
                 for a in args]
        marker = "STREAMS" if "STREAMS" in upper else b"STREAMS"
        if marker not in upper:
            raise RoutingError(f"{name} without STREAMS")
        start = upper.index(marker) + 1
        rest = len(args) - start
        if rest < 2 or rest % 2:
            raise RoutingError(f"{name}: STREAMS needs as many ids as keys")
        keys = list(range(start, start + rest // 2))
    elif name in _RANGES:
        first, last, step = _RANGES[name]
        stop = len(args) + last if last < 0 else last
        keys = list(range(first, min(stop, len(args) - 1) + 1, step))
        if name in ("SORT", "SORT_RO"):
            upper = [a.upper() if isinstance(a, str | bytes) else a for a in args]
            for word in ("STORE", b"STORE"):
                if word in upper[2:-1]:
                    keys.append(upper.index(word, 2) + 1)
    else:
        raise RoutingError(f"{name}: no key chash knows of to route it by; {_KEYLESS_HINT}")
    if not keys:
        raise RoutingError(f"{name} has no key here; {_KEYLESS_HINT}")
    return keys


def sub_command(args: Sequence[Any], keep: Sequence[int]) -> tuple[Any, ...]:
    """A split command (:data:`SPLIT`) over only the keys ``keep`` (their
    indexes in its key list): ``MSET a 1 b 2`` kept to [1] is ``MSET b 2``."""
    name = command_name(args)
    positions = command_keys(args)
    step = SPLIT[name][1]
    out: list[Any] = list(args[:positions[0]])
    for index in keep:
        out.extend(args[positions[index]:positions[index] + step])
    return tuple(out)
