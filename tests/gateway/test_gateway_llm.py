"""``affinity="prefix"`` (``chash gateway --affinity prefix``): completions
routed by their prompt through the gateway to stand-in engines
(``chash.demo.engine``), spoken to with the official ``openai`` client,
httpx and aiohttp; and the prompt reader of ``chash.gateway.llm``."""
from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from _support.waiting import eventually, run
from chash.gateway.llm import PromptRoutes, error_event, prompt_of

aiohttp = pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")
httpx = pytest.importorskip("httpx", reason="httpx (the test extra) is not installed")
openai = pytest.importorskip("openai", reason="openai (the test extra) is not installed")

from chash.demo.engine import StandInEngine  # noqa: E402
from chash.gateway import Gateway, GatewayConfig  # noqa: E402

SYSTEM = "You are a careful assistant who answers in one short sentence. " * 20
NODE = "X-Node"


@contextlib.asynccontextmanager
async def engines_behind_gateway(names: str = "abc", **options: Any,
                                 ) -> AsyncIterator[tuple[Gateway, dict[str, StandInEngine], Any]]:
    """Stand-in engines named by the letters of ``names`` (``options``
    starting ``engine_`` are theirs) behind a gateway with prefix affinity,
    and an ``openai`` client of the gateway."""
    settings = {k[len("engine_"):]: v for k, v in options.items() if k.startswith("engine_")}
    engines = {name: await StandInEngine(name, **settings).start() for name in names}
    config = GatewayConfig(affinity="prefix", health=False, node_header=NODE,
                           **{k: v for k, v in options.items() if not k.startswith("engine_")})
    gateway = Gateway({e.name: e.address for e in engines.values()}, config)
    try:
        await gateway.start()
        async with openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key="unused",
                                      max_retries=0, timeout=30.0) as client:
            yield gateway, engines, client
    finally:
        await gateway.stop()
        for engine in engines.values():
            await engine.stop()


def chat(question: str, system: str = SYSTEM) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


async def served_by(client: Any, messages: list[dict[str, str]], **extra: Any,
                    ) -> tuple[str, Any]:
    """The node that answered ``messages`` (non-streamed) and the answer."""
    raw = await client.chat.completions.with_raw_response.create(
        model="m", messages=messages, max_tokens=4, **extra)
    return raw.headers[NODE], raw.parse()


# -- the prompt of a body -------------------------------------------------------


def test_the_prompt_of_messages_is_each_role_and_its_text_parts_in_order() -> None:
    body = json.dumps({"model": "m", "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image_url", "image_url": {"url": "x"}},
                                     {"type": "text", "text": "here"}]}]}).encode()
    assert prompt_of(body) == "system:\nbe brief\nuser:\nlook\nhere"


@pytest.mark.parametrize(("prompt", "expected"), [
    ("once upon", "once upon"), (["a", "b"], "a\nb"), ([1, 2, 3], [1, 2, 3])])
def test_the_prompt_of_a_completion_is_its_text_or_its_tokens(prompt: Any,
                                                              expected: Any) -> None:
    assert prompt_of(json.dumps({"model": "m", "prompt": prompt}).encode()) == expected


@pytest.mark.parametrize("body", [b"", b"not json", b"[1, 2]", b'{"model": "m"}',
                                  b'{"prompt": ""}', b'{"prompt": [true]}',
                                  b'{"messages": [1]}', b"\xff\xfe"])
def test_a_body_without_a_readable_prompt_has_none(body: bytes) -> None:
    assert prompt_of(body) is None


def test_the_error_event_is_one_chunk_then_the_last_chunk() -> None:
    chunk = error_event("disconnected mid-response")
    size, rest = chunk.split(b"\r\n", 1)
    event, tail = rest[:int(size, 16)], rest[int(size, 16):]
    assert tail == b"\r\n0\r\n\r\n"
    assert event.startswith(b"data: ") and event.endswith(b"\n\n")
    assert "disconnected" in json.loads(event[6:])["error"]["message"]


