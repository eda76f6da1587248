"""chash.httpx against real backends: StickyTransport and AsyncStickyTransport,
each with httpx and with its fork httpx2."""

from __future__ import annotations

import threading
import types
from collections.abc import Iterator

import pytest

import chash
from _support.threaded_backends import EchoFarm
from _support.waiting import run
from chash.health import HealthChecker, LocalMembership
from chash.httpx import AsyncStickyTransport, StickyTransport

LIBRARIES = ["httpx", "httpx2"]
KEYS = [f"user-{i}" for i in range(24)]


@pytest.fixture(params=LIBRARIES)
def lib(request: pytest.FixtureRequest) -> types.ModuleType:
    return pytest.importorskip(request.param)


def names(farm: EchoFarm) -> dict[str, str]:
    return {backend.address: backend.name for backend in farm.backends}


def served_by(response: object) -> str:
    return str(response.headers["X-Backend"])  # type: ignore[attr-defined]


def client(lib: types.ModuleType, transport: object, timeout: float = 5.0) -> object:
    return lib.Client(transport=transport, base_url="http://users", timeout=timeout)


def test_every_key_reaches_its_owner(lib: types.ModuleType, echo: EchoFarm,
                                     ring: chash.ConsistentHashRouter) -> None:
    name = names(echo)
    with client(lib, StickyTransport(ring, key="header:X-User-Id")) as http:
        for key in KEYS:
            response = http.get("/cart/items?x=1", headers={"X-User-Id": key})
            assert response.status_code == 200
            assert served_by(response) == name[ring.get_target_node(key)]
            seen = response.json()
            assert seen["raw_path"] == "/cart/items?x=1" and seen["headers"]["Host"] == "users"
            # The caller's URL is kept: cookies and redirects read it.
            assert str(response.request.url) == "http://users/cart/items?x=1"
    assert min(b.hits for b in echo.backends) > 0


def test_async_every_key_reaches_its_owner(lib: types.ModuleType, echo: EchoFarm,
                                           ring: chash.ConsistentHashRouter) -> None:
    name = names(echo)

    async def main() -> None:
        async with lib.AsyncClient(transport=AsyncStickyTransport(ring, key="query:room"),
                                   base_url="http://rooms") as http:
            for key in KEYS:
                response = await http.get("/join", params={"room": key})
                assert served_by(response) == name[ring.get_target_node(key)]

    run(main())


@pytest.mark.parametrize("spec, request_kwargs, expected", [
    ("cookie:session", {"url": "/", "headers": {"Cookie": "a=1; session=s-7"}}, "s-7"),
    ("path", {"url": "/u42/cart"}, "u42"),
    ("path:2", {"url": "/users/42/cart"}, "users/42"),
])
def test_key_specs_as_the_gateway_reads_them(lib: types.ModuleType, echo: EchoFarm,
                                             ring: chash.ConsistentHashRouter, spec: str,
                                             request_kwargs: dict[str, object],
                                             expected: str) -> None:
    with client(lib, StickyTransport(ring, key=spec)) as http:
        response = http.get(**request_kwargs)
    assert served_by(response) == names(echo)[ring.get_target_node(expected)]


def test_a_callable_key_and_the_extension_override(lib: types.ModuleType, echo: EchoFarm,
                                                   ring: chash.ConsistentHashRouter) -> None:
    name = names(echo)
    seen = []

    def tenant(request: object) -> str:
        seen.append(request)
        return "tenant-" + request.url.path.strip("/")  # type: ignore[attr-defined]

    with client(lib, StickyTransport(ring, key=tenant)) as http:
        assert served_by(http.get("/9")) == name[ring.get_target_node("tenant-9")]
        override = next(k for k in KEYS if ring.get_target_node(k) != ring.get_target_node("tenant-9"))
        response = http.get("/9", extensions={"chash.key": override})
        assert served_by(response) == name[ring.get_target_node(override)]
    assert len(seen) == 1  # the override is read first, the callable not called


