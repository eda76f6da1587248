"""The Redis store of shared rings and the drivers over it.

``scripts`` holds the Lua scripts (one per operation of the store
contract, ``chash.membership.store``), ``codec`` turns each operation into
its script's ``ARGV`` and the script's reply into the record the protocol
reads, ``store`` runs them and delivers announcements by pub/sub, and
``membership`` builds ``RedisMembership`` and ``AsyncRedisMembership``
(re-exported by ``chash.membership``).  The etcd store sits beside this
package (``chash.membership.etcd``), under the same protocol and drivers.
"""