def test_affinity_must_be_prefix_or_none() -> None:
    with pytest.raises(ValueError, match="affinity must be 'prefix' or None"):
        GatewayConfig(affinity="session")
    assert GatewayConfig(affinity="prefix").affinity == "prefix"


# -- routing by prompt ------------------------------------------------------------


def test_one_prefix_goes_to_one_engine_and_hits_its_cache_while_loads_are_even() -> None:
    async def main() -> None:
        async with engines_behind_gateway() as (gateway, engines, client):
            seen = [await served_by(client, chat(f"question {i}")) for i in range(6)]
            nodes = {node for node, _ in seen}
            assert len(nodes) == 1, nodes
            node = nodes.pop()
            # The first one filled the cache; the others hit it (as the
            # engine reports, and as its counters say).
            cached = [answer.usage.prompt_tokens_details.cached_tokens for _, answer in seen]
            assert cached[0] == 0 and all(c > 0 for c in cached[1:]), cached
            assert engines[node].cached_tokens == sum(cached)
            assert engines[node].requests == 6
            assert gateway.prompts is not None and gateway.prompts.routed["prefix"] == 6
            # Other prefixes spread over the engines.
            others = {(await served_by(client, chat("q", system=f"system prompt {i} " * 40)))[0]
                      for i in range(12)}
            assert len(others) >= 2, others
    run(main())


def test_streamed_with_the_openai_client_the_same_prefix_stays_on_its_engine() -> None:
    async def main() -> None:
        async with engines_behind_gateway() as (gateway, engines, client):
            node, _ = await served_by(client, chat("first"))
            raw = await client.chat.completions.with_raw_response.create(
                model="m", messages=chat("second"), max_tokens=5, stream=True,
                stream_options={"include_usage": True})
            assert raw.headers[NODE] == node
            text, usage = [], None
            async for chunk in raw.parse():
                if chunk.choices:
                    text.append(chunk.choices[0].delta.content or "")
                if chunk.usage is not None:
                    usage = chunk.usage
            assert "".join(text) == " t0 t1 t2 t3 t4"
            assert usage is not None and usage.prompt_tokens_details.cached_tokens > 0
            completion = await client.completions.create(model="m", prompt=SYSTEM, max_tokens=3)
            assert completion.choices[0].text == " t0 t1 t2"
            assert sum(e.requests for e in engines.values()) == 3
    run(main())


def test_a_session_header_routes_by_the_ring_whatever_the_prompt() -> None:
    async def main() -> None:
        async with engines_behind_gateway() as (gateway, _, client):
            nodes = {(await served_by(client, chat(f"q{i}", system=f"prompt {i} " * 30),
                                      extra_headers={"x-session-id": "user-7"}))[0]
                     for i in range(5)}
            assert len(nodes) == 1
            assert nodes == set(gateway.router.get_preference_list("user-7", 1))
            assert gateway.prompts is not None and gateway.prompts.routed["session"] == 5
    run(main())


def test_a_session_over_its_bound_goes_to_its_next_node() -> None:
    async def main() -> None:
        async with engines_behind_gateway(engine_token_rate=20.0) as (gateway, _, client):
            owner, following = gateway.router.get_preference_list("user-9", 2)
            async with httpx.AsyncClient(base_url=gateway.url, timeout=30.0) as http:
                body = {"model": "m", "messages": chat("long"), "max_tokens": 40,
                        "stream": True}
                async with http.stream("POST", "/v1/chat/completions", json=body,
                                       headers={"x-session-id": "user-9"}) as slow:
                    assert slow.headers[NODE] == owner
                    # One in flight on the owner: ceil(1.25 x 2) = 3 over 3
                    # nodes is 1 each, so the owner is full.
                    answer = await http.post("/v1/chat/completions", json={
                        "model": "m", "messages": chat("short"), "max_tokens": 1},
                        headers={"x-session-id": "user-9"})
                    assert answer.status_code == 200 and answer.headers[NODE] == following
                    await slow.aclose()
    run(main())


