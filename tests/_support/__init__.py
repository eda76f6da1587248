"""What the tests share: oracles, the reference router, servers, waits.

- ``hashes``: independent oracles for every hash chash implements;
- ``reference_router``: the documented router, the model the state
  machines and the fuzzer compare chash with, and router snapshots;
- ``waiting``: bounded polling, sync and asyncio, and a bounded event loop;
- ``ports``: free loopback ports;
- ``collisions``: node ids whose ring points collide, for tests of ties;
- ``plotting``: whether matplotlib can draw here;
- ``http_backends``, ``echo_backends``: HTTP servers on 127.0.0.1 (threads;
  aiohttp) whose answers tests steer;
- ``redis_server``: a private redis-server;
- ``membership_worker``: a gateway instance run as a subprocess script.
"""
