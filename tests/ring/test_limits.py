"""Ring size limits: clear errors, never an overflow; MemoryError leaves the router as it was."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import chash
from chash import ConsistentHashRouter


def test_limits_are_exported_and_consistent() -> None:
    assert chash.MAX_VIRTUAL_NODES == 1_000_000
    assert chash.MAX_NODE_POINTS == 2**24
    assert chash.MAX_POINTS == 2**28
    assert chash.MAX_NODES == 2**20
    assert chash.MAX_NODE_POINTS <= chash.MAX_POINTS


def test_weight_beyond_the_node_limit_is_a_clear_error() -> None:
    router = ConsistentHashRouter(1_000_000)
    with pytest.raises(ValueError, match="more than 16777216 points"):
        router.add_service_node("big", weight=17)
    with pytest.raises(ValueError, match="more than 16777216 points"):
        router.add_service_nodes(["big"], weight=1e300)
    assert len(router) == 0 and router.hash_ring == []
    router._check()


def test_memory_exhaustion_is_memoryerror_and_changes_nothing() -> None:
    # In a child process whose address space is capped, a node of 16M points
    # (64 MiB of points, 128 MiB of ring) cannot be allocated.
    script = textwrap.dedent(
        """
        import resource, chash
        router = chash.ConsistentHashRouter(1000, hash="fnv1a")
        router.add_service_nodes([f"n{i}" for i in range(50)])
        before = (router.hash_ring, router.weights, router.fingerprint())
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[0])
        used = pages * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (used + 96 * 2**20, resource.RLIM_INFINITY))
        outcomes = []
        for call in (lambda: router.add_service_node("huge", weight=16000),
                     lambda: router.add_service_nodes(["huge"], weight=16000),
                     lambda: router.add_service_node("n1", weight=16000)):
            try:
                call()
                outcomes.append("added")
            except MemoryError:
                outcomes.append("MemoryError")
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        router._check()
        assert (router.hash_ring, router.weights, router.fingerprint()) == before, "router changed"
        print(",".join(outcomes))
        """
    )
    # Under AddressSanitizer (the CI's sanitizer run) a failed allocation must
    # come back as NULL too, as it does from the C library.
    asan = os.environ.get("ASAN_OPTIONS", "")
    env = dict(os.environ, ASAN_OPTIONS=f"{asan}:allocator_may_return_null=1".lstrip(":"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env=env)
    if "AddressSanitizer" in done.stderr or "LeakSanitizer" in done.stderr:
        pytest.skip("an address-space cap cannot be combined with a sanitizer runtime")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "MemoryError,MemoryError,MemoryError"