# -- bodies without a prompt -------------------------------------------------------


@pytest.mark.parametrize("body", [b"not json at all", b'{"model": "m"}', b""])
def test_a_body_without_a_prompt_goes_to_the_least_loaded_engine(body: bytes) -> None:
    async def main() -> None:
        async with engines_behind_gateway(engine_token_rate=20.0) as (gateway, _, client):
            async with httpx.AsyncClient(base_url=gateway.url, timeout=30.0) as http:
                slow_body = {"model": "m", "messages": chat("slow"), "max_tokens": 40,
                             "stream": True}
                async with http.stream("POST", "/v1/chat/completions",
                                       json=slow_body) as slow:
                    busy = slow.headers[NODE]
                    answer = await http.post("/v1/chat/completions", content=body,
                                             headers={"content-type": "application/json"})
                    # The engine, not the gateway, says what is wrong.
                    assert answer.status_code == 400, answer.text
                    assert "error" in answer.json()
                    assert answer.headers[NODE] != busy
                    await slow.aclose()
            assert gateway.prompts is not None and gateway.prompts.routed["least-loaded"] == 1
    run(main())


def test_a_bodiless_post_on_a_kept_alive_connection_is_routed_as_a_completion() -> None:
    async def main() -> None:
        async with engines_behind_gateway() as (gateway, engines, client):
            for i in range(12):  # idle pooled connections to the engines
                await served_by(client, chat("q", system=f"system prompt {i} " * 40))
            assert all(e.requests for e in engines.values())
            owner = gateway.router.get_preference_list("u1", 1)[0]
            async with httpx.AsyncClient(base_url=gateway.url, timeout=30.0) as http:
                for _ in range(2):  # with the gateway's key: a session
                    answer = await http.post("/v1/completions", content=b"",
                                             headers={"X-User-Id": "u1"})
                    assert answer.status_code == 400 and answer.headers[NODE] == owner
                answer = await http.post("/v1/completions", content=b"")
                assert answer.status_code == 400
            assert gateway.prompts is not None
            assert gateway.prompts.routed == {"prefix": 12, "session": 2, "least-loaded": 1}
    run(main())


# -- failures ------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_an_engine_failing_before_the_first_byte_is_passed_over(stream: bool) -> None:
    async def main() -> None:
        async with engines_behind_gateway() as (gateway, engines, client):
            node, _ = await served_by(client, chat("warm"))
            # Closes the connection before answering, twice: a kept-alive
            # connection closed as it is reused is tried once more on a new
            # one (nothing came back), and that one fails for good.
            engines[node].drop = 2
            raw = await client.chat.completions.with_raw_response.create(
                model="m", messages=chat("again"), max_tokens=3, stream=stream)
            assert raw.headers[NODE] != node and engines[node].drop == 0
            if stream:
                text = "".join([chunk.choices[0].delta.content async for chunk in raw.parse()
                                if chunk.choices])
            else:
                text = raw.parse().choices[0].message.content
            assert text == " t0 t1 t2"
            await engines[node].stop()  # refused: the next one as well
            other, _ = await served_by(client, chat("third"))
            assert other != node
    run(main())


