"""The etcd drivers: ``EtcdMembership`` and ``AsyncEtcdMembership``.

Each is a driver of ``chash.membership`` (``SyncDriver``, ``AsyncDriver``)
over the etcd store (``chash.membership.etcd.store``), which speaks etcd's
v3 JSON gateway through httpx: ``pip install 'chash-router[etcd]'``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

from chash.membership.async_driver import AsyncDriver
from chash.membership.core import SharedRouter, check_router
from chash.membership.etcd.client import AsyncEtcdClient, EtcdClient
from chash.membership.etcd.store import AsyncEtcdStore, EtcdStore
from chash.membership.settings import MembershipSettings
from chash.membership.sync_driver import SyncDriver, read_shared_config

__all__ = ["AsyncEtcdMembership", "EtcdMembership"]


class EtcdMembership(SyncDriver):
    """A ring shared through etcd, for synchronous gateways.

    Arguments:
        router: the local ``chash.ConsistentHashRouter`` (or ``chash.AnchorRouter``) (as for
            ``RedisMembership``: the same settings on every instance,
            checked; lookups never touch etcd).
        endpoints: an etcd URL (``"http://127.0.0.1:2379"``), several
            separated by commas, or a list of them: the cluster's members,
            tried in turn.  ``http://user:password@host:port`` gives
            credentials (or pass ``username`` and ``password``).
        name, quorum, vote_ttl, resync_interval, reporter, prefix,
            bootstrap: as for ``RedisMembership``.  The ring lives under
            the keys ``{prefix}/{name}/``; a health vote is held by an etcd
            lease of ``vote_ttl`` (rounded up to whole seconds), so the
            votes of an instance that died lapse with it.
        username, password: an etcd user, for a cluster with auth enabled.
        timeout: seconds one endpoint is given to answer before the next
            is tried (keep it short: an outage is noticed by it).

    ``start()`` raises ``EtcdAuthError`` when etcd refuses the user (wrong
    password, no role granting the ring's keys).  The operator API is
    ``RedisMembership``'s.
    """

    def __init__(
        self,
        router: SharedRouter,
        endpoints: str | Sequence[str],
        name: str = "default",
        *,
        bootstrap: bool = False,
        quorum: str | int = "majority",
        vote_ttl: float = 30.0,
        resync_interval: float = 5.0,
        reporter: str | None = None,
        prefix: str = "chash",
        username: str | None = None,
        password: str | None = None,
        timeout: float = 2.0,
    ) -> None:
        """See the class docstring; ImportError without httpx."""
        check_router(router)
        settings = MembershipSettings(name=name, quorum=quorum, vote_ttl=vote_ttl,
                                      resync_interval=resync_interval, reporter=reporter,
                                      prefix=prefix, bootstrap=bootstrap)
        self._client = EtcdClient(endpoints, username=username, password=password,
                                  timeout=timeout)
        super().__init__(router, settings, EtcdStore(self._client, settings))

    @classmethod
    def from_store(cls, endpoints: str | Sequence[str], name: str = "default", *,
                   resync_interval: float = 5.0, reporter: str | None = None,
                   prefix: str = "chash", username: str | None = None,
                   password: str | None = None, timeout: float = 2.0) -> Self:
        """A membership of the ring ``name`` as etcd holds it, for a tool
        that did not make it (``chash ring``): its router (new, empty) and
        its quorum and vote TTL are those the ring was made with, read
        from etcd.  Not started; ``refresh()`` syncs it, ``close()`` is
        for the caller.

        RingMissingError if etcd holds no such ring (or a damaged one);
        ValueError if the ring's router cannot be made here (a hash
        function of the application's own); PermissionError if etcd
        refuses this user; ``EtcdUnavailable`` if it cannot be reached."""
        settings = MembershipSettings(name=name, prefix=prefix)
        client = EtcdClient(endpoints, username=username, password=password, timeout=timeout)
        try:
            shared = read_shared_config(EtcdStore(client, settings), name)
        finally:
            client.close()
        return cls(shared.router(), endpoints, name, quorum=shared.quorum_arg(),
                   vote_ttl=shared.vote_ttl, resync_interval=resync_interval,
                   reporter=reporter, prefix=prefix, username=username, password=password,
                   timeout=timeout)

    @property
    def client(self) -> EtcdClient:
        """The etcd client."""
        return self._client

    def close(self) -> None:
        """``stop()``, then close the client's connections; the membership
        is done with (leaving a ``with`` block only stops it)."""
        self.stop()
        self._client.close()


class AsyncEtcdMembership(AsyncDriver):
    """A ring shared through etcd, for asyncio gateways.

    Takes ``EtcdMembership``'s arguments and drives the same protocol with
    two tasks, as ``AsyncRedisMembership`` does; operator calls are
    coroutines.  Use it within one event loop.
    """

    def __init__(
        self,
        router: SharedRouter,
        endpoints: str | Sequence[str],
        name: str = "default",
        *,
        bootstrap: bool = False,
        quorum: str | int = "majority",
        vote_ttl: float = 30.0,
        resync_interval: float = 5.0,
        reporter: str | None = None,
        prefix: str = "chash",
        username: str | None = None,
        password: str | None = None,
        timeout: float = 2.0,
    ) -> None:
        """See ``EtcdMembership``; ImportError without httpx."""
        check_router(router)
        settings = MembershipSettings(name=name, quorum=quorum, vote_ttl=vote_ttl,
                                      resync_interval=resync_interval, reporter=reporter,
                                      prefix=prefix, bootstrap=bootstrap)
        self._client = AsyncEtcdClient(endpoints, username=username, password=password,
                                       timeout=timeout)
        super().__init__(router, settings, AsyncEtcdStore(self._client, settings))

    @property
    def client(self) -> AsyncEtcdClient:
        """The etcd client."""
        return self._client

    async def aclose(self) -> None:
        """``await stop()``, then close the client's connections."""
        await self.stop()
        await self._client.aclose()
