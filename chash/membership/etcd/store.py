"""A shared ring in etcd: the store the etcd drivers hand their operations to.

Each operation of the protocol runs as its etcd requests
(``chash.membership.etcd.ring``: reads, then one transaction comparing
revisions) and replies with its record, and announcements are etcd watch
events on the ring key.  A
watch resumes from the last revision this store saw, so a reconnect loses
no change; when that revision was compacted away, etcd cancels the watch,
and the listener's full read (the sync after every new subscription)
catches up.  ``EtcdStore`` is blocking (a thread reads each watch stream),
``AsyncEtcdStore`` asyncio (a task does).
"""

from __future__ import annotations

import asyncio
import json
import queue
import threading
import time
from typing import Any, TypeVar

from chash.membership.etcd.client import AsyncEtcdClient, EtcdClient, import_httpx
from chash.membership.etcd.ring import RingKeys, perform
from chash.membership.etcd.wire import EtcdAuthError, EtcdUnavailable, b64, revision
from chash.membership.settings import MembershipSettings
from chash.membership.store import Announcement, Notice, Operation, SubscriptionLost

__all__ = ["AsyncEtcdStore", "EtcdStore"]

T = TypeVar("T")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _errors() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    httpx = import_httpx()
    return (EtcdUnavailable, httpx.TransportError, OSError), (EtcdAuthError,)


class _Watched:
    """What a store's watches share: the last revision seen, and how a
    stream's lines become notices."""

    def __init__(self, keys: RingKeys) -> None:
        self.keys = keys
        self.revision = 0

    def saw(self, reply: dict[str, Any]) -> None:
        self.revision = max(self.revision, revision(reply))

    def create_body(self) -> dict[str, Any]:
        """The watch request: the ring key, from the revision after the
        last one seen (from now if none)."""
        request: dict[str, Any] = {"key": b64(self.keys.ring)}
        if self.revision:
            request["start_revision"] = str(self.revision + 1)
        return {"create_request": request}

    def notices(self, line: str) -> list[Notice | BaseException]:
        """The notices of one line of a watch stream."""
        if not line.strip():
            return []
        try:
            message = json.loads(line)
        except ValueError:
            return [EtcdUnavailable(f"unreadable watch message {line[:80]!r}")]
        if "error" in message:
            return [EtcdUnavailable(f"watch failed: {message['error']}")]
        result = message.get("result", {})
        if int(result.get("compact_revision", 0) or 0):
            self.revision = 0  # compacted away: a full read instead
            return [SubscriptionLost()]
        if result.get("canceled"):
            return [SubscriptionLost()]
        out: list[Notice | BaseException] = []
        for event in result.get("events", ()):
            kv = event.get("kv", {})
            self.revision = max(self.revision, int(kv.get("mod_revision", 0)))
            out.append(Announcement(_position(kv.get("value"))))
        return out


def _position(value: object) -> str:
    """``epoch:version`` of a ring value (empty if unreadable: news)."""
    try:
        import base64

        doc = json.loads(base64.b64decode(str(value or "")))
        return f"{doc['epoch']}:{doc['version']}"
    except (ValueError, TypeError, KeyError):
        return ""


class _Subscription:
    """A watch stream read by a daemon thread into a queue."""

    def __init__(self, http: Any, response: Any, watched: _Watched) -> None:
        self._http, self._response = http, response
        self._queue: queue.Queue[Notice | BaseException] = queue.Queue()
        self._watched = watched
        self._closed = False
        threading.Thread(target=self._read, name="chash-etcd-watch", daemon=True).start()

    def _read(self) -> None:
        try:
            for line in self._response.iter_lines():
                for notice in self._watched.notices(line):
                    self._queue.put(notice)
            self._queue.put(EtcdUnavailable("the watch stream ended"))
        except Exception as exc:
            if not self._closed:
                self._queue.put(EtcdUnavailable(f"the watch stream broke: {exc}"))

    def receive(self, timeout: float) -> Notice:
        """The next notice within ``timeout`` seconds; raises the stream's failure."""
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        """Close the stream (which ends the thread); never raises."""
        self._closed = True
        for closer in (self._response.close, self._http.close):
            try:
                closer()
            except Exception:  # closing a broken connection
                pass


class _AsyncSubscription:
    """A watch stream read by a task into a queue."""

    def __init__(self, http: Any, response: Any, watched: _Watched) -> None:
        self._http, self._response = http, response
        self._queue: asyncio.Queue[Notice | BaseException] = asyncio.Queue()
        self._watched = watched
        self._task = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        try:
            async for line in self._response.aiter_lines():
                for notice in self._watched.notices(line):
                    self._queue.put_nowait(notice)
            self._queue.put_nowait(EtcdUnavailable("the watch stream ended"))
        except Exception as exc:
            self._queue.put_nowait(EtcdUnavailable(f"the watch stream broke: {exc}"))

    async def receive(self, timeout: float) -> Notice:
        """As ``_Subscription.receive``."""
        try:
            item = await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return None
        if isinstance(item, BaseException):
            raise item
        return item

    async def close(self) -> None:
        """Cancel the task, close the stream; never raises."""
        self._task.cancel()
        try:
            await self._task
        except BaseException:  # cancelled, or the stream's own failure
            pass
        for closer in (self._response.aclose, self._http.aclose):
            try:
                await closer()
            except Exception:  # closing a broken connection
                pass


class EtcdStore:
    """The ring ``settings`` names in etcd, through a blocking ``EtcdClient``
    (a ``chash.membership.store.Store``)."""

    name = "etcd"

    def __init__(self, client: EtcdClient, settings: MembershipSettings) -> None:
        """No I/O; ImportError without httpx."""
        self.client = client
        self.outage_errors, self.auth_errors = _errors()
        self.keys = RingKeys(settings.prefix, settings.name)
        self._watched = _Watched(self.keys)

    def run(self, operation: Operation[T]) -> T:
        """Perform ``operation`` on the ring; its reply."""
        ops = perform(self.keys, operation, _now_ms())
        try:
            request = next(ops)
            while True:
                reply = self.client.post(request)
                self._watched.saw(reply)
                request = ops.send(reply)
        except StopIteration as stop:
            result: T = stop.value  # the operation's record
            return result
        finally:
            ops.close()

    def subscribe(self, sharded: bool) -> _Subscription:
        """Watch the ring key, from the last revision seen."""
        http, response = self.client.watch_stream(self._watched.create_body())
        return _Subscription(http, response, self._watched)


class AsyncEtcdStore:
    """The ring ``settings`` names in etcd, through an ``AsyncEtcdClient``
    (a ``chash.membership.store.AsyncStore``)."""

    name = "etcd"

    def __init__(self, client: AsyncEtcdClient, settings: MembershipSettings) -> None:
        """As ``EtcdStore``."""
        self.client = client
        self.outage_errors, self.auth_errors = _errors()
        self.keys = RingKeys(settings.prefix, settings.name)
        self._watched = _Watched(self.keys)

    async def run(self, operation: Operation[T]) -> T:
        """Perform ``operation`` on the ring; its reply."""
        ops = perform(self.keys, operation, _now_ms())
        try:
            request = next(ops)
            while True:
                reply = await self.client.post(request)
                self._watched.saw(reply)
                request = ops.send(reply)
        except StopIteration as stop:
            result: T = stop.value  # the operation's record
            return result
        finally:
            ops.close()

    async def subscribe(self, sharded: bool) -> _AsyncSubscription:
        """Watch the ring key, from the last revision seen."""
        http, response = await self.client.watch_stream(self._watched.create_body())
        return _AsyncSubscription(http, response, self._watched)
