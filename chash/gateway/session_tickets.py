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
``SSL_CTRL_SET_TLSEXT_TICKET_KEYS``) on the context's ``SSL_CTX``.  Which
``SSL_CTX`` that is, OpenSSL itself says: this module registers an
``ex_data`` index for ``SSL_CTX`` objects (``CRYPTO_get_ex_new_index``),
whose callbacks OpenSSL calls with each context's address as it makes it
(``SSL_CTX_new``) and frees it, so the addresses of every ``SSL_CTX`` alive
are known.  The candidate is read from the ``SSLContext`` object itself,
at the end of its object header (``object.__basicsize__``: the running
interpreter's header, larger on free-threaded builds), where CPython's
``_ssl`` keeps it, and it is used only when it is one of those addresses:
nothing is dereferenced that OpenSSL did not hand out.  Where anything
differs (another implementation or layout, a context made before this
module was imported, an OpenSSL without these calls) nothing is set and
the gateway works as before, each worker with its own keys.

A leaf: it imports nothing of the gateway.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import ssl
import sys
import threading
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
    (``TICKET_KEYS_SIZE`` bytes); whether it was done (never for a context
    made before this module was imported).  ValueError if ``keys`` is not
    that long."""
    if len(keys) != TICKET_KEYS_SIZE:
        raise ValueError(f"ticket keys are {TICKET_KEYS_SIZE} bytes, not {len(keys)}")
    openssl = _openssl()
    pointer = None if openssl is None else _ssl_ctx_of(context)
    if pointer is None:
        return False
    buffer = ctypes.create_string_buffer(keys, TICKET_KEYS_SIZE)
    return bool(openssl.SSL_CTX_ctrl(pointer, _SSL_CTRL_SET_TLSEXT_TICKET_KEYS,
                                     TICKET_KEYS_SIZE, buffer))


def _ssl_ctx_of(context: ssl.SSLContext) -> int | None:
    """The address of ``context``'s ``SSL_CTX`` if OpenSSL vouches for it
    (it is the address of an ``SSL_CTX`` alive), else None."""
    if _openssl() is None or not isinstance(context, ssl.SSLContext):
        return None
    offset = _HEADER
    if type(context).__basicsize__ < offset + ctypes.sizeof(ctypes.c_void_p):
        return None  # the field would lie outside the object: not the known layout
    # A read inside the object itself (its own memory, whatever it holds).
    candidate = ctypes.c_void_p.from_address(id(context) + offset).value
    with _lock:
        return candidate if candidate and candidate in _alive else None


# -- what OpenSSL tells of its contexts ---------------------------------------

#: Where an object's own fields begin: the size of this interpreter's
#: object header (16 bytes on a default 64-bit build, more on a
#: free-threaded one).
_HEADER = object.__basicsize__
#: ``SSL_CTX`` addresses alive, as OpenSSL's ex_data callbacks report them.
_alive: set[int] = set()
_lock = threading.Lock()
#: The looked-up library, once looked up: ``[library or None]``.
_found: list[Any] = []
#: The callbacks OpenSSL holds (ctypes frees a thunk with its last reference).
_callbacks: list[Any] = []

# void CRYPTO_EX_new(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx,
#                    long argl, void *argp), and CRYPTO_EX_free alike.
_EX_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_int, ctypes.c_long, ctypes.c_void_p)
# openssl/crypto.h
_CRYPTO_EX_INDEX_SSL_CTX = 1


def _made(parent: int | None, ptr: int | None, ad: int | None, idx: int, argl: int,
          argp: int | None) -> None:
    if parent:
        with _lock:
            _alive.add(parent)


def _freed(parent: int | None, ptr: int | None, ad: int | None, idx: int, argl: int,
           argp: int | None) -> None:
    if parent:
        with _lock:
            _alive.discard(parent)


def _openssl() -> Any:
    """The OpenSSL that CPython's ``_ssl`` runs on (its calls typed), its
    context callbacks registered; or None where it cannot be reached.
    Looked up once, when this module is imported."""
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
        ctrl, new_index = library.SSL_CTX_ctrl, library.CRYPTO_get_ex_new_index
    except (OSError, AttributeError):
        return None
    ctrl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_void_p]
    ctrl.restype = ctypes.c_long
    new_index.argtypes = [ctypes.c_int, ctypes.c_long, ctypes.c_void_p, _EX_CALLBACK,
                          ctypes.c_void_p, _EX_CALLBACK]
    new_index.restype = ctypes.c_int
    made, freed = _EX_CALLBACK(_made), _EX_CALLBACK(_freed)
    index = new_index(_CRYPTO_EX_INDEX_SSL_CTX, 0, None, made, None, freed)
    if index < 0:
        return None
    _callbacks.extend((made, freed))  # kept alive while OpenSSL may call them
    try:
        free_index = library.CRYPTO_free_ex_index
    except AttributeError:
        return None  # the callbacks would outlive the interpreter: better none of this
    free_index.argtypes = [ctypes.c_int, ctypes.c_int]
    free_index.restype = ctypes.c_int

    def unregister() -> None:
        # At exit, before the interpreter is torn down: contexts freed after
        # (while finalizing) must not call into Python.  Nothing is set after.
        with _lock:
            _found[0] = None
            _alive.clear()
        free_index(_CRYPTO_EX_INDEX_SSL_CTX, index)

    atexit.register(unregister)
    return library


_openssl()  # from now on every SSL_CTX made is known
