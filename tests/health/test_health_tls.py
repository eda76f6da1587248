"""Health checks of https URLs with ``ssl_context``: both runners probe a
real TLS server (aiohttp, a trustme certificate) and call it healthy with a
context that trusts its CA, and not without one (the system's CAs do not
know the test CA), saying why; the context may be replaced between rounds.
"""

from __future__ import annotations

import asyncio
import ssl

import pytest

pytest.importorskip("aiohttp", reason="the async runner needs aiohttp (chash-router[async])")

from _support.echo_backends import EchoBackend
from _support.tls_certificates import Certificates, make_certificates
from _support.waiting import run
from chash import ConsistentHashRouter
from chash.gateway.tls import server_context
from chash.health import AsyncHealthChecker, HealthChecker, NodeState


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


def trusting(certs: Certificates) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=certs.ca)


def _ring(port: int) -> ConsistentHashRouter:
    router = ConsistentHashRouter()
    router.add_service_node(f"localhost:{port}")
    return router


def test_the_async_runner_probes_https_with_the_context(certs: Certificates) -> None:
    async def main() -> None:
        backend = await EchoBackend("b0", server_context(certs.cert, certs.key)).start()
        checker = AsyncHealthChecker(_ring(backend.port), url="https://{node}/health",
                                     fall=1, rise=1)
        node = f"localhost:{backend.port}"
        try:
            assert checker.ssl_context is None
            await checker.check_now()
            status = checker.status()[node]
            assert status.state is NodeState.DOWN
            assert status.last_error is not None and "CERTIFICATE_VERIFY_FAILED" in \
                status.last_error.upper().replace(" ", "_"), status.last_error
            checker.ssl_context = trusting(certs)
            await checker.check_now()
            status = checker.status()[node]
            assert status.state is NodeState.UP and status.consecutive_successes == 1
            assert backend.server_names[-1] == "localhost"
        finally:
            await checker.stop()
            await backend.stop()

    run(main())


def test_the_thread_runner_probes_https_with_the_context(certs: Certificates) -> None:
    loop = asyncio.new_event_loop()
    try:
        backend = loop.run_until_complete(
            EchoBackend("b0", server_context(certs.cert, certs.key)).start())
        node = f"localhost:{backend.port}"
        # The loop serves the backend only while run: probe from a thread.
        for context, state in ((None, NodeState.DOWN), (trusting(certs), NodeState.UP)):
            checker = HealthChecker(_ring(backend.port), url="https://{node}/health",
                                    fall=1, rise=1, ssl_context=context)
            future = loop.run_in_executor(None, checker.check_now)
            loop.run_until_complete(asyncio.wait_for(future, 30))
            status = checker.status()[node]
            assert status.state is state, status
            assert status.consecutive_successes == (state is NodeState.UP), status
        loop.run_until_complete(backend.stop())
    finally:
        loop.close()


def test_ssl_context_must_be_a_context() -> None:
    with pytest.raises(TypeError, match=r"ssl_context must be an ssl\.SSLContext"):
        HealthChecker(ConsistentHashRouter(), ssl_context="ca.pem")  # type: ignore[arg-type]