def test_a_request_without_a_key_raises_and_sends_nothing(lib: types.ModuleType, echo: EchoFarm,
                                                          ring: chash.ConsistentHashRouter) -> None:
    with client(lib, StickyTransport(ring, key="header:X-User-Id")) as http:
        with pytest.raises(ValueError, match="header:X-User-Id is absent"):
            http.get("/")
        ring.remove_service_node(ring.nodes[0])
        for node in list(ring.nodes):
            ring.remove_service_node(node)
        with pytest.raises(LookupError, match="no nodes"):
            http.get("/", headers={"X-User-Id": "u"})
    assert sum(b.hits for b in echo.backends) == 0


def test_bad_arguments_are_named() -> None:
    router = chash.ConsistentHashRouter()
    with pytest.raises(ValueError, match="unknown key source"):
        StickyTransport(router, key="body:x")
    with pytest.raises(TypeError, match="key must be"):
        StickyTransport(router, key=42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retries"):
        StickyTransport(router, key="path", retries=-1)
    with pytest.raises(ValueError, match="balance_factor"):
        StickyTransport(router, key="path", balance=0.5)
    with pytest.raises(TypeError, match="health"):
        StickyTransport(router, key="path", health=object())
    with pytest.raises(ValueError, match="HOST:PORT"):
        StickyTransport(router, {"a": "nowhere"}, key="path")


def test_a_killed_owner_fails_over_and_nobody_else_moves(lib: types.ModuleType, echo: EchoFarm,
                                                         ring: chash.ConsistentHashRouter) -> None:
    name = names(echo)
    dead = ring.get_target_node(KEYS[0])
    assert dead is not None
    echo.stop(dead)
    with client(lib, StickyTransport(ring, key="header:X-User-Id")) as http:
        for key in KEYS:
            owner = ring.get_target_node(key)
            expected = ring.get_preference_list(key, 2)[1] if owner == dead else owner
            # A POST too: nothing reached the dead node, so it is safe to send again.
            for method in ("GET", "POST"):
                response = http.request(method, "/x", headers={"X-User-Id": key}, content=b"b")
                assert served_by(response) == name[expected], (key, method)
    assert echo.by_address(dead).hits == 0


def test_async_killed_owner_fails_over(lib: types.ModuleType, echo: EchoFarm,
                                       ring: chash.ConsistentHashRouter) -> None:
    name = names(echo)
    dead = ring.get_target_node(KEYS[0])
    assert dead is not None
    echo.stop(dead)

    async def main() -> None:
        async with lib.AsyncClient(transport=AsyncStickyTransport(ring, key="header:X-User-Id"),
                                   base_url="http://users") as http:
            for key in KEYS:
                owner = ring.get_target_node(key)
                expected = ring.get_preference_list(key, 2)[1] if owner == dead else owner
                response = await http.get("/x", headers={"X-User-Id": key})
                assert served_by(response) == name[expected]

    run(main())


def test_only_retries_plus_one_nodes_are_tried(lib: types.ModuleType, echo: EchoFarm,
                                               ring: chash.ConsistentHashRouter) -> None:
    key = KEYS[0]
    first, second, third = ring.get_preference_list(key, 3)
    echo.stop(first)
    echo.stop(second)
    with client(lib, StickyTransport(ring, key="header:X-User-Id", retries=1)) as http, \
            pytest.raises(lib.ConnectError):
        http.get("/", headers={"X-User-Id": key})
    assert echo.by_address(third).hits == 0


def slow_owner(echo: EchoFarm, ring: chash.ConsistentHashRouter) -> tuple[str, str, str]:
    """A key whose owner answers too late, its owner and the next node."""
    key = KEYS[1]
    owner, following = ring.get_preference_list(key, 2)
    echo.by_address(owner).delay = 1.0
    return key, owner, following


def test_a_non_idempotent_request_that_was_sent_is_not_retried(
        lib: types.ModuleType, echo: EchoFarm, ring: chash.ConsistentHashRouter) -> None:
    key, owner, following = slow_owner(echo, ring)
    with client(lib, StickyTransport(ring, key="header:X-User-Id"), timeout=0.3) as http:
        with pytest.raises(lib.ReadTimeout):
            http.post("/order", headers={"X-User-Id": key}, content=b"once")
        assert echo.by_address(owner).hits == 1 and echo.by_address(following).hits == 0
        # The same failure on a GET goes on to the next node.
        response = http.get("/order", headers={"X-User-Id": key})
        assert served_by(response) == echo.by_address(following).name


def test_a_streamed_body_is_never_replayed(lib: types.ModuleType, echo: EchoFarm,
                                           ring: chash.ConsistentHashRouter) -> None:
    key, owner, following = slow_owner(echo, ring)
    sent = []

    def body() -> Iterator[bytes]:
        sent.append(1)
        yield b"part one, "
        yield b"part two"

    with client(lib, StickyTransport(ring, key="header:X-User-Id"), timeout=0.3) as http:
        with pytest.raises(lib.ReadTimeout):
            http.put("/doc", headers={"X-User-Id": key}, content=body())
        assert sent == [1] and echo.by_address(following).hits == 0
        # PUT is idempotent: the same body in memory goes on to the next node.
        response = http.put("/doc", headers={"X-User-Id": key}, content=b"part one, part two")
        assert served_by(response) == echo.by_address(following).name
        assert response.json()["body"] == "part one, part two"


def test_failures_feed_the_health_checker_and_take_the_node_out(
        lib: types.ModuleType, echo: EchoFarm, ring: chash.ConsistentHashRouter) -> None:
    dead = ring.get_target_node(KEYS[0])
    assert dead is not None
    # One round while every node is up (the checker learns the nodes), then
    # only the transport's reports: the checker is never started.
    checker = HealthChecker(ring, fall=2, interval=60.0, timeout=2.0)
    checker.check_now()
    echo.stop(dead)
    with client(lib, StickyTransport(ring, key="header:X-User-Id", health=checker)) as http:
        # Three of the dead node's keys, from a pool large enough for any
        # ports the nodes got (24 keys over two nodes can leave one with 2).
        keys = [k for k in (f"user-{i}" for i in range(1000))
                if ring.get_target_node(k) == dead][:3]
        http.get("/", headers={"X-User-Id": keys[0]})
        assert dead in ring  # one failure of fall=2
        http.get("/", headers={"X-User-Id": keys[1]})
        assert dead not in ring
        assert checker.status()[dead].last_error is not None
        # Out of the ring, its keys go straight to their next node.
        http.get("/", headers={"X-User-Id": keys[2]})
    assert str(checker.status()[dead].state) == "down"


def test_failures_mark_a_membership_down(lib: types.ModuleType, echo: EchoFarm,
                                         ring: chash.ConsistentHashRouter) -> None:
    dead = ring.get_target_node(KEYS[0])
    assert dead is not None
    echo.stop(dead)
    membership = LocalMembership(ring)
    with client(lib, StickyTransport(ring, key="header:X-User-Id", health=membership)) as http:
        http.get("/", headers={"X-User-Id": KEYS[0]})
    assert dead not in ring and dead in membership.taken_out()


def test_connection_pools_are_reused_and_closed_when_a_node_leaves(
        lib: types.ModuleType, echo: EchoFarm, ring: chash.ConsistentHashRouter) -> None:
    transport = StickyTransport(ring, key="header:X-User-Id")
    with client(lib, transport) as http:
        for _ in range(2):
            for key in KEYS:
                http.get("/", headers={"X-User-Id": key})
        # One keep-alive connection per backend served all 48 requests.
        assert [len(b.peers) for b in echo.backends] == [1, 1, 1]
        assert sorted(transport.pooled_nodes) == sorted(ring.nodes)
        gone = ring.nodes[0]
        ring.remove_service_node(gone)
        http.get("/", headers={"X-User-Id": KEYS[0]})
        assert sorted(transport.pooled_nodes) == sorted(ring.nodes)


def test_the_sync_transport_is_thread_safe(lib: types.ModuleType, echo: EchoFarm,
                                           ring: chash.ConsistentHashRouter) -> None:
    name = names(echo)
    wrong: list[str] = []
    errors: list[BaseException] = []
    with client(lib, StickyTransport(ring, key="header:X-User-Id")) as http:
        start = threading.Barrier(6)

        def work(offset: int) -> None:
            try:
                start.wait(10.0)
                for i in range(12):
                    key = KEYS[(offset * 5 + i) % len(KEYS)]
                    if served_by(http.get("/", headers={"X-User-Id": key})) != \
                            name[ring.get_target_node(key)]:
                        wrong.append(key)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60.0)
    assert errors == [] and wrong == []
    assert sum(b.hits for b in echo.backends) == 6 * 12


