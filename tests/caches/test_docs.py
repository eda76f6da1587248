"""The snippets of docs/clients.md's sharded-cache sections, run as they
stand against real servers: its ports 7001-7004 (redis-server) and
21211-21213 (memcached) become those of servers started here."""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from _support.compat_programs import memcacheds
from _support.redis_server import RedisServer, redis_server_path

pytest.importorskip("redis", reason="redis-py is in the test extra")
pytest.importorskip("pymemcache", reason="pymemcache is in the test extra")

DOCS = Path(__file__).resolve().parents[2] / "docs" / "clients.md"


def snippets() -> list[str]:
    text = DOCS.read_text(encoding="utf-8")
    part = text[text.index("# Sharded caches"):]
    return re.findall(r"```python\n(.*?)```", part, flags=re.S)


@pytest.fixture(scope="module")
def ports() -> Iterator[dict[str, str]]:
    redis_server_path()
    servers = [RedisServer() for _ in range(4)]
    try:
        for server in servers:
            server.start()
        with memcacheds(3) as caches:
            mapping = {f"127.0.0.1:{7001 + i}": f"127.0.0.1:{s.port}" for i, s in enumerate(servers)}
            mapping |= {f"127.0.0.1:{21211 + i}": f"127.0.0.1:{c.port}" for i, c in enumerate(caches)}
            yield mapping
    finally:
        for server in servers:
            server.close()


def test_the_sections_have_their_snippets() -> None:
    found = snippets()
    assert len(found) == 8
    assert any("reshard" in block.lower() for block in found)


@pytest.mark.parametrize("index", range(8))
def test_snippet_runs(index: int, ports: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    import redis

    for name in ("127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003", "127.0.0.1:7004"):
        client = redis.Redis(host="127.0.0.1", port=int(ports[name].rsplit(":", 1)[1]))
        client.flushall()
        client.close()
    code = snippets()[index]
    code = re.sub(r"127\.0\.0\.1:(7001|7002|7003|7004|21211|21212|21213)\b",
                  lambda m: ports[m.group(0)], code)
    exec(compile(code, f"docs/clients.md snippet {index}", "exec"), {"__name__": "__doc_snippet__"})
