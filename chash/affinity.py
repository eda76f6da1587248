"""Prefix-cache affinity for LLM inference routing (docs/llm.md).

An inference engine (vLLM, SGLang) keeps the KV cache of the prompts it has
served; a request whose prompt prefix is cached there skips most of its
prefill.  ``prefix_blocks`` turns a prompt into chained block hashes;
``PrefixAffinity`` chooses an engine for them:

1. the router's preference list for the prompt's leading blocks (the key:
   the first ``key_blocks`` hashes joined by ``","``) orders the nodes, so
   every gateway replica agrees on a prefix's first choices without sharing
   any state;
2. along that list, each node's cost is an estimate, in tokens of prefill,
   of the time to the request's first token there: the work queued ahead of
   it, plus ``miss_cost`` times the prompt's tokens not expected in its
   cache (past the blocks its record holds; 3 by default, since a miss
   also delays what queues behind it and costs the prefix's later
   requests their hits there), plus ``rank_cost`` a step down the list (so that,
   other things equal, the first choices win and records stay put), plus
   ``load_cost`` an in-flight request;
3. the cheapest node wins (ties to the earlier one) and the blocks are
   recorded there: a bounded LRU of ``capacity`` block hashes a node, in C,
   as the engine's own cache is.

Loads and queued work come from the caller (its in-flight counts and an
estimate of the prefill still ahead on each engine, in tokens); without
them the policy counts its own in-flight requests, which ``done()`` ends.
"""
from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from typing import Protocol

from chash._chash import _AffinityTable, prefix_blocks

__all__ = ["PreferenceRouter", "PrefixAffinity", "prefix_blocks"]


class PreferenceRouter(Protocol):
    """What ``PrefixAffinity`` needs of a router: its nodes and a
    preference list for a key (every chash router has both)."""

    def get_preference_list(self, key: str, n: int, /) -> list[str]: ...

    def __len__(self) -> int: ...


def _cost(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")
    return float(value)


class PrefixAffinity:
    """Routes a prompt's blocks to the node with the lowest estimated time to
    first token along the router's preference list (see the module docs).

    ``router``: any router with ``get_preference_list`` and ``len``; its
    nodes are read at each call, so a node added or removed there is seen at
    once (``forget()`` drops a removed node's record).  ``capacity``: block
    hashes remembered a node (the engine's cache size in blocks is the
    natural value).  ``block_tokens``: the tokens a block stands for (the
    ``block`` given to ``prefix_blocks``).  ``key_blocks``: the leading
    blocks the preference list is keyed by.  ``miss_cost`` (default 3):
    what a token to prefill is worth in tokens of queued work.
    ``rank_cost`` (default one block's tokens) and ``load_cost`` (default
    0): tokens of queued work a step down the list and an in-flight request
    are worth.

    Safe to share between threads: calls are serialised by a lock.
    """

    def __init__(self, router: PreferenceRouter, *, capacity: int = 16_384, block_tokens: int = 128,
                 key_blocks: int = 2, miss_cost: float = 3.0, rank_cost: float | None = None,
                 load_cost: float = 0.0) -> None:
        for name, value in (("capacity", capacity), ("block_tokens", block_tokens),
                            ("key_blocks", key_blocks)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, not {value!r}")
        self._router = router
        self._table = _AffinityTable(capacity)
        self._block_tokens = float(block_tokens)
        self._key_blocks = key_blocks
        self._miss_cost = _cost("miss_cost", miss_cost)
        self._rank_cost = _cost("rank_cost", block_tokens if rank_cost is None else rank_cost)
        self._load_cost = _cost("load_cost", load_cost)
        self._in_flight: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def capacity(self) -> int:
        """Block hashes remembered a node, at most."""
        return int(self._table.capacity)

    def route(self, blocks: Sequence[int], *, loads: Mapping[str, float] | None = None,
              queued: Mapping[str, float] | None = None, tokens: int | None = None) -> str:
        """The node for a prompt of ``blocks`` (from ``prefix_blocks``, or
        any ids where equal ids at a position mean an equal prefix); its
        record then holds them.

        ``loads``: in-flight requests a node (default: the ones this policy
        routed and ``done()`` has not ended); ``queued``: tokens of prefill
        still ahead a node (default: none known); a node missing from a
        mapping counts 0.  ``tokens``: the prompt's length (default
        ``len(blocks) x block_tokens``).  LookupError when the router has no
        node; ValueError for a negative or non-finite load, queued value or
        token count, or a block outside 0 .. 2**64-1."""
        if tokens is not None:
            _cost("tokens", tokens)
        key = ",".join(map(str, blocks[:self._key_blocks]))
        with self._lock:
            nodes = self._router.get_preference_list(key, len(self._router))
            if not nodes:
                raise LookupError("the router has no node to route to")
            own = loads is None
            index = self._table.route(blocks, nodes, self._in_flight if own else loads, queued,
                                      0.0 if tokens is None else float(tokens), self._block_tokens,
                                      self._miss_cost, self._rank_cost, self._load_cost)
            node = nodes[index]
            self._in_flight[node] = self._in_flight.get(node, 0) + 1
        return node

    def done(self, node: str) -> None:
        """One request routed to ``node`` has finished (its count of
        in-flight requests goes down; ValueError when none is)."""
        with self._lock:
            count = self._in_flight.get(node, 0)
            if count == 0:
                raise ValueError(f"no request in flight on {node!r}")
            if count == 1:
                del self._in_flight[node]
            else:
                self._in_flight[node] = count - 1

    def in_flight(self) -> dict[str, int]:
        """Requests routed and not yet ``done()``, a node."""
        with self._lock:
            return dict(self._in_flight)

    def held(self, node: str) -> int:
        """Block hashes the record of ``node`` holds."""
        return int(self._table.held(node))

    def match(self, node: str, blocks: Sequence[int]) -> int:
        """How many of ``blocks``, from the first, the record of ``node``
        holds: the hits this policy expects there."""
        return int(self._table.match(node, blocks))

    def nodes(self) -> list[str]:
        """The nodes with a record, in the order they got one: every node a
        preference list named since it was last ``forget()``-ed (each
        record is allocated whole, ``capacity`` block hashes)."""
        return list(self._table.nodes())

    def forget(self, node: str) -> None:
        """Drop the record and the in-flight count of ``node`` (one removed
        from the router); KeyError when it has no record."""
        with self._lock:
            self._table.forget(node)
            self._in_flight.pop(node, None)
