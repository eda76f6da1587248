"""Tests of chash.health.sync_checker: HealthChecker's background thread,
its prompt stop, and the synchronous gateway of docs/health.md."""

from __future__ import annotations

import http.server
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from _support.health_checks import owners
from _support.http_backends import Backend, ring_of
from _support.waiting import wait_until
from chash.health import HealthChecker


def chash_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("chash-health")]


def test_background_thread_takes_out_and_brings_back(backends: Callable[..., Backend]) -> None:
    group = [backends() for _ in range(3)]
    router = ring_of(group)
    before = owners(router)
    with HealthChecker(router, interval=0.05, timeout=2.0, fall=2, rise=2) as checker:
        assert checker.running
        group[2].stop()
        wait_until(lambda: group[2].node not in router)
        group[2].start()
        wait_until(lambda: group[2].node in router)
    assert not checker.running
    assert owners(router) == before
    assert chash_threads() == []


def test_stop_is_prompt_and_leaves_no_thread(backends: Callable[..., Backend]) -> None:
    backend = backends()
    checker = HealthChecker(ring_of([backend]), interval=30.0)
    checker.start()
    with pytest.raises(RuntimeError):
        checker.start()
    backend.wait_for_hits(1)
    wait_until(lambda: checker.status()[backend.node].consecutive_successes == 1)
    started = time.monotonic()
    checker.stop()
    assert time.monotonic() - started < 2.0
    assert chash_threads() == []
    checker.stop()  # idempotent
    checker.start()  # and restartable
    backend.wait_for_hits(2)
    checker.stop()
    assert chash_threads() == []


def test_stop_aborts_a_hanging_probe_without_counting_it(
        backends: Callable[..., Backend]) -> None:
    backend = backends().hang()
    checker = HealthChecker(ring_of([backend]), interval=30.0, timeout=30.0)
    checker.start()
    backend.wait_for_hits(1)
    started = time.monotonic()
    checker.stop()
    assert time.monotonic() - started < 2.0
    assert chash_threads() == []
    assert checker.status()[backend.node].consecutive_failures == 0


def test_check_now_threads_are_released_by_stop(backends: Callable[..., Backend]) -> None:
    checker = HealthChecker(ring_of([backends()]))
    checker.check_now()
    checker.stop()
    assert chash_threads() == []


# -- the documentation ------------------------------------------------------


def test_documentation_examples_compile(health_doc_examples: list[str]) -> None:
    blocks = health_doc_examples
    assert len(blocks) == 4
    for i, block in enumerate(blocks):
        compile(block, f"docs/health.md block {i}", "exec")


def test_documentation_sync_gateway(backends: Callable[..., Backend],
                                    health_doc_examples: list[str]) -> None:
    (block,) = [b for b in health_doc_examples if "class Gateway" in b]
    example: dict[str, Any] = {"__name__": "gateway_example"}
    exec(compile(block, "docs/health.md", "exec"), example)
    router, checker = example["router"], example["checker"]
    for node in router.nodes:
        router.remove_service_node(node)
    group = [backends() for _ in range(3)]
    for backend in group:
        router.add_service_node(backend.node, 1.0)
    base: type[http.server.BaseHTTPRequestHandler] = example["Gateway"]

    class QuietGateway(base):  # type: ignore[valid-type,misc]
        def log_message(self, format: str, *args: Any) -> None:
            pass

    gateway = http.server.ThreadingHTTPServer(("127.0.0.1", 0), QuietGateway)
    thread = threading.Thread(target=gateway.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()

    def get(user: str) -> tuple[int, str]:
        request = urllib.request.Request(f"http://127.0.0.1:{gateway.server_port}/profile",
                                         headers={"X-User-Id": user})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, ""

    try:
        checker.check_now()
        users = [str(i) for i in range(40)]
        for user in users:
            assert get(user) == (200, f"200 from {router.get_target_node(f'user:{user}')}\n")
        victim = group[0]
        user = next(u for u in users if router.get_target_node(f"user:{u}") == victim.node)
        successor = router.get_preference_list(f"user:{user}", 2)[1]
        victim.stop()
        assert [get(user)[0] for _ in range(3)] == [502, 502, 502]  # reported: out
        assert victim.node not in router
        assert get(user) == (200, f"200 from {successor}\n")
    finally:
        gateway.shutdown()
        gateway.server_close()
        thread.join()
        checker.stop()