def test_an_engine_failing_mid_stream_ends_the_stream_with_an_error_event() -> None:
    async def main() -> None:
        async with engines_behind_gateway() as (gateway, engines, client):
            node, _ = await served_by(client, chat("warm"))
            engines[node].cut_after = 3
            stream = await client.chat.completions.create(
                model="m", messages=chat("cut"), max_tokens=10, stream=True)
            got = []
            with pytest.raises(openai.APIError, match="mid-stream"):
                async for chunk in stream:
                    got.append(chunk.choices[0].delta.content)
            assert got == [" t0", " t1", " t2"]
            # httpx sees a whole chunked body, its last event the error.
            body = {"model": "m", "messages": chat("cut"), "max_tokens": 10, "stream": True}
            async with httpx.AsyncClient(base_url=gateway.url, timeout=30.0) as http, \
                    http.stream("POST", "/v1/chat/completions", json=body) as response:
                lines = [line async for line in response.aiter_lines() if line]
            assert len(lines) == 4 and json.loads(lines[-1][6:])["error"]["code"] == 502
    run(main())


# -- streaming ------------------------------------------------------------------------


def test_events_are_relayed_as_they_come_not_at_the_end() -> None:
    async def main() -> None:
        count = 40  # 2 s at 20 tokens a second
        async with engines_behind_gateway(engine_token_rate=20.0) as (gateway, engines, client):
            body = {"model": "m", "prompt": SYSTEM, "max_tokens": count, "stream": True}
            async with httpx.AsyncClient(base_url=gateway.url, timeout=30.0) as http, \
                    http.stream("POST", "/v1/completions", json=body) as response:
                engine = engines[response.headers[NODE]]
                sent_at_first = None
                events = []
                async for line in response.aiter_lines():
                    if line.startswith("data: "):
                        if sent_at_first is None:
                            sent_at_first = engine.events
                        events.append(line)
            assert events[-1] == "data: [DONE]" and len(events) == count + 1
            # When the first event reached the client, the engine had not
            # yet written most of the others.
            assert sent_at_first is not None and sent_at_first < count // 2, sent_at_first
    run(main())


def test_aiohttp_streamed_and_not() -> None:
    async def main() -> None:
        async with engines_behind_gateway(engine_token_rate=20.0) as (gateway, engines, _), \
                aiohttp.ClientSession() as session:
            url = f"{gateway.url}/v1/chat/completions"
            async with session.post(url, json={"model": "m", "messages": chat("a"),
                                               "max_tokens": 2}) as answer:
                assert answer.status == 200
                data = await answer.json()
                assert data["choices"][0]["message"]["content"] == " t0 t1"
                node = answer.headers[NODE]
            async with session.post(url, json={"model": "m", "messages": chat("b"),
                                               "max_tokens": 30, "stream": True}) as answer:
                assert answer.headers[NODE] == node
                assert answer.headers["Content-Type"].startswith("text/event-stream")
                first = await answer.content.readline()
                assert first.startswith(b"data: ")
                # The first event is here while the engine is mid-stream.
                assert engines[node].events < 15
                rest = await answer.content.read()
                assert rest.rstrip().endswith(b"data: [DONE]")
    run(main())


def test_a_streams_prefill_leaves_the_estimate_at_its_first_event() -> None:
    async def main() -> None:
        async with engines_behind_gateway(engine_token_rate=20.0, engine_prefill_rate=400.0,
                                          ) as (gateway, engines, _):
            prompts = gateway.prompts
            assert prompts is not None
            body = {"model": "m", "prompt": SYSTEM, "max_tokens": 40, "stream": True}
            async with httpx.AsyncClient(base_url=gateway.url, timeout=30.0) as http:
                async def first_event() -> tuple[str, int, dict[str, float]]:
                    """The node, its requests in flight and the estimates,
                    as the first event arrives."""
                    async with http.stream("POST", "/v1/completions", json=body) as response:
                        async for line in response.aiter_lines():
                            if line.startswith("data: "):
                                node = response.headers[NODE]
                                return node, gateway.loads[node], dict(prompts.queued)
                    raise AssertionError("no event")

                task = asyncio.create_task(first_event())
                # About 1.2 s of prefill (300 tokens at 400 a second), all
                # of it uncached: the estimate holds the prompt's tokens.
                await eventually(lambda: prompts.queued, "the estimate holds the prefill")
                assert list(prompts.queued.values()) == [len(SYSTEM) / 4]
                node, in_flight, queued = await task
            assert in_flight == 1 and queued == {}
            assert engines[node].requests == 1
    run(main())