def test_bounded_loads_spill_a_held_key_to_the_next_node(
        lib: types.ModuleType, echo: EchoFarm, ring: chash.ConsistentHashRouter) -> None:
    key = KEYS[2]
    owner, following = ring.get_preference_list(key, 2)
    transport = StickyTransport(ring, key="header:X-User-Id", balance=1.0)
    loads = transport.routes.bounded
    assert loads is not None
    with client(lib, transport) as http:
        with http.stream("GET", "/big/200000", headers={"X-User-Id": key}) as first:
            assert loads.loads == {owner: 1}  # in flight until the body is closed
            with http.stream("GET", "/big/200000", headers={"X-User-Id": key}) as second:
                assert served_by(first) == echo.by_address(owner).name
                assert served_by(second) == echo.by_address(following).name
                assert len(second.read()) == 200000
        assert loads.in_flight == 0
        assert served_by(http.get("/", headers={"X-User-Id": key})) == echo.by_address(owner).name
        assert loads.in_flight == 0


def test_one_given_inner_transport_serves_every_node(lib: types.ModuleType, echo: EchoFarm,
                                                     ring: chash.ConsistentHashRouter) -> None:
    inner = lib.HTTPTransport(retries=0)
    with client(lib, StickyTransport(ring, key="header:X-User-Id", transport=inner)) as http:
        for key in KEYS:
            assert served_by(http.get("/", headers={"X-User-Id": key})) == \
                names(echo)[ring.get_target_node(key)]
    assert [len(b.peers) for b in echo.backends] == [1, 1, 1]


