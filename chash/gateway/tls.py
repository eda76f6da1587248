"""TLS to clients and to backends: the contexts, and what TLS tells of a peer.

``server_context`` builds the context of ``GatewayConfig``'s ``tls_*``
settings with Python's ``ssl`` (OpenSSL): TLS 1.2 and 1.3 (or 1.3 only),
ALPN ``http/1.1``, the library's secure defaults (no compression, no
renegotiation, forward-secret ciphers first), and optionally client
certificates verified against ``tls_client_ca``.  Every file is read when
the context is built, so that a reload builds a new one (a renewed
certificate at the same path included) and swaps it in only once it is
whole; connections already open keep the one they were accepted with.

``certificate_digest`` names the certificate being served (the SHA-256 of
its first certificate, as ``openssl x509 -fingerprint -sha256`` prints it),
and ``subject_of`` writes a verified client certificate's subject as a key
(``--key tls-subject``): RFC 4514's string form, most specific attribute
first (``CN=tenant-a,O=Acme``), as nginx's ``$ssl_client_s_dn`` and
``openssl x509 -subject -nameopt RFC2253`` write it.

``backend_context`` is the client-side context of the connections to
``https://`` backends: certificates verified against the system's CAs or
``backend_ca`` (only those), the host name checked (and sent as SNI), ALPN
``http/1.1``; or, with ``backend_insecure``, nothing verified.

``request_key`` is a request's key with ``tls-subject`` among the sources.

A leaf beside ``chash.gateway.config``: it imports nothing else of the
gateway.
"""

from __future__ import annotations

import hashlib
import re
import ssl
from typing import Any

from chash.routing.keys import KeyedRequest, KeyRule

__all__ = ["TLS_VERSIONS", "backend_context", "certificate_digest", "request_key",
           "server_context", "subject_of"]

#: ``tls_min_version``'s values and the versions they stand for.
TLS_VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}

# The attribute names of ``SSLObject.getpeercert()`` and their short forms
# in RFC 4514 (section 3) and OpenSSL's RFC 2253 output; others keep the
# long name OpenSSL gives them.
_SHORT_NAMES = {
    "commonName": "CN", "countryName": "C", "localityName": "L",
    "stateOrProvinceName": "ST", "organizationName": "O",
    "organizationalUnitName": "OU", "streetAddress": "STREET",
    "domainComponent": "DC", "userId": "UID",
}

_PEM_CERTIFICATE = re.compile(
    rb"-----BEGIN CERTIFICATE-----\s*(.+?)\s*-----END CERTIFICATE-----", re.S)


