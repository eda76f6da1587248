"""A loop that must not leak: memory and live objects watched over many
cycles of an operation, after a warm-up that fills every cache."""
from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable


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
