"""The Redis store of shared rings and the drivers over it.

``scripts`` holds the Lua scripts (one per protocol call), ``store`` runs
them and delivers announcements by pub/sub, ``membership`` builds
``RedisMembership`` and ``AsyncRedisMembership`` (re-exported by
``chash.membership``).  Another store (etcd, say) sits beside this package,
under the same protocol and drivers.
"""