def server_context(cert: str, key: str | None = None, *, ciphers: str | None = None,
                   min_version: str = "1.2", client_ca: str | None = None) -> ssl.SSLContext:
    """A server-side context serving ``cert`` (PEM: the certificate, then
    its chain) with ``key`` (PEM; None: the key is in ``cert``).

    ``ciphers``: an OpenSSL cipher list for TLS 1.2 (TLS 1.3's suites are
    OpenSSL's own); ``min_version``: ``"1.2"`` or ``"1.3"``;
    ``client_ca``: a PEM bundle that client certificates must chain to
    (a client without one is refused).  ValueError naming the file and
    OpenSSL's reason if one cannot be read or does not fit."""
    if min_version not in TLS_VERSIONS:
        raise ValueError(f"tls_min_version must be one of {', '.join(TLS_VERSIONS)}, "
                         f"not {min_version!r}")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = TLS_VERSIONS[min_version]
    context.set_alpn_protocols(["http/1.1"])
    _readable("tls_cert", cert)
    if key is not None:
        _readable("tls_key", key)
    try:
        context.load_cert_chain(cert, key)
    except OSError as exc:
        if not isinstance(exc, ssl.SSLError):
            raise ValueError(f"tls_cert/tls_key: cannot read {cert} or {key}: {exc}") from None
        files = cert if key is None else f"{cert} and {key}"
        raise ValueError(f"tls_cert/tls_key: {files}: not a certificate and its private key "
                         f"({_reason(exc)})") from None
    if ciphers is not None:
        try:
            context.set_ciphers(ciphers)
        except ssl.SSLError:
            raise ValueError(f"tls_ciphers: OpenSSL knows no cipher in {ciphers!r}") from None
    if client_ca is not None:
        _load_cas(context, "tls_client_ca", client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def backend_context(ca: str | None = None, *, insecure: bool = False) -> ssl.SSLContext:
    """The context the gateway connects to ``https://`` backends with.

    Certificates are verified, and their host name checked, against the
    system's CAs, or only those of the PEM bundle ``ca``; ``insecure``
    verifies nothing (a test bench's self-signed backends).  ValueError
    naming ``backend_ca`` if the bundle cannot be read or holds no CA."""
    if insecure and ca is not None:
        raise ValueError("backend_ca and backend_insecure: give one (a CA to verify "
                         "against, or no verification)")
    if ca is None:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    else:
        # Only the given CAs: a private CA's backends are not to be
        # impersonated by certificates of a public one.
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        _load_cas(context, "backend_ca", ca)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def certificate_digest(cert: str) -> str:
    """The SHA-256 of the first certificate of the PEM file ``cert`` (the
    one served), as colon-separated hex; ValueError if it holds none."""
    try:
        with open(cert, "rb") as file:
            text = file.read()
    except OSError as exc:
        raise ValueError(f"tls_cert: cannot read {cert}: {exc.strerror or exc}") from None
    match = _PEM_CERTIFICATE.search(text)
    if match is None:
        raise ValueError(f"tls_cert: {cert} holds no PEM certificate")
    der = ssl.PEM_cert_to_DER_cert(match.group(0).decode("ascii", "replace"))
    return ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())


def subject_of(peercert: dict[str, Any] | None) -> bytes | None:
    """The subject of a verified peer certificate (``getpeercert()``) in
    RFC 4514's string form, UTF-8; None without a certificate or subject."""
    if not peercert:
        return None
    rdns = peercert.get("subject") or ()
    parts = []
    for rdn in reversed(rdns):  # RFC 4514 writes the last RDN first
        parts.append("+".join(f"{_SHORT_NAMES.get(name, name)}={_escape(value)}"
                              for name, value in rdn))
    return ",".join(parts).encode() or None


def request_key(rule: KeyRule, request: KeyedRequest, tls_subject: bytes | None) -> bytes | None:
    """The key of ``request``: ``rule``'s, or for ``tls-subject`` the
    subject of the client certificate of its connection (``tls_subject``)."""
    if rule.source == "tls-subject":
        return tls_subject
    return rule.extract(request)


def _escape(value: str) -> str:
    """An attribute value escaped as RFC 4514 section 2.4 asks."""
    out = []
    for i, char in enumerate(value):
        if char in ',+"\\<>;' or (char == "#" and i == 0) \
                or (char == " " and (i == 0 or i == len(value) - 1)):
            out.append("\\" + char)
        elif char == "\0":
            out.append("\\00")
        else:
            out.append(char)
    return "".join(out)


def _load_cas(context: ssl.SSLContext, setting: str, path: str) -> None:
    """Trust the CAs of the PEM bundle ``path`` (``setting``'s value);
    ValueError naming both unless it holds at least one."""
    _readable(setting, path)
    try:
        context.load_verify_locations(cafile=path)
    except ssl.SSLError as exc:
        raise ValueError(f"{setting}: {path}: not a PEM bundle of CA certificates "
                         f"({_reason(exc)})") from None
    if not context.get_ca_certs():
        raise ValueError(f"{setting}: {path} holds no CA certificate")


def _readable(setting: str, path: str) -> None:
    """ValueError naming ``setting`` and ``path`` unless the file can be read
    (``ssl`` tells no file name when one cannot)."""
    try:
        with open(path, "rb"):
            pass
    except FileNotFoundError:
        raise ValueError(f"{setting}: no such file: {path}") from None
    except OSError as exc:
        raise ValueError(f"{setting}: cannot read {path}: {exc.strerror or exc}") from None


def _reason(exc: ssl.SSLError) -> str:
    return str(exc.reason or exc.strerror or exc).replace("_", " ").lower()
