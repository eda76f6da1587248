"""TLS session tickets that every worker can open, before and after a reload.

A returning client resumes its TLS session with a ticket the server gave it:
no certificate signature, a fraction of a full handshake's work.  OpenSSL
seals tickets with keys drawn at random when a context is made, so with
``--workers N`` (each worker makes its own context) a ticket opens only on
the worker that issued it, and after a reload (a new context) on none:
about half of the resumptions with two workers become full handshakes.
nginx shares its keys among its workers for the same reason.

A gateway therefore draws its keys once (the supervisor before it forks
the workers) and seals with keys derived from them and from the settings
that decide who may resume (``ticket_keys_for``): a renewed certificate
keeps every session resumable, while other client CAs, ciphers or a
minimum version make new keys, so that no session admitted under the old
rules skips the new ones, in every worker alike.

Python's ``ssl`` has no call for the keys, so ``set_ticket_keys`` makes
OpenSSL's own (``SSL_CTX_set_tlsext_ticket_keys``: ``SSL_CTX_ctrl`` with
``SSL_CTRL_SET_TLSEXT_TICKET_KEYS``) on the context's ``SSL_CTX``, found
where CPython's ``_ssl`` keeps it (the first field after the object
header, in every CPython 3 release).  That pointer is used only after
OpenSSL, asked for the context's options through it, answers exactly what
``SSLContext.options`` does; where anything differs (another
implementation, an OpenSSL without the call) nothing is set and the
gateway works as before, each worker with its own keys.

A leaf: it imports nothing of the gateway.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import ssl
import sys
from typing import Any

__all__ = ["TICKET_KEYS_SIZE", "new_ticket_keys", "set_ticket_keys", "ticket_keys_for"]

#: OpenSSL's ticket key material: a 16-byte name, a 32-byte HMAC key and a
#: 32-byte AES key.
TICKET_KEYS_SIZE = 80

# openssl/ssl.h
_SSL_CTRL_SET_TLSEXT_TICKET_KEYS = 59


def new_ticket_keys() -> bytes:
    """Fresh random ticket key material (``TICKET_KEYS_SIZE`` bytes)."""
    return os.urandom(TICKET_KEYS_SIZE)


def ticket_keys_for(base: bytes, *rules: bytes) -> bytes:
    """Ticket keys derived from ``base`` and ``rules`` (what decides who may
    resume): the same for the same arguments, in any process."""
    shake = hashlib.shake_256(b"chash session tickets\0" + base)
    for rule in rules:  # each rule's length first: no two lists run together
        shake.update(len(rule).to_bytes(8, "big") + rule)
    return shake.digest(TICKET_KEYS_SIZE)


def set_ticket_keys(context: ssl.SSLContext, keys: bytes) -> bool:
    """Seal and open ``context``'s session tickets with ``keys``
    (``TICKET_KEYS_SIZE`` bytes); whether it was done.  ValueError if
    ``keys`` is not that long."""
    if len(keys) != TICKET_KEYS_SIZE:
        raise ValueError(f"ticket keys are {TICKET_KEYS_SIZE} bytes, not {len(keys)}")
    openssl = _openssl()
    if openssl is None:
        return False
    pointer = ctypes.c_void_p.from_address(id(context) + object.__basicsize__).value
    if not pointer or openssl.SSL_CTX_get_options(pointer) != context.options:
        return False  # not the layout this module knows: leave the context alone
    buffer = ctypes.create_string_buffer(keys, TICKET_KEYS_SIZE)
    return bool(openssl.SSL_CTX_ctrl(pointer, _SSL_CTRL_SET_TLSEXT_TICKET_KEYS,
                                     TICKET_KEYS_SIZE, buffer))


#: The looked-up library, once looked up: ``[library or None]``.
_found: list[Any] = []


def _openssl() -> Any:
    """The OpenSSL that CPython's ``_ssl`` runs on (its two calls typed), or
    None where it cannot be reached; looked up once."""
    if not _found:
        _found.append(_look_up_openssl())
    return _found[0]


def _look_up_openssl() -> Any:
    if sys.implementation.name != "cpython":
        return None
    import _ssl

    try:
        # The loaded _ssl module's handle (the program's, where _ssl is
        # built in): a symbol is looked up in it and in the libraries it was
        # linked with, so this is the very OpenSSL its contexts come from,
        # whichever other one the system has.
        library = ctypes.CDLL(getattr(_ssl, "__file__", None))
        ctrl, options = library.SSL_CTX_ctrl, library.SSL_CTX_get_options
    except (OSError, AttributeError):
        return None
    ctrl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_void_p]
    ctrl.restype = ctypes.c_long
    options.argtypes = [ctypes.c_void_p]
    options.restype = ctypes.c_uint64
    return library
