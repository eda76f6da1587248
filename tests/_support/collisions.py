"""Node ids whose ring points collide, for the tests of ties.

Two nodes sharing a 32-bit point is rare (a few per million point pairs),
so tests that check who owns a shared point search for such ids here,
offline, instead of hard-coding them.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from chash import ConsistentHashRouter


def shared_points(layout: str, candidates: Iterable[str], *,
                  node_id: Callable[[str], str] = str,
                  usable: Callable[[str, str], bool] = lambda a, b: True,
                  ) -> Iterator[tuple[str, str, int]]:
    """Yield ``(earlier, later, point)`` for candidates whose points in
    ``layout`` collide, in the order found.  ``node_id`` turns a candidate
    into the id added to the ring (e.g. a host into ``host:port``);
    ``usable`` may refuse a pair.  Each candidate is in one pair at most."""
    seen: dict[int, str] = {}
    paired: set[str] = set()
    for candidate in candidates:
        probe = ConsistentHashRouter(layout=layout)
        probe.add_service_node(node_id(candidate))
        for point in probe.hash_ring:
            other = seen.setdefault(point, candidate)
            if (other != candidate and other not in paired and candidate not in paired
                    and usable(other, candidate)):
                paired.update((other, candidate))
                yield other, candidate, point


def shared_point(layout: str, candidates: Iterable[str], *,
                 node_id: Callable[[str], str] = str,
                 usable: Callable[[str, str], bool] = lambda a, b: True,
                 ) -> tuple[str, str, int]:
    """The first pair of ``shared_points``; AssertionError if there is none."""
    for found in shared_points(layout, candidates, node_id=node_id, usable=usable):
        return found
    raise AssertionError(f"no two of the candidates share a point in layout {layout!r}")


def loopback_hosts(first: int, stop: int) -> Iterator[str]:
    """127/8 addresses number ``first`` to ``stop - 1``."""
    for i in range(first, stop):
        yield f"127.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
