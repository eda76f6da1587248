"""Gateway processes for the membership tests (membership_worker.py).

``Worker`` is one gateway instance in its own process, talking JSON lines;
``worker_factory`` starts them and, at the end, quits them and checks that
no lookup ever failed in any of them; ``converge`` waits until every
gateway routes with the same, expected ring.  Background progress is only
ever waited for by polling with generous deadlines.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import chash
from _support.waiting import wait_until
from chash import ConsistentHashRouter

__all__ = ["Gateways", "Worker", "add_all", "converge", "driver_factory", "fingerprint_of",
           "wait_until", "worker_factory"]

WORKER = Path(__file__).with_name("membership_worker.py")
REPO = Path(__file__).resolve().parent.parent.parent
# Where the chash under test comes from (the checkout, or site-packages).
CHASH_ROOT = Path(chash.__file__).resolve().parent.parent


def fingerprint_of(weights: dict[str, float]) -> str:
    """The fingerprint of a default router holding ``weights``."""
    router = ConsistentHashRouter()
    for node, weight in weights.items():
        router.add_service_node(node, weight)
    return router.fingerprint()


class Worker:
    """A gateway instance in its own process (tests/_support/membership_worker.py)."""

    def __init__(self, port: int, name: str, reporter: str, log_dir: Path,
                 quorum: str = "majority", options: tuple[str, ...] = (),
                 prefix: tuple[str, ...] = ()) -> None:
        """``prefix`` goes before the command (``ip netns exec NS``, to run
        it inside a network namespace)."""
        self.reporter = reporter
        self.log_path = log_dir / f"{reporter}.log"
        # The chash under test, whatever an installed copy points to.
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            filter(None, [str(CHASH_ROOT), os.environ.get("PYTHONPATH")])))
        # The child writes to its own copy of the descriptor: ours is closed
        # at once, so a test that fails before close() leaks no file.
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                [*prefix, sys.executable, str(WORKER), str(port), name, reporter, quorum,
                 *options],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                text=True, cwd=REPO, env=env)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def answer(self, deadline: float = 30.0) -> dict[str, Any]:
        """The next line the worker prints, as JSON."""
        try:
            line = self._lines.get(timeout=deadline)
        except queue.Empty:
            line = None
        if line is None:
            pytest.fail(f"worker {self.reporter} gave no answer; its log:\n{self.log()}")
        data: dict[str, Any] = json.loads(line)
        return data

    def send(self, op: str, **kwargs: Any) -> None:
        """Send one command without waiting for its answer."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"op": op, **kwargs}) + "\n")
        self.process.stdin.flush()

    def call(self, op: str, **kwargs: Any) -> dict[str, Any]:
        """Run one command; fail the test if it failed."""
        self.send(op, **kwargs)
        answer = self.answer()
        assert "error" not in answer, f"{self.reporter} {op}: {answer['error']}"
        return answer

    def pause(self) -> None:
        """SIGSTOP the process: it keeps its ring and sees nothing."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT the process."""
        self.process.send_signal(signal.SIGCONT)

    def status(self) -> dict[str, Any]:
        """Fingerprint, version, connected, weights, lookups, failures."""
        return self.call("status")

    def log(self) -> str:
        """What the worker logged."""
        return self.log_path.read_text()

    def close(self) -> list[str]:
        """Quit; return the lookup failures the worker saw."""
        failures: list[str] = []
        try:
            if self.process.poll() is None and self.process.stdin is not None:
                self.process.stdin.write('{"op": "quit"}\n')
                self.process.stdin.flush()
                while True:
                    answer = self.answer()
                    if "bye" in answer:
                        failures = answer["failures"]
                        break
        finally:
            if self.process.stdin is not None:
                self.process.stdin.close()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self._reader.join(5)
            if self.process.stdout is not None:
                self.process.stdout.close()
        return failures


def worker_factory(tmp_path: Path) -> Iterator[Callable[..., list[Worker]]]:
    """Start gateway processes: ``start(port, count, name="default",
    quorum=..., options=(...), ready=True)``; with ``ready=False`` the
    caller reads the first answer itself.  At the end, quit them and check
    that no lookup ever failed in any of them."""
    started: list[Worker] = []

    def start(port: int, count: int, name: str = "default", ready: bool = True,
              **kwargs: Any) -> list[Worker]:
        batch = [Worker(port, name, f"gw{len(started) + i}", tmp_path, **kwargs)
                 for i in range(count)]
        started.extend(batch)
        if ready:
            for worker in batch:
                first = worker.answer()
                assert first.get("ready"), f"{first}\n{worker.log()}"
        return batch

    try:
        yield start
    finally:
        for worker in started:
            if worker.process.poll() is None:
                worker.resume()  # a paused worker cannot quit
        failures = {worker.reporter: worker.close() for worker in started}
    assert all(not f for f in failures.values()), failures


def converge(gateways: list[Worker], weights: dict[str, float], what: str) -> None:
    """Wait until every gateway routes with exactly ``weights``, at one
    (epoch, version)."""
    expected = fingerprint_of(weights)
    last: list[dict[str, Any]] = []

    def done() -> bool:
        last[:] = [g.status() for g in gateways]
        return all(s["fingerprint"] == expected for s in last) \
            and len({(s["epoch"], s["version"]) for s in last}) == 1

    try:
        wait_until(done, what)
    except pytest.fail.Exception:
        raise AssertionError(f"{what}: expected {weights}, got "
                             f"{[s['weights'] for s in last]}") from None
    versions = {s["version"] for s in last}
    assert len(versions) == 1, versions




#: What ``driver_factory`` yields: ``start(port, count, options=(...), ...)``.
Gateways = Callable[..., list[Worker]]


def driver_factory(driver: str, tmp_path: Path) -> Iterator[Callable[..., list[Worker]]]:
    """As ``worker_factory``, every worker with driver ``driver`` ("sync"
    or "async"); further worker options go in ``options``."""
    factory = worker_factory(tmp_path)
    start = next(factory)

    def make(port: int, count: int, options: tuple[str, ...] = (),
             **kwargs: Any) -> list[Worker]:
        return start(port, count, options=("--driver", driver, *options), **kwargs)

    yield make
    next(factory, None)


def add_all(gateways: list[Worker], ring: dict[str, float]) -> None:
    """Add every node of ``ring``, from each gateway in turn."""
    for i, (node, weight) in enumerate(ring.items()):
        gateways[i % len(gateways)].call("add", node=node, weight=weight)
