"""What the tests share: oracles, the reference router, servers, waits.

- ``hashes``: independent oracles for every hash chash implements;
- ``reference_router``: the documented router and the model state machines
  compare chash with;
- ``waiting``: bounded polling, sync and asyncio, and a bounded event loop;
- ``ports``: free loopback ports;
- ``http_backends``, ``echo_backends``: HTTP servers on 127.0.0.1 (threads;
  aiohttp) whose answers tests steer;
- ``redis_server``: a private redis-server;
- ``membership_worker``: a gateway instance run as a subprocess script.
"""