def test_addresses_map_node_names(lib: types.ModuleType, echo: EchoFarm) -> None:
    router = chash.ConsistentHashRouter()
    router.add_service_nodes(["alpha", "beta", "gamma"])
    addresses = dict(zip(["alpha", "beta", "gamma"], echo.addresses, strict=True))
    with client(lib, StickyTransport(router, addresses, key="header:X-User-Id")) as http:
        for key in KEYS[:8]:
            response = http.get("/", headers={"X-User-Id": key})
            assert served_by(response) == names(echo)[addresses[router.get_target_node(key)]]
        router.add_service_node("delta")
        unmapped = next(k for k in KEYS if router.get_target_node(k) == "delta")
        with pytest.raises(KeyError, match="delta"):
            http.get("/", headers={"X-User-Id": unmapped})


@pytest.mark.parametrize("url", ["http://users/a/b?c=1&d=%20", "https://users:8443/", "http://u@h/x#f"])
@pytest.mark.parametrize("host, port", [("127.0.0.1", 8080), ("::1", 9000), ("Cache-A.svc", 80)])
def test_retargeting_equals_copy_with(lib: types.ModuleType, url: str, host: str, port: int) -> None:
    from chash.httpx.exchange import Library

    library = Library(lib)
    original = lib.URL(url)
    for _ in range(2):  # the first call fills the cache, the second takes the fast path
        fast = library.retarget(original, host, port)
        slow = original.copy_with(host=host, port=port)
        assert fast == slow and str(fast) == str(slow) and fast.raw_path == slow.raw_path
        assert (fast.host, fast.port, fast.raw_host) == (slow.host, slow.port, slow.raw_host)
    assert library._fast


def test_async_bounded_loads_hold_a_streamed_response(lib: types.ModuleType, echo: EchoFarm,
                                                      ring: chash.ConsistentHashRouter) -> None:
    key = KEYS[2]
    owner, following = ring.get_preference_list(key, 2)
    transport = AsyncStickyTransport(ring, key="header:X-User-Id", balance=1.0)
    loads = transport.routes.bounded
    assert loads is not None

    async def main() -> None:
        async with lib.AsyncClient(transport=transport, base_url="http://users") as http:
            async with http.stream("GET", "/big/100000", headers={"X-User-Id": key}) as first:
                assert loads.loads == {owner: 1}
                response = await http.get("/", headers={"X-User-Id": key})
                assert served_by(first) == echo.by_address(owner).name
                assert served_by(response) == echo.by_address(following).name
                assert len(await first.aread()) == 100000
            assert loads.in_flight == 0

    run(main())