def test_prompt_routes_need_a_block_of_at_least_one_token() -> None:
    with pytest.raises(ValueError, match="block_chars"):
        PromptRoutes({}, [], {}, block_chars=2)  # type: ignore[arg-type]


def test_the_loads_and_estimates_return_to_zero_after_the_requests() -> None:
    async def main() -> None:
        async with engines_behind_gateway() as (gateway, _, client):
            await asyncio.gather(*(served_by(client, chat(f"q{i}")) for i in range(8)))
            assert gateway.prompts is not None and gateway.prompts.queued == {}
            assert set(gateway.loads.values()) == {0}
    run(main())


# -- the program ------------------------------------------------------------------------


@pytest.mark.parametrize("workers", ["1", "2"])
def test_chash_gateway_affinity_prefix_routes_completions_by_prompt(workers: str) -> None:
    from _support.gateway_processes import gateway_process

    async def main() -> None:
        engines = {name: await StandInEngine(name).start() for name in "abc"}
        backends = ",".join(f"{e.name}={e.address}" for e in engines.values())
        try:
            async with gateway_process("--backend", backends, "--affinity", "prefix",
                                       "--no-health", "--node-header", NODE,
                                       "--workers", workers) as running, \
                    openai.AsyncOpenAI(base_url=f"{running.url}/v1", api_key="unused",
                                       max_retries=0, timeout=30.0) as client:
                # Every worker sends a prefix to the same first choice while
                # loads are even (all start from the ring's preference list).
                nodes = {(await served_by(client, chat(f"q{i}")))[0] for i in range(6)}
                assert len(nodes) == 1, nodes
                answer = await client.completions.create(model="m", prompt="x" * 300,
                                                         max_tokens=2, stream=True)
                assert [c.choices[0].text async for c in answer if c.choices] == [" t0", " t1"]
                async with httpx.AsyncClient(timeout=30.0) as http:
                    bad = await http.post(f"{running.url}/v1/chat/completions",
                                          content=b"{not json")
                assert bad.status_code == 400 and bad.headers[NODE] in engines
            (node,) = nodes
            assert engines[node].requests >= 6 and engines[node].cached_tokens > 0
        finally:
            for engine in engines.values():
                await engine.stop()
    run(main())


class _Zoned:
    """Routes that reorder the ring's list (as the zones do): no get_bounded."""

    def __init__(self, router: Any) -> None:
        self._router = router

    def get_preference_list(self, key: Any, n: int, /) -> list[str]:
        return list(reversed(self._router.get_preference_list(key, n)))


def test_a_session_is_bounded_by_the_routers_get_bounded_as_by_the_rule() -> None:
    import random

    from chash import ConsistentHashRouter

    rng = random.Random(7)
    router = ConsistentHashRouter()
    for i in range(6):
        router.add_service_node(f"10.0.0.{i}:8000", 1 + i % 3)
    in_flight: dict[str, int] = {}
    prompts = PromptRoutes(router, router, in_flight, balance_factor=1.5)
    zoned = PromptRoutes(_Zoned(router), router, in_flight, balance_factor=1.5)
    bounded = 0
    for i in range(400):
        in_flight.clear()
        in_flight.update({node: rng.randrange(6) for node in router.nodes if rng.random() < 0.7})
        session = f"user-{i}".encode()
        nodes = router.get_preference_list(session, len(router))
        choice = prompts.choose(None, session, 3)
        # The router's get_bounded and the rule over its list agree.
        assert choice.nodes[0] == prompts._bounded(nodes, in_flight) \
            == router.get_bounded(session, in_flight, 1.5)
        assert choice.nodes == ([choice.nodes[0]] + [n for n in nodes if n != choice.nodes[0]])[:3]
        bounded += choice.nodes[0] != nodes[0]
        # Routes that reorder the list keep the rule over their own order.
        order = _Zoned(router).get_preference_list(session, len(router))
        assert zoned.choose(None, session, 1).nodes == [zoned._bounded(order, in_flight)]
    assert bounded > 20  # the loads moved some sessions off their owner


