"""The Starlette gateway recipe of docs/clients.md, the block itself, served
by a real uvicorn in front of the echo backends: keys reach their owners,
bodies stream both ways, a dead owner's keys go to the next node, a request
without a key is answered 400."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import chash
from _support.ports import free_port
from _support.threaded_backends import EchoFarm
from _support.waiting import wait_until

httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

DOCS = Path(__file__).resolve().parents[2] / "docs" / "clients.md"
KEYS = [f"user-{i}" for i in range(12)]


def recipe_source() -> str:
    """The docs' Python block that builds the Starlette app."""
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    found = [block for block in blocks if "Starlette(" in block]
    assert len(found) == 1, "docs/clients.md has one Starlette recipe"
    return found[0]


@pytest.fixture(scope="module")
def gateway(farm: EchoFarm) -> Iterator[tuple[str, Any]]:
    """The recipe's app under uvicorn; yields its base URL and the router."""
    source = re.sub(r"127\.0\.0\.1:900(\d)",
                    lambda m: farm.addresses[int(m.group(1)) - 1], recipe_source())
    namespace: dict[str, Any] = {"__name__": "recipe"}
    exec(compile(source, str(DOCS), "exec"), namespace)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(namespace["app"], host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="uvicorn")
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), "uvicorn started")
        assert server.started
        yield f"http://127.0.0.1:{port}", namespace["router"]
    finally:
        server.should_exit = True
        thread.join(20.0)


def test_the_recipe_routes_streams_and_fails_over(gateway: tuple[str, Any], echo: EchoFarm) -> None:
    url, router = gateway
    assert isinstance(router, chash.ConsistentHashRouter)
    name = {b.address: b.name for b in echo.backends}
    with httpx.Client(base_url=url, timeout=10.0) as http:
        for key in KEYS:
            response = http.get(f"/items/{key}", params={"q": "1"}, headers={"X-User-Id": key})
            assert response.status_code == 200
            seen = response.json()
            assert seen["backend"] == name[router.get_target_node(key)]
            assert seen["raw_path"] == f"/items/{key}?q=1"

        def upload() -> Iterator[bytes]:
            for _ in range(16):
                yield b"z" * 65536

        response = http.post("/sink", headers={"X-User-Id": KEYS[0]}, content=upload())
        assert response.text == str(16 * 65536)
        with http.stream("GET", "/big/3000000", headers={"X-User-Id": KEYS[0]}) as big:
            assert sum(len(chunk) for chunk in big.iter_raw()) == 3000000

        assert http.get("/").status_code == 400

        dead = router.get_target_node(KEYS[0])
        echo.stop(dead)
        for key in KEYS:
            owner, following = router.get_preference_list(key, 2)
            response = http.get("/", headers={"X-User-Id": key})
            assert response.json()["backend"] == name[following if owner == dead else owner]
