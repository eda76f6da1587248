"""Measured answers to the questions a reader of consistent hashing asks.

``simulate()`` routes a fixed set of keys (``user_0`` .. ``user_{K-1}``)
through a cluster growing one node at a time (``node-01``, ``node-02``, ...)
and reports, as a JSON-ready dict:

- ``remap``: the fraction of keys that change node at each growth step and
  when one node fails, for ``hash % N``, the ring at several virtual-node
  counts, jump consistent hash, JumpBackHash (jumpback), JumpBackAnchor
  (anchor), rendezvous hashing, Maglev and consistent hashing with bounded
  loads, beside the ideal ``1/N``;
- ``balance_by_vnodes`` and ``balance_by_strategy``: how evenly the keys
  spread (max/mean, min/mean, standard deviation) over the final cluster;
- ``ring_cost``: the ring's memory and build time by virtual-node count;
- ``comparison``: one row a strategy (and round robin, which has no key
  affinity at all) with the figures above side by side.

Every strategy is computed from scratch for each node set, so a number
depends only on the keys and the nodes.  Shrinking a cluster by its newest
node moves exactly the keys that growing it moved, so the growth steps read
backwards are the shrink steps; a failure removes a node from the middle.
(The anchor strategy's router has a history: the nodes it was given, in the
order first given, the absent ones removed.)

``chash simulate --trace`` replays an LLM request trace (``trace``:
Mooncake's JSONL format) through inference workers with prefix caches and
prefill queues (``serving``: the model, ``replay()``), under each routing
policy (``policies``: the baselines and ``compare()``), printed and drawn by
``report``; docs/llm.md.

``render()`` formats a result as text tables and ``plot()`` draws it with
matplotlib (the ``plot`` extra).  All the heavy loops run in C.

One module a concern: ``config`` (the setup, keys and nodes),
``strategies``, ``measures`` (and ``simulate()``), ``text`` (``render()``),
``plots``.  Import every name from ``chash.simulate``; the modules are how
it is laid out inside.
"""
from __future__ import annotations

from chash.simulate.config import (
    DEFAULT_BALANCE_VNODES,
    DEFAULT_RING_VNODES,
    MAX_MAGLEV_SIZE,
    SimulationConfig,
    is_prime,
    key_names,
    node_names,
)
from chash.simulate.config import TIMING_REPEATS as TIMING_REPEATS
from chash.simulate.measures import ROUND_ROBIN_SEED as ROUND_ROBIN_SEED
from chash.simulate.measures import load_stats, simulate
from chash.simulate.plots import figure_class as figure_class
from chash.simulate.plots import plot
from chash.simulate.plots import plot_figure as plot_figure
from chash.simulate.plots import plot_path as plot_path
from chash.simulate.policies import (
    POLICIES,
    CacheAware,
    Chwbl,
    LeastLoaded,
    PrefixPolicy,
    RingPolicy,
    RoundRobin,
    bounded_choice,
    compare,
    ring_key,
)
from chash.simulate.report import plot_comparison, render_comparison
from chash.simulate.serving import BlockLRU, Policy, ServingConfig, View, average, percentile, replay
from chash.simulate.strategies import AnchorStrategy as AnchorStrategy
from chash.simulate.strategies import BoundedStrategy as BoundedStrategy
from chash.simulate.strategies import JumpBackStrategy as JumpBackStrategy
from chash.simulate.strategies import JumpStrategy as JumpStrategy
from chash.simulate.strategies import MaglevStrategy as MaglevStrategy
from chash.simulate.strategies import ModuloStrategy as ModuloStrategy
from chash.simulate.strategies import RendezvousStrategy as RendezvousStrategy
from chash.simulate.strategies import RingStrategy as RingStrategy
from chash.simulate.strategies import Strategy, Workload, build_strategies
from chash.simulate.text import render
from chash.simulate.text import table as table
from chash.simulate.trace import BLOCK_TOKENS, TraceRequest, parse_trace, read_trace

__all__ = [
    "BLOCK_TOKENS",
    "POLICIES",
    "BlockLRU",
    "CacheAware",
    "Chwbl",
    "LeastLoaded",
    "Policy",
    "PrefixPolicy",
    "RingPolicy",
    "RoundRobin",
    "ServingConfig",
    "TraceRequest",
    "View",
    "average",
    "bounded_choice",
    "compare",
    "parse_trace",
    "percentile",
    "plot_comparison",
    "read_trace",
    "render_comparison",
    "replay",
    "ring_key",
    "DEFAULT_BALANCE_VNODES",
    "DEFAULT_RING_VNODES",
    "MAX_MAGLEV_SIZE",
    "SimulationConfig",
    "Strategy",
    "Workload",
    "build_strategies",
    "is_prime",
    "key_names",
    "load_stats",
    "node_names",
    "plot",
    "render",
    "simulate",
]
