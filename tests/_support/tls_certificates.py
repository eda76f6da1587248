"""Certificates made for the TLS tests with ``trustme``: a CA, a server
certificate for ``localhost`` and ``127.0.0.1``, and a second CA with
client certificates (``Certificates``); all written as PEM files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

trustme = pytest.importorskip("trustme", reason="trustme (the test extra) is not installed")


@dataclass(frozen=True)
class Certificates:
    """PEM files: ``ca`` signs ``cert``/``key`` (and ``cert2``/``key2``, a
    second server certificate); ``client_ca`` signs ``clients[name]``
    (certificate and key in one file), whose subject's common name is
    ``name``."""

    ca: str
    cert: str
    key: str
    cert2: str
    key2: str
    client_ca: str
    clients: dict[str, str]


def make_certificates(folder: Path, clients: tuple[str, ...] = ("tenant-a", "tenant-b")
                      ) -> Certificates:
    """New certificates in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    paths: dict[str, str] = {}
    for name, issued in (("", ca.issue_cert("localhost", "127.0.0.1")),
                         ("2", ca.issue_cert("localhost", "127.0.0.1"))):
        paths["cert" + name] = str(folder / f"cert{name}.pem")
        paths["key" + name] = str(folder / f"key{name}.pem")
        issued.cert_chain_pems[0].write_to_path(paths["cert" + name])
        issued.private_key_pem.write_to_path(paths["key" + name])
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    client_ca = trustme.CA(organization_name="Clients")
    client_ca.cert_pem.write_to_path(str(folder / "client-ca.pem"))
    issued_clients = {}
    for name in clients:
        path = str(folder / f"client-{len(issued_clients)}.pem")
        client_ca.issue_cert(f"{len(issued_clients)}@clients.example",
                             common_name=name).private_key_and_cert_chain_pem.write_to_path(path)
        issued_clients[name] = path
    return Certificates(str(folder / "ca.pem"), paths["cert"], paths["key"], paths["cert2"],
                        paths["key2"], str(folder / "client-ca.pem"), issued_clients)
