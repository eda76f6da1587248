"""Real grpcio's ring_hash against ConsistentHashRouter(layout="grpc").

Four gRPC servers on 127.0.0.1 (ports the OS picks, held by claims) answer
a generic unary method with their own name; a channel over all four uses the
``ring_hash_experimental`` policy with ``requestHashHeader``, so gRPC
hashes each call's header with XXH64 and picks the ring's owner.  grpcio
honours that option only with GRPC_EXPERIMENTAL_RING_HASH_SET_REQUEST_HASH_KEY
set (its ring_hash.cc reads it when the service config is parsed), so the
tests set it before making channels.  Every key must reach the server chash
names.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from chash import ConsistentHashRouter

grpc = pytest.importorskip("grpc", reason="the gRPC tests need grpcio: pip install grpcio")

from _support.grpc_servers import SERVICE, GrpcBackend  # noqa: E402  (needs grpc)

KEYS = [f"user-{i}" for i in range(150)]


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, str]]:
    """{"127.0.0.1:port": server name} of four running servers.

    Each port is a ``PortClaim``'s, bound explicitly: a port grpcio picked
    itself (``127.0.0.1:0``, with its SO_REUSEPORT) could be handed by the
    OS, between a check and a bind, to another suite's server that binds
    it with SO_REUSEPORT too, and that server would then answer some of
    these calls."""
    started: list[GrpcBackend] = []
    try:
        for i in range(4):
            started.append(GrpcBackend(f"server-{i}"))
        yield {backend.address: backend.name for backend in started}
    finally:
        for backend in started:
            backend.stop()


def routed(servers: dict[str, str], config: dict[str, Any]) -> list[str]:
    """The server that answers each key through a ring_hash channel."""
    service_config = {"loadBalancingConfig": [
        {"ring_hash_experimental": {"requestHashHeader": "x-route-key", **config}}]}
    target = "ipv4:" + ",".join(servers)
    with grpc.insecure_channel(target, options=[
            ("grpc.service_config", json.dumps(service_config))]) as channel:
        call = channel.unary_unary(f"/{SERVICE}/Hello")
        answers = [call(b"", metadata=(("x-route-key", key),), timeout=10) for key in KEYS]
        return [answer.decode().removesuffix(":") for answer in answers]


@pytest.mark.parametrize("config", [
    {},                                              # gRPC's defaults: 1024 .. 4096
    {"minRingSize": 64, "maxRingSize": 64},          # a small ring
    {"minRingSize": 8388608, "maxRingSize": 8388608},  # capped at ring_size_cap 4096
], ids=["defaults", "small", "capped"])
def test_grpcio_ring_hash_routes_every_key_like_chash(servers: dict[str, str],
                                                      config: dict[str, Any],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPC_EXPERIMENTAL_RING_HASH_SET_REQUEST_HASH_KEY", "true")
    router = ConsistentHashRouter(layout="grpc", minimum_ring_size=config.get("minRingSize"),
                                  maximum_ring_size=config.get("maxRingSize"))
    router.add_service_nodes(list(servers))
    expected = [servers[str(node)] for node in router.get_target_nodes(KEYS)]
    assert routed(servers, config) == expected
    if config.get("minRingSize") == 8388608:
        assert sum(router.points.values()) == 4096
    assert len(set(expected)) > 1  # the keys spread: a wrong ring would show
