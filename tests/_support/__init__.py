"""What the tests share: oracles, the reference router, servers, waits.

One line a module:

- ``hashes``: independent oracles for every hash chash implements;
- ``reference_router``: the documented router, the state machines' and the fuzzer's model;
- ``envoy_reference``: Envoy's ring hash and Maglev and gRPC's ring_hash, in plain Python;
- ``jump_reference``: jump consistent hash (the paper's, Guava's, JumpBackHash), its preference list, in Python;
- ``hash4j_vectors``: readers of the answers recorded from hash4j, and Java's SplittableRandom;
- ``reference_request_policy``: the gateway's request-head policy in Python, the C policy's reference;
- ``heads``: generated and mutated request heads, for the parser's differential tests;
- ``collisions``: node ids whose ring points collide, for tests of ties;
- ``ci``: whether the tests run in CI (``CI=true``), ``missing()`` (skip, or fail in CI), the CI guard's hooks;
- ``waiting``: bounded polling, sync and asyncio, and a bounded event loop;
- ``leaks``: a loop of an operation that must not leak (memory, live objects);
- ``ports``: free loopback ports;
- ``plotting``: whether matplotlib can draw here;
- ``http_backends``: HTTP servers on 127.0.0.1 in threads, whose answers tests steer;
- ``echo_backends``: aiohttp echo backends on 127.0.0.1, whose answers tests steer;
- ``threaded_backends``: the echo backends on a loop in a thread, for sync and asyncio tests;
- ``raw_backends``: a scripted byte-for-byte TCP backend;
- ``grpc_servers``: grpcio servers with generic handlers, for the gRPC channel pools;
- ``gateways``: a gateway in front of echo backends, and the requests the gateway tests send;
- ``gateway_processes``: ``chash gateway`` as a real process, and what the tests ask of one;
- ``health_checks``: drivers running either health-check runner round by round, an ``on_change`` recorder;
- ``compat_programs``: real nginx, HAProxy, nutcracker and memcached with their own configuration;
- ``dns_server``: a real dnsmasq on a free loopback port, whose records the test changes;
- ``redis_server``: a private redis-server, and clients of it;
- ``redis_topologies``: a real Redis Cluster and a Sentinel setup;
- ``redis_pools``: nutcracker (twemproxy) pools of redis-servers, for the sharded cache clients;
- ``rendezvous_programs``: a real Caddy and Squid in front of backends that name themselves;
- ``ring_programs``: a real Varnish (shard directors) and nghttpx (affinity) on their own ports and directories;
- ``etcd_server``: real etcd members on free loopback ports;
- ``membership_async``: the asyncio membership driven from sync test code;
- ``membership_worker``: one gateway instance in its own process, driven by the membership tests;
- ``membership_procs``: those processes started and the tests' handle on them.
- ``netns``: a network of namespaces (hosts on a bridge) whose links the partition tests cut and mend;
- ``partitions``: etcd members, gateways and ``chash ring`` on those hosts, and the history checker;
- ``relays``: a TCP relay that delays and loses, for slow links (the kernel has no netem);
- ``tls_certificates``: a test CA and the server and client certificates it signs (trustme);
"""
