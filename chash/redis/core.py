"""The sharded client's core, no I/O: the shards, the ring of the live
ones, hash tags, twemproxy's ejection, and each command's plan.

Both faces (``chash.redis.client`` and ``chash.redis.asyncio``) hold one
:class:`Shards` and only carry its answers out: :meth:`Shards.plan` turns
one command into the parts each shard runs and :func:`merge` turns the
parts' answers back into the command's; :meth:`Shards.failed` and
:meth:`Shards.succeeded` feed the ejection, with the time passed in.

Placement is twemproxy's: servers named by :func:`chash.compat.twemproxy_id`
(their name, else ``host:port``), the ring built from the live servers in
twemproxy's order (names sorted, shorter first), a key hashed whole or, with
a ``hash_tag`` such as ``"{}"``, only the part between the tag's two
characters when that part is not empty.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from chash._chash import ConsistentHashRouter
from chash.compat import TwemproxyServer, twemproxy_id
from chash.redis.commands import SINGLE, SPLIT, Merge, RoutingError, command_keys, command_name

if TYPE_CHECKING:
    from chash._chash import LayoutName

__all__ = ["Ejection", "Part", "Plan", "Shard", "Shards", "encode_key", "hash_part", "merge", "parse_node"]

Encode = Callable[[Any], bytes]

_NODE = re.compile(r"^(?P<host>\S+?):(?P<port>\d+)(?::(?P<weight>\d+))?(?:\s+(?P<name>\S+))?$")
_SOCKET = re.compile(r"^(?P<path>/\S+?):(?P<weight>\d+)(?:\s+(?P<name>\S+))?$")


@dataclass(frozen=True)
class Shard:
    """One Redis server of the pool: its ring name, address and weight
    (``path`` for a unix socket, then ``port`` is 0)."""

    name: str
    host: str
    port: int
    weight: int = 1
    path: str | None = None

    @property
    def address(self) -> str:
        """``host:port``, or the socket's path."""
        return self.path or f"{self.host}:{self.port}"


def parse_node(node: str | TwemproxyServer) -> Shard:
    """A shard from a twemproxy ``servers:`` line (``"HOST:PORT:WEIGHT
    [NAME]"``, ``"/path/to/socket:WEIGHT [NAME]"``; ``"HOST:PORT"`` is
    weight 1) or from a :class:`chash.compat.TwemproxyServer`."""
    if isinstance(node, TwemproxyServer):
        if node.host.startswith("/"):
            return Shard(node.node_id, "", 0, node.weight, node.host)
        return Shard(node.node_id, node.host, node.port, node.weight)
    if not isinstance(node, str):
        raise TypeError(f"a node is a 'HOST:PORT:WEIGHT [NAME]' string or a TwemproxyServer, not {node!r}")
    text = node.strip()
    match = None if text.startswith("/") else _NODE.match(text)
    if match:
        port = int(match["port"])
        if not 0 < port < 65536:
            raise ValueError(f"{node!r}: invalid port {port}")
        weight = int(match["weight"] or 1)
        host = match["host"]
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        name = twemproxy_id(match["host"], port, match["name"])
        shard = Shard(name, host, port, weight)
    else:
        sock = _SOCKET.match(text)
        if not sock:
            raise ValueError(f"{node!r}: expected 'HOST:PORT:WEIGHT [NAME]' (twemproxy's servers: line)")
        weight = int(sock["weight"])
        shard = Shard(sock["name"] or f"{sock['path']}:", "", 0, weight, sock["path"])
    if shard.weight < 1:
        raise ValueError(f"{node!r}: the weight must be >= 1")
    return shard


def encode_key(value: Any, encoding: str = "utf-8", errors: str = "strict") -> bytes:
    """A key's bytes as redis-py sends them: bytes as they are, str
    encoded, int and float by ``repr``; TypeError for anything else."""
    if type(value) is str:
        return value.encode(encoding, errors)
    if type(value) is bytes:
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise TypeError(f"a key is bytes, str, int or float, not {type(value).__name__}")
    if isinstance(value, str):
        return value.encode(encoding, errors)
    return repr(value).encode()


