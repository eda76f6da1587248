"""Real HTTP backends on 127.0.0.1 (threads), for the health-check tests.

Each ``Backend`` is a ThreadingHTTPServer on an OS-chosen port whose every
GET answers according to its current behaviour, which a test may change at
any time (the body names the backend: ``200 from 127.0.0.1:PORT``):

* ``answer(code)``: answer ``code`` (200 by default);
* ``answer_cycle([200, 500])``: flap, answering the codes in turn;
* ``slow(seconds)``: wait that long, then answer;
* ``hang()``: never answer (until ``stop()`` releases the handler);
* ``meet(barrier)``: answer 200 only if the barrier fills, 500 otherwise;
* ``stop()`` / ``start()``: close the listening socket (connections are
  refused) and bind the same port again.
"""

from __future__ import annotations

import http.server
import itertools
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from _support.ports import PortClaim
from chash import ConsistentHashRouter

_HANG_LIMIT = 60.0


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        backend = self.server.backend
        code = backend._respond()
        if code is None:
            return
        body = f"{code} from {backend.node}\n".encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the prober gave up and closed the connection
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    # Join handler threads on close, so a stopped backend leaves none behind.
    daemon_threads = False
    block_on_close = True
    # Binds beside the backend's PortClaim, which holds the port while stopped.
    allow_reuse_address = True
    allow_reuse_port = True

    def __init__(self, port: int, backend: Backend) -> None:
        self.backend = backend
        super().__init__(("127.0.0.1", port), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a prober hanging up mid-answer is expected


class Backend:
    """One HTTP backend; see the module docstring."""

    def __init__(self, code: int = 200) -> None:
        self._lock = threading.Lock()
        self._codes: Iterator[int] = itertools.repeat(code)
        self._delay = 0.0
        self._hang = False
        self._barrier: threading.Barrier | None = None
        self._release = threading.Event()
        self._hits = 0
        self._hit = threading.Condition(self._lock)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._claim = PortClaim()
        self.port = self._claim.port
        self.start()

    @property
    def node(self) -> str:
        """The node name the router knows this backend by: host:port."""
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """This backend's health URL."""
        return f"http://{self.node}/health"

    @property
    def hits(self) -> int:
        """How many requests reached this backend."""
        with self._lock:
            return self._hits

    @property
    def running(self) -> bool:
        """Whether the backend accepts connections."""
        return self._server is not None

    def answer(self, code: int) -> Backend:
        """Answer every request with ``code``, promptly."""
        return self._set(codes=itertools.repeat(code))

    def answer_cycle(self, codes: Iterable[int]) -> Backend:
        """Answer the ``codes`` in turn, forever."""
        return self._set(codes=itertools.cycle(list(codes)))

    def slow(self, seconds: float) -> Backend:
        """Wait ``seconds`` before each answer."""
        with self._lock:
            self._delay = seconds
        return self

    def hang(self) -> Backend:
        """Accept requests and never answer them."""
        with self._lock:
            self._hang = True
        return self

    def meet(self, barrier: threading.Barrier) -> Backend:
        """Answer 200 once ``barrier`` fills, 500 if it breaks."""
        with self._lock:
            self._barrier = barrier
        return self

    def _set(self, *, codes: Iterator[int]) -> Backend:
        with self._lock:
            self._codes = codes
            self._hang = False
            self._delay = 0.0
            self._barrier = None
        return self

    def wait_for_hits(self, count: int, timeout: float = 10.0) -> None:
        """Block until ``count`` requests have arrived (AssertionError after
        ``timeout`` seconds)."""
        with self._hit:
            if not self._hit.wait_for(lambda: self._hits >= count, timeout):
                raise AssertionError(f"{self.node} got {self._hits} of {count} requests")

    def _respond(self) -> int | None:
        with self._lock:
            self._hits += 1
            self._hit.notify_all()
            hang, delay, barrier = self._hang, self._delay, self._barrier
            code = next(self._codes)
        if hang:
            self._release.wait(_HANG_LIMIT)
            return None
        if delay:
            self._release.wait(delay)
        if barrier is not None:
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                return 500
        return code

    def start(self) -> Backend:
        """Listen (again, on the same port once it has one)."""
        if self._server is not None:
            return self
        self._release = threading.Event()
        server = _Server(self.port, self)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                  name=f"backend-{self.port}", daemon=True)
        self._server, self._thread = server, thread
        thread.start()
        return self

    def stop(self) -> Backend:
        """Stop listening: connections to the port are refused from now on."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None or thread is None:
            return self
        self._release.set()
        server.shutdown()
        server.server_close()
        thread.join()
        return self


def ring_of(backends: list[Backend], weights: list[float] | None = None) -> ConsistentHashRouter:
    """A ring of 100 virtual nodes a node over the backends' nodes, with
    ``weights`` (default 1 each) in the same order."""
    router = ConsistentHashRouter(100)
    for i, backend in enumerate(backends):
        router.add_service_node(backend.node, 1.0 if weights is None else weights[i])
    return router
