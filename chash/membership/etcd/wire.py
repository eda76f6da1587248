"""etcd's v3 JSON gateway, as data: requests, replies and errors, no I/O.

etcd serves its gRPC API as JSON over HTTP (``POST /v3/kv/range``,
``/v3/kv/txn``, ``/v3/lease/grant``, ``/v3/watch``,
``/v3/auth/authenticate``) in 3.4 and 3.5 alike.  Keys and values travel
base64-encoded, 64-bit integers as decimal strings, and fields at their
default value (0, false, empty) are left out of replies.  An error reply
carries the gRPC status ``code`` and a ``message``.

The clients (``chash.membership.etcd.client``) send the ``Request``s built
here and turn error replies into the exceptions below.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

__all__ = ["EtcdAuthError", "EtcdError", "EtcdUnavailable", "Request", "b64", "compare_absent",
           "compare_mod", "delete_prefix", "error_for", "kvs", "prefix_end", "put", "range_",
           "revision", "unb64"]

#: gRPC status codes etcd replies with, by what they mean to us.
UNAVAILABLE_CODES = frozenset({4, 10, 13, 14})  # deadline, aborted, internal, unavailable
AUTH_CODES = frozenset({7, 16})  # permission denied, unauthenticated
#: Refusals etcd sends with another code (3, invalid argument): a wrong
#: password, and a request without a token while auth is on.  etcd 3.4 and
#: 3.5 word them alike; 3.4's error body also repeats the message as
#: ``error``, 3.5's carries ``code`` and ``message`` only.
AUTH_MESSAGES = ("authentication failed", "permission denied", "user name is empty")


class EtcdError(Exception):
    """etcd refused a request; ``code`` is the gRPC status code (0 if the
    reply had none)."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


class EtcdUnavailable(EtcdError, OSError):
    """No endpoint of the cluster answered (each was tried), or the one
    asked could not serve (no leader, a timeout inside etcd)."""


class EtcdAuthError(EtcdError):
    """etcd refused this instance: wrong user or password, an expired
    token that could not be renewed, or a user without the permission."""


def error_for(status: int, body: Any) -> EtcdError:
    """The exception for an error reply (HTTP ``status``, decoded ``body``)."""
    code = 0
    message = f"HTTP {status}"
    if isinstance(body, dict):
        raw = body.get("code", 0)
        code = int(raw) if isinstance(raw, (int, str)) and str(raw).isdigit() else 0
        message = str(body.get("message") or body.get("error") or message)
    if code in AUTH_CODES or any(text in message for text in AUTH_MESSAGES):
        if "user name is empty" in message:
            message += " (auth is on in etcd: give a username and password)"
        return EtcdAuthError(message, code)
    if code in UNAVAILABLE_CODES or (status >= 500 and code == 0):
        return EtcdUnavailable(message, code)
    return EtcdError(message, code)


@dataclass(frozen=True)
class Request:
    """POST ``body`` (JSON) to ``path`` on an endpoint."""

    path: str
    body: dict[str, Any] = field(default_factory=dict)


def b64(text: str | bytes) -> str:
    """``text`` (UTF-8) as etcd's JSON carries bytes."""
    raw = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    return base64.b64encode(raw).decode("ascii")


def unb64(value: object) -> str:
    """A base64 field of a reply as str (absent: empty)."""
    if not isinstance(value, str) or not value:
        return ""
    return base64.b64decode(value).decode("utf-8", "surrogateescape")


def prefix_end(prefix: str) -> str:
    """The range end that makes a range read every key under ``prefix``."""
    raw = bytearray(prefix.encode("utf-8"))
    raw[-1] += 1  # prefixes here end in "/", never 0xff
    return b64(bytes(raw))


def range_(key: str, *, prefix: bool = False) -> Request:
    """Read ``key`` (every key under it if ``prefix``), linearizably."""
    body: dict[str, Any] = {"key": b64(key)}
    if prefix:
        body["range_end"] = prefix_end(key)
    return Request("/v3/kv/range", body)


def put(key: str, value: str, lease: str | None = None) -> dict[str, Any]:
    """A put operation of a transaction."""
    request: dict[str, Any] = {"key": b64(key), "value": b64(value)}
    if lease is not None:
        request["lease"] = lease
    return {"request_put": request}


def delete(key: str) -> dict[str, Any]:
    """A delete operation of a transaction."""
    return {"request_delete_range": {"key": b64(key)}}


def delete_prefix(prefix: str) -> dict[str, Any]:
    """An operation of a transaction deleting every key under ``prefix``."""
    return {"request_delete_range": {"key": b64(prefix), "range_end": prefix_end(prefix)}}


def compare_mod(key: str, mod_revision: int) -> dict[str, Any]:
    """``key`` was last changed at ``mod_revision``."""
    return {"key": b64(key), "target": "MOD", "result": "EQUAL",
            "mod_revision": str(mod_revision)}


def compare_absent(key: str) -> dict[str, Any]:
    """``key`` does not exist."""
    return {"key": b64(key), "target": "VERSION", "result": "EQUAL", "version": "0"}


def txn(compare: list[dict[str, Any]], success: list[dict[str, Any]]) -> Request:
    """A transaction: ``success`` applies iff every ``compare`` holds."""
    return Request("/v3/kv/txn", {"compare": compare, "success": success})


def kvs(reply: dict[str, Any]) -> list[tuple[str, str, int]]:
    """The (key, value, mod_revision) of a range reply."""
    return [(unb64(kv.get("key")), unb64(kv.get("value")), int(kv.get("mod_revision", 0)))
            for kv in reply.get("kvs", ())]


def revision(reply: dict[str, Any]) -> int:
    """The store's revision a reply was served at."""
    return int(reply.get("header", {}).get("revision", 0))
