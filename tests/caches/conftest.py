"""The sharded cache clients' tests (chash.pymemcache, chash.redis): each
test starts its own memcached, redis-server and nutcracker processes on
ports the OS picked (tests/_support/compat_programs.py, redis_server.py)."""
