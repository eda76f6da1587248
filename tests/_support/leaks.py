"""A loop that must not leak: memory and live objects watched over many
cycles of an operation, after a warm-up that fills every cache."""
from __future__ import annotations

import gc
import sys
import tracemalloc
from collections.abc import Callable, Iterable


def assert_cycles_do_not_leak(cycle: Callable[[int], object], *, warmup: int = 300, rounds: int = 1500,
                              max_bytes: int = 60_000, max_objects: int = 50) -> None:
    """Run cycle(i) warmup times, then rounds times under tracemalloc, and
    fail when traced memory grew by max_bytes or more, or the number of
    objects the collector tracks moved by max_objects or more."""
    for i in range(warmup):
        cycle(i)
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(warmup // 3):
            cycle(i)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        objects = len(gc.get_objects())
        for i in range(rounds):
            cycle(i)
        gc.collect()
        growth = tracemalloc.get_traced_memory()[0] - before
        objects_growth = len(gc.get_objects()) - objects
    finally:
        tracemalloc.stop()
    assert growth < max_bytes, growth
    assert abs(objects_growth) < max_objects, objects_growth


class RefsGained:
    """The references each of some objects gains from now on: ``gained(objs)``
    for objs one of the collections given (each read the same way both
    times, so the reading's own references cancel)."""

    def __init__(self, *collections: Iterable[object]) -> None:
        self._before = {id(objs): self._counts(objs) for objs in collections}

    @staticmethod
    def _counts(objs: Iterable[object]) -> list[int]:
        return [sys.getrefcount(obj) for obj in objs]

    def gained(self, objs: Iterable[object]) -> list[int]:
        return [now - then for now, then in zip(self._counts(objs), self._before[id(objs)], strict=True)]
