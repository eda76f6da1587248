"""nutcracker (twemproxy) pools of redis-servers, as YAML."""
from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from _support.redis_server import RedisServer


def pool_yaml(servers: Sequence[RedisServer], listen: int, *, weights: list[int] | None = None,
              names: list[str | None] | None = None, hash_tag: str | None = None,
              eject: bool = False) -> str:
    """A nutcracker redis pool of the servers (ketama, md5)."""
    weights = weights or [1] * len(servers)
    names = names or [None] * len(servers)
    lines = "".join(f"   - 127.0.0.1:{s.port}:{w}" + (f" {n}" if n else "") + "\n"
                    for s, w, n in zip(servers, weights, names, strict=True))
    tag = f'  hash_tag: "{hash_tag}"\n' if hash_tag else ""
    ejection = ("  auto_eject_hosts: true\n  server_failure_limit: 1\n  server_retry_timeout: 600000\n"
                if eject else "  auto_eject_hosts: false\n")
    return (f"pool:\n  listen: 127.0.0.1:{listen}\n  hash: md5\n  distribution: ketama\n  redis: true\n"
            f"{tag}{ejection}  timeout: 2000\n  servers:\n{lines}")


def proxy_client_kwargs() -> dict[str, Any]:
    """redis-py options for a client of nutcracker: RESP2 (no HELLO) and no
    CLIENT SETINFO, which nutcracker does not take and answers by closing."""
    import redis

    quiet: dict[str, Any] = ({"driver_info": None} if "driver_info" in inspect.signature(redis.Redis).parameters
                             else {"lib_name": None, "lib_version": None})
    return {"protocol": 2, "socket_timeout": 10, **quiet}
