"""What the tests share: oracles, the reference router, servers, waits.

- ``hashes``: independent oracles for every hash chash implements;
- ``reference_router``: the documented router, the model the state
  machines and the fuzzer compare chash with, and router snapshots;
- ``envoy_reference``: Envoy's ring hash and Maglev and gRPC's ring_hash
  in plain Python, the oracles of the 64-bit layouts and MaglevRouter;
- ``collisions``: node ids whose ring points collide, for tests of ties;
- ``waiting``: bounded polling, sync and asyncio, and a bounded event loop;
- ``ports``: free loopback ports;
- ``plotting``: whether matplotlib can draw here;
- ``http_backends``, ``echo_backends``: HTTP servers on 127.0.0.1 (threads;
  aiohttp) whose answers tests steer; ``threaded_backends``: the aiohttp
  ones on a loop in a thread, for sync and asyncio tests alike;
- ``grpc_servers``: grpcio servers with generic handlers, for the gRPC
  channel pools;
- ``raw_backends``: a scripted byte-for-byte TCP backend;
- ``gateways``: a gateway in front of echo backends, and the requests the
  gateway tests send;
- ``health_checks``: drivers running either health-check runner round by
  round, and an ``on_change`` recorder;
- ``compat_programs``: real nginx, nutcracker and memcached with their own
  configuration, for the layouts that must agree with them;
- ``redis_server``: a private redis-server, and clients of it;
- ``redis_topologies``: a real Redis Cluster and a Sentinel setup;
- ``membership_async``: the asyncio membership driven from sync test code;
- ``membership_worker``, ``membership_procs``: gateway instances run as
  subprocesses, and the tests' handle on them.
"""
