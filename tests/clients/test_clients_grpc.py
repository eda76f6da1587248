"""chash.grpc against real grpcio servers: ChannelPool and AsyncChannelPool."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import chash

grpc = pytest.importorskip("grpc")

from _support.grpc_servers import GrpcBackend  # noqa: E402
from _support.waiting import run  # noqa: E402
from chash.grpc import AsyncChannelPool, ChannelPool  # noqa: E402
from chash.health import LocalMembership  # noqa: E402

KEYS = [f"user-{i}" for i in range(24)]
HELLO = "/test.Echo/Hello"


@pytest.fixture(scope="module")
def servers() -> Iterator[list[GrpcBackend]]:
    started = [GrpcBackend(f"g{i}") for i in range(3)]
    try:
        yield started
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def backends(servers: list[GrpcBackend]) -> list[GrpcBackend]:
    for server in servers:
        server.start()
        server.hits = 0
    return servers


@pytest.fixture
def grpc_ring(backends: list[GrpcBackend]) -> chash.ConsistentHashRouter:
    router = chash.ConsistentHashRouter()
    router.add_service_nodes([b.address for b in backends])
    return router


def name_of(backends: list[GrpcBackend], node: str | None) -> bytes:
    return next(b.name for b in backends if b.address == node).encode()


def by_address(backends: list[GrpcBackend], node: str) -> GrpcBackend:
    return next(b for b in backends if b.address == node)


def test_every_key_reaches_its_owner_in_all_four_call_kinds(
        backends: list[GrpcBackend], grpc_ring: chash.ConsistentHashRouter) -> None:
    with ChannelPool(grpc_ring) as pool:
        hello = pool.unary_unary(HELLO)
        count = pool.unary_stream("/test.Echo/Count")
        join = pool.stream_unary("/test.Echo/Join")
        chat = pool.stream_stream("/test.Echo/Chat")
        for key in KEYS:
            owner = name_of(backends, grpc_ring.get_target_node(key))
            assert hello(b"hi", key=key, timeout=5.0) == owner + b":hi"
        key = KEYS[0]
        owner = name_of(backends, grpc_ring.get_target_node(key))
        assert list(count(b"3", key=key, timeout=5.0)) == [owner + b":0", owner + b":1", owner + b":2"]
        assert join(iter([b"a", b"b"]), key=key, timeout=5.0) == owner + b":a+b"
        assert list(chat([b"x", b"y"], key=key, timeout=5.0)) == [owner + b":x", owner + b":y"]
        # One channel per node, opened once.
        channel = pool.channel_for(key)
        assert channel is pool.channel_for(key)
        assert sorted(pool.nodes) == sorted(grpc_ring.nodes)


def test_serializers_are_applied(backends: list[GrpcBackend],
                                 grpc_ring: chash.ConsistentHashRouter) -> None:
    with ChannelPool(grpc_ring) as pool:
        hello = pool.unary_unary(HELLO, request_serializer=str.encode,
                                 response_deserializer=bytes.decode)
        assert hello("hi", key="k", timeout=5.0).endswith(":hi")


def test_unavailable_fails_over_and_nobody_else_moves(
        backends: list[GrpcBackend], grpc_ring: chash.ConsistentHashRouter) -> None:
    dead = grpc_ring.get_target_node(KEYS[0])
    assert dead is not None
    by_address(backends, dead).stop()
    membership = LocalMembership(grpc_ring)
    before = {key: grpc_ring.get_preference_list(key, 2) for key in KEYS}
    with ChannelPool(grpc_ring, health=membership) as pool:
        hello = pool.unary_unary(HELLO)
        count = pool.unary_stream("/test.Echo/Count")
        for key in KEYS:
            owner, following = before[key]
            expected = following if owner == dead else owner
            assert hello(b"", key=key, timeout=5.0) == name_of(backends, expected) + b":"
        # Health feedback took the dead node out for everyone.
        assert dead not in grpc_ring and dead in membership.taken_out()
        assert dead not in pool.nodes  # and its channel was closed
        assert list(count(b"1", key=KEYS[0], timeout=5.0)) == \
            [name_of(backends, before[KEYS[0]][1]) + b":0"]


def test_a_stream_of_responses_fails_over_before_its_first_message(
        backends: list[GrpcBackend], grpc_ring: chash.ConsistentHashRouter) -> None:
    owner, following = grpc_ring.get_preference_list(KEYS[3], 2)
    by_address(backends, owner).stop()
    with ChannelPool(grpc_ring) as pool:
        count = pool.unary_stream("/test.Echo/Count")
        assert list(count(b"2", key=KEYS[3], timeout=5.0)) == \
            [name_of(backends, following) + b":0", name_of(backends, following) + b":1"]


def test_a_request_iterator_is_never_sent_twice(
        backends: list[GrpcBackend], grpc_ring: chash.ConsistentHashRouter) -> None:
    owner, following = grpc_ring.get_preference_list(KEYS[4], 2)
    by_address(backends, owner).stop()
    with ChannelPool(grpc_ring) as pool:
        join = pool.stream_unary("/test.Echo/Join")
        with pytest.raises(grpc.RpcError) as caught:
            join(iter([b"a"]), key=KEYS[4], timeout=5.0)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        assert by_address(backends, following).hits == 0
        # A sequence can be sent again.
        assert join([b"a"], key=KEYS[4], timeout=5.0) == name_of(backends, following) + b":a"


def test_other_errors_are_the_answer(backends: list[GrpcBackend],
                                     grpc_ring: chash.ConsistentHashRouter) -> None:
    with ChannelPool(grpc_ring) as pool:
        fail = pool.unary_unary("/test.Echo/Fail")
        with pytest.raises(grpc.RpcError) as caught:
            fail(b"", key=KEYS[0], timeout=5.0)
    assert caught.value.code() == grpc.StatusCode.INTERNAL
    assert sum(b.hits for b in backends) == 1


def test_a_node_leaving_closes_its_channel(backends: list[GrpcBackend],
                                           grpc_ring: chash.ConsistentHashRouter) -> None:
    with ChannelPool(grpc_ring) as pool:
        hello = pool.unary_unary(HELLO)
        for key in KEYS:
            hello(b"", key=key, timeout=5.0)
        gone = grpc_ring.get_target_node(KEYS[0])
        assert gone is not None
        old = pool.channel_for(KEYS[0])
        grpc_ring.remove_service_node(gone)
        assert hello(b"", key=KEYS[0], timeout=5.0).startswith(
            name_of(backends, grpc_ring.get_target_node(KEYS[0])))
        assert gone not in pool.nodes
        with pytest.raises(ValueError, match="closed channel"):
            old.unary_unary(HELLO)(b"", timeout=1.0)


def test_bad_input_is_named(grpc_ring: chash.ConsistentHashRouter) -> None:
    pool = ChannelPool(grpc_ring)
    with pytest.raises(ValueError, match="full name"):
        pool.unary_unary("Hello")
    empty = ChannelPool(chash.ConsistentHashRouter())
    with pytest.raises(LookupError, match="no nodes"):
        empty.unary_unary(HELLO)(b"", key="k")
    with pytest.raises(LookupError, match="no nodes"):
        empty.channel_for("k")
    pool.close()


def test_async_pool_routes_fails_over_and_closes(
        backends: list[GrpcBackend], grpc_ring: chash.ConsistentHashRouter) -> None:
    dead = grpc_ring.get_target_node(KEYS[0])
    assert dead is not None
    before = {key: grpc_ring.get_preference_list(key, 2) for key in KEYS}

    async def main() -> None:
        async with AsyncChannelPool(grpc_ring) as pool:
            hello = pool.unary_unary(HELLO)
            count = pool.unary_stream("/test.Echo/Count")
            chat = pool.stream_stream("/test.Echo/Chat")
            for key in KEYS:
                assert await hello(b"", key=key, timeout=5.0) == \
                    name_of(backends, before[key][0]) + b":"
            owner = name_of(backends, before[KEYS[1]][0])
            assert [m async for m in count(b"2", key=KEYS[1], timeout=5.0)] == \
                [owner + b":0", owner + b":1"]
            assert [m async for m in chat([b"q"], key=KEYS[1], timeout=5.0)] == [owner + b":q"]
            by_address(backends, dead).stop()
            for key in KEYS:
                owner_, following = before[key]
                expected = following if owner_ == dead else owner_
                assert await hello(b"", key=key, timeout=5.0) == name_of(backends, expected) + b":"
            grpc_ring.remove_service_node(dead)
            await hello(b"", key=KEYS[1], timeout=5.0)
            assert dead not in pool.nodes

    run(main())