# -- nodes that leave ---------------------------------------------------------------


def test_prompt_routes_forget_the_nodes_the_configuration_dropped() -> None:
    from chash import ConsistentHashRouter

    router = ConsistentHashRouter()
    router.add_service_nodes(["a", "b", "c"])
    prompts = PromptRoutes(router, router, {})
    body = json.dumps({"model": "m", "prompt": SYSTEM}).encode()
    choice = prompts.choose(body, None, 3)
    # Every node the preference list named has a record; the chosen one
    # holds the prompt's blocks and an estimate of its prefill.
    assert sorted(prompts.affinity.nodes()) == ["a", "b", "c"]
    node = choice.nodes[0]
    assert prompts.affinity.held(node) > 0 and prompts.queued[node] > 0
    router.remove_service_node(node)
    assert prompts.prune(lambda n: n in router) == [node]
    assert node not in prompts.affinity.nodes() and prompts.affinity.held(node) == 0
    assert node not in prompts.queued
    assert prompts.prune(lambda n: n in router) == []
    # A node never named is forgotten quietly; the others are untouched.
    prompts.forget("never-seen")
    assert sorted(prompts.affinity.nodes()) == sorted(set("abc") - {node})
    # The completion under way there ends without an estimate to change.
    prompts.done(choice)
    assert node not in prompts.queued


def test_a_node_a_reload_removes_loses_its_record_and_one_held_down_keeps_it() -> None:
    from chash.gateway.reload import RingChanges

    async def main() -> None:
        engines = {name: await StandInEngine(name).start() for name in "abc"}
        config = GatewayConfig(affinity="prefix", node_header=NODE, health_interval=0.1,
                               health_timeout=5.0, fall=1)
        gateway = Gateway({e.name: e.address for e in engines.values()}, config)
        try:
            await gateway.start()
            prompts = gateway.prompts
            assert prompts is not None
            async with openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key="unused",
                                          max_retries=0, timeout=30.0) as client:
                node, _ = await served_by(client, chat("q"))
            assert prompts.affinity.held(node) > 0
            # Taken out by the health checks: out of the ring, record kept
            # (its engine may come back with its cache).
            await engines[node].stop()
            await eventually(lambda: node not in gateway.router, "the checks take it out")
            gateway.ring_changed()
            await asyncio.sleep(0)
            assert prompts.affinity.held(node) > 0
            # Removed by a reload: the record goes.
            gateway.reconfigure(config, RingChanges(removed=(node,)))
            assert node not in prompts.affinity.nodes()
            assert sorted(prompts.affinity.nodes()) == sorted(set("abc") - {node})
        finally:
            await gateway.stop()
            for engine in engines.values():
                await engine.stop()
    run(main())


def test_a_node_that_leaves_the_ring_unwatched_loses_its_record_at_the_ring_change() -> None:
    # A shared ring's new version or a DNS record set drops a node: no
    # health check watches it any more, and the change is told with
    # ring_changed (here from another thread, as a membership's is).
    import threading

    async def main() -> None:
        async with engines_behind_gateway() as (gateway, _, client):
            prompts = gateway.prompts
            assert prompts is not None
            node, _ = await served_by(client, chat("q"))
            assert node in prompts.affinity.nodes()
            gateway.router.remove_service_node(node)
            thread = threading.Thread(target=gateway.ring_changed)
            thread.start()
            thread.join()
            await eventually(lambda: node not in prompts.affinity.nodes(), "the record goes")
            assert len(prompts.affinity.nodes()) == 2
    run(main())
