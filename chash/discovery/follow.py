"""Make a router, or a membership, hold a given node set: no DNS here.

``apply(target, wanted)`` changes ``target`` to hold exactly ``wanted``
(node -> weight), touching only what differs, adds and reweighs before
removals so that a ring never passes through empty.  Targets:

* a router (``chash.ConsistentHashRouter`` or alike): edited directly;
* a shared membership (``RedisMembership``, ``EtcdMembership``): its
  operator calls, against the ring as last applied.  A write that changes
  nothing bumps nothing in the store, so instances that follow the same
  registry into one ring agree without versions flapping; removals are
  forced (the registry is the authority, and ``wanted`` is never empty);
* a ``chash.health.LocalMembership``: its router, leaving out the nodes
  the health checks took out, and ``forget()`` for the nodes gone.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from typing import Any

__all__ = ["apply", "check_target"]

logger = logging.getLogger("chash.discovery")


def check_target(target: object) -> None:
    """TypeError unless ``apply`` knows how to edit ``target``."""
    add = getattr(target, "add_node", None)
    if add is not None:
        if inspect.iscoroutinefunction(add):
            raise TypeError("follow() edits a membership with blocking calls; follow the "
                            "router of an asyncio membership's instance with a blocking one")
        return
    if hasattr(target, "forget") and hasattr(target, "router"):
        return
    if all(hasattr(target, name) for name in ("add_service_node", "weights")) and (
            hasattr(target, "discard_service_node") or hasattr(target, "remove_service_node")):
        return
    raise TypeError(f"cannot follow into {target!r}: give a router, a RedisMembership / "
                    "EtcdMembership, or a chash.health.LocalMembership")


def apply(target: Any, wanted: Mapping[str, float]) -> None:
    """Make ``target`` hold ``wanted`` (not empty); see the module docstring."""
    if not wanted:
        raise ValueError("refusing to empty the ring")
    if hasattr(target, "add_node"):
        _membership(target, wanted)
    elif hasattr(target, "forget"):
        _local(target, wanted)
    else:
        _router(target, wanted)


def _router(router: Any, wanted: Mapping[str, float]) -> None:
    present = dict(router.weights)
    for node, weight in wanted.items():
        if present.get(node) != weight:
            router.add_service_node(node, weight)
    for node in present:
        if node not in wanted:
            if hasattr(router, "discard_service_node"):
                router.discard_service_node(node)
            else:
                router.remove_service_node(node)


def _membership(membership: Any, wanted: Mapping[str, float]) -> None:
    state = membership.state
    present = dict(state.weights) if state is not None else {}
    for node, weight in wanted.items():
        if present.get(node) != weight:
            membership.add_node(node, weight)
    for node in present:
        if node not in wanted:
            try:
                membership.remove_node(node, force=True)
            except KeyError:  # another instance removed it first
                pass


def _local(local: Any, wanted: Mapping[str, float]) -> None:
    router = local.router
    out = local.taken_out() if hasattr(local, "taken_out") else {}
    present = dict(router.weights)
    for node, weight in wanted.items():
        if node not in out and present.get(node) != weight:
            router.add_service_node(node, weight)
    for node in set(present) | set(out):
        if node not in wanted:
            local.forget(node)
