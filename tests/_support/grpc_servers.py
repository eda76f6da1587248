"""Real grpcio servers on 127.0.0.1 with generic handlers (no generated code).

Each ``GrpcBackend`` serves service ``test.Echo`` with raw-bytes messages:

* ``Hello`` (unary-unary): answers ``b"<name>:" + request``;
* ``Count`` (unary-stream): answers ``int(request)`` messages ``<name>:<i>``;
* ``Join`` (stream-unary): answers ``b"<name>:"`` + the requests joined by ``+``;
* ``Chat`` (stream-stream): answers each request as ``<name>:<request>``;
* ``Fail`` (unary-unary): aborts with INTERNAL.

``hits`` counts the calls it received; ``stop()`` closes the port (calls
fail UNAVAILABLE) and ``start()`` serves the same port again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc

from _support.ports import PortClaim

SERVICE = "test.Echo"


class GrpcBackend:
    """One grpcio server; see the module docstring."""

    def __init__(self, name: str) -> None:
        self.name = name
        # grpcio binds with SO_REUSEPORT, beside the claim that holds the
        # port while the server is stopped.
        self._claim = PortClaim()
        self.port = self._claim.port
        self.hits = 0
        self._lock = threading.Lock()
        self._server: Any = None
        self.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _hit(self) -> bytes:
        with self._lock:
            self.hits += 1
        return self.name.encode() + b":"

    def _handler(self) -> Any:
        def hello(request: bytes, context: Any) -> bytes:
            return self._hit() + request

        def count(request: bytes, context: Any) -> Iterator[bytes]:
            prefix = self._hit()
            for i in range(int(request)):
                yield prefix + str(i).encode()

        def join(requests: Iterator[bytes], context: Any) -> bytes:
            return self._hit() + b"+".join(requests)

        def chat(requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
            prefix = self._hit()
            for request in requests:
                yield prefix + request

        def fail(request: bytes, context: Any) -> bytes:
            self._hit()
            context.abort(grpc.StatusCode.INTERNAL, "the application failed")
            raise AssertionError("abort returns never")

        return grpc.method_handlers_generic_handler(SERVICE, {
            "Hello": grpc.unary_unary_rpc_method_handler(hello),
            "Count": grpc.unary_stream_rpc_method_handler(count),
            "Join": grpc.stream_unary_rpc_method_handler(join),
            "Chat": grpc.stream_stream_rpc_method_handler(chat),
            "Fail": grpc.unary_unary_rpc_method_handler(fail),
        })

    def start(self) -> GrpcBackend:
        """Serve (on the same port as before, once it has one)."""
        if self._server is None:
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
            server.add_generic_rpc_handlers((self._handler(),))
            if server.add_insecure_port(f"127.0.0.1:{self.port}") != self.port:
                raise RuntimeError(f"grpc could not bind 127.0.0.1:{self.port}")
            server.start()
            self._server = server
        return self

    def stop(self) -> GrpcBackend:
        """Stop serving at once."""
        server, self._server = self._server, None
        if server is not None:
            server.stop(None).wait(10.0)
        return self
