"""Everything at once: routing (single and batch), membership and weight
changes, pickling, bounded loads and a running health checker, for a
bounded number of iterations.  No crash, every answer a node that was in
the ring during the run, invariants intact afterwards."""
from __future__ import annotations

import pickle
import random
import threading
from collections.abc import Callable

from _support.http_backends import Backend
from chash import BoundedLoadRouter, ConsistentHashRouter
from chash.health import HealthChecker

STABLE = [f"stable-{i}" for i in range(4)]
CHURN = [f"churn-{i}" for i in range(6)]
EVERY = set(STABLE) | set(CHURN)


def test_everything_at_once(backends: Callable[..., Backend]) -> None:
    port = backends().port
    router = ConsistentHashRouter(40)
    router.add_service_nodes(STABLE)
    bounded = BoundedLoadRouter(router)
    errors: list[BaseException] = []
    keys = [f"user-{i}" for i in range(300)]

    def guard(body):  # type: ignore[no-untyped-def]
        def run(seed: int) -> None:
            rng = random.Random(seed)
            try:
                for _ in range(400):
                    body(rng)
            except BaseException as exc:  # surfaced in the main thread
                errors.append(exc)
        return run

    def route(rng: random.Random) -> None:
        assert router.get_target_node(rng.choice(keys)) in EVERY
        assert set(router.get_target_nodes(keys[: rng.randrange(1, 50)])) <= EVERY
        assert set(router.get_preference_list(rng.choice(keys), 3)) <= EVERY
        with bounded.route(rng.choice(keys)) as node:
            assert node in EVERY

    def churn(rng: random.Random) -> None:
        node = rng.choice(CHURN)
        action = rng.randrange(4)
        if action == 0:
            router.add_service_node(node, rng.choice([0.5, 1.0, 2.0]))
        elif action == 1:
            router.discard_service_node(node)
        elif action == 2:
            router.add_service_nodes(rng.sample(CHURN, 2))
        else:
            copy = pickle.loads(pickle.dumps(router))
            copy._check()
            assert set(copy.nodes) <= EVERY

    with HealthChecker(router, url=lambda node: f"http://127.0.0.1:{port}/health",
                       interval=0.01, timeout=2.0):
        threads = [threading.Thread(target=guard(route), args=(seed,)) for seed in range(3)]
        threads.append(threading.Thread(target=guard(churn), args=(99,)))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not any(thread.is_alive() for thread in threads)
    assert not errors, errors[0]
    router._check()
    assert set(STABLE) <= set(router.nodes)
    assert bounded.in_flight == 0