def hash_part(key: bytes, tag: bytes | None) -> bytes:
    """What the ring hashes of ``key``: with ``tag`` (two bytes, such as
    ``b"{}"``), the part between the first tag[0] and the next tag[1] when
    it is not empty, as twemproxy does; else the whole key."""
    if tag is None:
        return key
    start = key.find(tag[:1])
    if start < 0:
        return key
    end = key.find(tag[1:2], start + 1)
    if end <= start + 1:
        return key
    return key[start + 1:end]


@dataclass
class Ejection:
    """twemproxy's ``auto_eject_hosts``: after ``server_failure_limit``
    consecutive failures a shard leaves the ring for
    ``server_retry_timeout`` milliseconds, then is put back and tried again
    (its count starting over); a success resets the count."""

    auto_eject_hosts: bool = False
    server_failure_limit: int = 2
    server_retry_timeout: int = 30_000

    def __post_init__(self) -> None:
        for what, value, low in (("server_failure_limit", self.server_failure_limit, 1),
                                 ("server_retry_timeout", self.server_retry_timeout, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{what} must be an int >= {low}, not {value!r}")
        if not isinstance(self.auto_eject_hosts, bool):
            raise TypeError(f"auto_eject_hosts must be True or False, not {self.auto_eject_hosts!r}")


class Part(NamedTuple):
    """One shard's share of a command: the arguments it runs, and which of
    the command's keys (their indexes in its key list) they carry."""

    shard: str
    args: tuple[Any, ...]
    keys: tuple[int, ...]


class Plan(NamedTuple):
    """A command as the shards run it: its parts, and how their answers
    merge (None: one part, its answer is the command's)."""

    name: str
    parts: tuple[Part, ...]
    merge: Merge | None
    size: int = 1


def merge(plan: Plan, answers: Sequence[Any]) -> Any:
    """The command's answer from its parts' answers (in the plan's order);
    an exception among them is the command's answer, returned, not raised."""
    for answer in answers:
        if isinstance(answer, BaseException):
            return answer
    if plan.merge is None:
        return answers[0]
    if plan.merge == "sum":
        return sum(int(a) for a in answers)
    if plan.merge == "all":
        return all(bool(a) for a in answers)
    out: list[Any] = [None] * plan.size
    for part, answer in zip(plan.parts, answers, strict=True):
        for index, value in zip(part.keys, answer, strict=True):
            out[index] = value
    return out


class Shards:
    """The shards, the ring of the live ones and the routing of commands.

    ``locate``, when set, overrides the ring: a function from a key's hash
    part to the shard holding its data (a resharding sets it).  Not
    thread-safe on its own: the faces call it under their lock.
    """

    def __init__(self, nodes: Iterable[str | TwemproxyServer], *, layout: LayoutName = "ketama",
                 hash_tag: str | None = None, ejection: Ejection | None = None,
                 encode: Encode) -> None:
        shards = [parse_node(node) for node in nodes]
        if not shards:
            raise ValueError("ShardedRedis needs at least one node")
        seen: dict[str, Shard] = {}
        for shard in shards:
            if shard.name in seen:
                raise ValueError(f"two nodes are named {shard.name!r}: {seen[shard.name].address} "
                                 f"and {shard.address}")
            seen[shard.name] = shard
        # twemproxy's order: ring names sorted, shorter first, then bytewise.
        shards.sort(key=lambda s: (len(s.name.encode("utf-8")), s.name.encode("utf-8")))
        self.shards: dict[str, Shard] = {s.name: s for s in shards}
        if hash_tag is not None and (not isinstance(hash_tag, str) or len(hash_tag.encode("utf-8")) != 2):
            raise ValueError(f"hash_tag is two characters, such as '{{}}', not {hash_tag!r}")
        self.hash_tag = hash_tag
        self._tag = None if hash_tag is None else hash_tag.encode("utf-8")
        self.layout: LayoutName = layout
        ConsistentHashRouter(layout=layout)   # the router's own error for a bad layout
        self.ejection = ejection or Ejection()
        self.encode = encode
        self._failures: dict[str, int] = {}
        self._ejected: dict[str, float] = {}   # shard -> when it is tried again
        self._locate: Callable[[bytes], str | None] | None = None
        #: Counts the changes of placement (ring rebuilt, ``locate`` set): a
        #: plan made at another generation is made again.
        self.generation = 0
        self.router = self._build()

    @property
    def locate(self) -> Callable[[bytes], str | None] | None:
        """When set, where a hash part's data is, instead of the ring (a
        resharding sets it)."""
        return self._locate

    @locate.setter
    def locate(self, value: Callable[[bytes], str | None] | None) -> None:
        self._locate = value
        self.generation += 1

    # -- the ring ------------------------------------------------------------------

    def _build(self) -> ConsistentHashRouter:
        self.generation += 1
        router = ConsistentHashRouter(layout=self.layout)
        for shard in self.shards.values():
            if shard.name not in self._ejected:
                router.add_service_node(shard.name, shard.weight)
        return router

    @property
    def ejected_any(self) -> bool:
        """Whether a shard is ejected now."""
        return bool(self._ejected)

    @property
    def ejected(self) -> dict[str, float]:
        """The ejected shards and when (the faces' clock) each comes back."""
        return dict(self._ejected)

    def refresh(self, now: float) -> None:
        """Puts back the ejected shards whose retry time has come."""
        if not self._ejected:
            return
        back = [name for name, when in self._ejected.items() if now >= when]
        if back:
            for name in back:
                del self._ejected[name]
                self._failures[name] = 0
            self.router = self._build()

    def failed(self, shard: str, now: float) -> bool:
        """Counts a connection failure or timeout of ``shard``; True when it
        was ejected by it."""
        if not self.ejection.auto_eject_hosts or shard in self._ejected:
            return False
        count = self._failures.get(shard, 0) + 1
        self._failures[shard] = count
        if count < self.ejection.server_failure_limit:
            return False
        self._failures[shard] = 0
        self._ejected[shard] = now + self.ejection.server_retry_timeout / 1000.0
        self.router = self._build()
        return True

    def succeeded(self, shard: str) -> None:
        """A shard answered: its count of consecutive failures starts over."""
        if self._failures.get(shard):
            self._failures[shard] = 0

    def failing(self, shard: str) -> bool:
        """Whether ``shard`` has failures counted (a success must reset them)."""
        return bool(self._failures.get(shard))

    # -- keys ----------------------------------------------------------------------

    def part_of(self, key: Any) -> bytes:
        """What the ring hashes of ``key`` (encoded as redis-py sends it)."""
        return hash_part(self.encode(key), self._tag)

    def owner(self, part: bytes) -> str:
        """The shard serving a hash part now; RoutingError when none is live."""
        locate = self._locate
        shard = locate(part) if locate is not None else self.router.get_target_node(part)
        if shard is None:
            raise RoutingError("every shard is ejected: no shard to send the command to")
        return shard

    def shard_of(self, key: Any) -> str:
        """The shard serving ``key`` now."""
        return self.owner(self.part_of(key))

    # -- commands ------------------------------------------------------------------

    def single_owner(self, args: Sequence[Any]) -> str | None:
        """The shard of a command whose one key is argument 1 (``GET``,
        ``SET``, ``HSET``, ...), when no shard is ejected; None otherwise
        (then :meth:`plan`).  Reads only what a lock-free reader may: the
        ring is replaced whole, never changed in place."""
        if self._ejected or len(args) < 2 or args[0] not in SINGLE:
            return None
        part = self.encode(args[1])
        if self._tag is not None:
            part = hash_part(part, self._tag)
        locate = self._locate
        shard = locate(part) if locate is not None else self.router.get_target_node(part)
        if shard is None:
            raise RoutingError("every shard is ejected: no shard to send the command to")
        return shard

    def plan(self, args: Sequence[Any]) -> Plan:
        """The parts of a command; RoutingError when it cannot be routed
        (no key; keys on several shards of a command that does not split,
        unless they share a hash tag)."""
        head = args[0] if args else None
        name = SINGLE.get(head) if isinstance(head, str) else None
        if name is not None and len(args) >= 2:     # the common case: one key, at 1
            return Plan(name, (Part(self.owner(self.part_of(args[1])), tuple(args), (0,)),), None, 1)
        name = command_name(args)
        positions = command_keys(args)
        parts = [self.part_of(args[i]) for i in positions]
        if name in SPLIT and len(positions) > 1:
            kind, step = SPLIT[name]
            groups: dict[str, list[int]] = {}
            for index, part in enumerate(parts):
                groups.setdefault(self.owner(part), []).append(index)
            if len(groups) > 1:
                head = tuple(args[:positions[0]])
                plans = []
                for shard, indexes in groups.items():
                    sub: list[Any] = []
                    for index in indexes:
                        sub.extend(args[positions[index]:positions[index] + step])
                    plans.append(Part(shard, head + tuple(sub), tuple(indexes)))
                return Plan(name, tuple(plans), kind, len(positions))
            return Plan(name, (Part(next(iter(groups)), tuple(args), tuple(range(len(parts)))),),
                        None, len(positions))
        if len(set(parts)) > 1:
            owners = sorted({self.owner(p) for p in parts})
            where = (f"shards {', '.join(owners)}" if len(owners) > 1 else
                     f"one shard now ({owners[0]}), but not for every ring")
            raise RoutingError(
                f"{name}: its keys lie on {where}; a command over several keys needs them to "
                "share a hash tag" + ("" if self.hash_tag else " (ShardedRedis(..., hash_tag='{}'))"))
        return Plan(name, (Part(self.owner(parts[0]), tuple(args), tuple(range(len(parts)))),),
                    None, len(parts))

    def transaction_shard(self, plans: Sequence[Plan]) -> str | None:
        """The one shard a transaction runs on: every key of every command
        must share a hash part.  None for an empty transaction."""
        shared: set[bytes] = set()
        for plan in plans:
            for part in plan.parts:
                args = part.args
                shared.update(self.part_of(args[i]) for i in command_keys(args))
        if not shared:
            return None
        if len(shared) > 1:
            raise RoutingError("a transaction's keys must share a hash tag: they are sent to one "
                               "shard" + ("" if self.hash_tag else " (ShardedRedis(..., hash_tag='{}'))"))
        return self.owner(shared.pop())


#: A pipeline's command as planned: its plan, or for a command whose one
#: key is argument 1 just its shard (no plan made).
Entry = Plan | str
#: One part of a pipeline: (command index, part number, the part's arguments).
Item = tuple[int, int, Sequence[Any]]
#: Where each part of a pipeline's commands goes: shard -> items, in order.
Groups = dict[str, list[Item]]


def pipeline_groups(entries: Sequence[Entry], commands: Sequence[Sequence[Any]],
                    transaction_shard: str | None = None) -> Groups:
    """Each shard's share of a pipeline, in the commands' order; with
    ``transaction_shard``, every command whole on that one shard."""
    if transaction_shard is not None:
        return {transaction_shard: [(i, 0, args) for i, args in enumerate(commands)]}
    groups: Groups = {}
    for index, entry in enumerate(entries):
        if isinstance(entry, str):
            groups.setdefault(entry, []).append((index, 0, commands[index]))
        else:
            for number, part in enumerate(entry.parts):
                groups.setdefault(part.shard, []).append((index, number, part.args))
    return groups


def pipeline_results(entries: Sequence[Entry], groups: Groups,
                     outcomes: Sequence[Sequence[Any] | BaseException]) -> list[Any]:
    """The commands' answers in order, from each shard's answers (or the
    one exception its whole share met), in the order of ``groups``."""
    results: list[Any] = [None] * len(entries)
    partial: dict[int, list[Any]] = {}
    for items, outcome in zip(groups.values(), outcomes, strict=True):
        failed = outcome if isinstance(outcome, BaseException) else None
        for k, (index, number, _args) in enumerate(items):
            answer = failed if failed is not None else outcome[k]  # type: ignore[index]
            entry = entries[index]
            if isinstance(entry, str) or len(entry.parts) == 1:
                results[index] = answer
            else:
                partial.setdefault(index, [None] * len(entry.parts))[number] = answer
    for index, answers in partial.items():
        entry = entries[index]
        assert not isinstance(entry, str)
        results[index] = merge(entry, answers)
    return results
