"""A real DNS server (dnsmasq) on a free loopback port, whose records the
test changes.

``DnsServer`` serves SRV records (``--srv-host``) for names under
``example``, which it owns (``--local=/example/``: an unknown name there
is NXDOMAIN, never forwarded), with a TTL of its own (``--local-ttl``).
``serve(records)`` restarts dnsmasq on the same port with a new record
set (dnsmasq does not reread ``--srv-host`` on SIGHUP); ``stop()`` takes
it away (lookups time out).  Listens on UDP and TCP, 127.0.0.1 only.

``serve(records, failing=[domain])`` makes dnsmasq forward the queries
for names under ``domain`` to an upstream that answers every query
SERVFAIL (a thread of this process, replies made with dnspython), which
dnsmasq passes on: a broken authoritative server, as a resolver reports it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator

from _support.compat_programs import program_env, require
from _support.ports import free_port

__all__ = ["DnsServer", "running_dns"]

#: (name, target, port, priority, weight)
Srv = tuple[str, str, int, int, int]


def _udp_port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class _ServfailUpstream:
    """A UDP DNS server on 127.0.0.1 answering every query SERVFAIL."""

    def __init__(self) -> None:
        import dns.message
        import dns.rcode

        self._message, self._servfail = dns.message, dns.rcode.SERVFAIL
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        threading.Thread(target=self._answer, name="servfail-upstream", daemon=True).start()

    def _answer(self) -> None:
        while True:
            try:
                data, peer = self._sock.recvfrom(4096)
            except OSError:  # closed
                return
            try:
                reply = self._message.make_response(self._message.from_wire(data))
            except Exception:  # not a query: nothing to answer
                continue
            reply.set_rcode(self._servfail)
            with contextlib.suppress(OSError):
                self._sock.sendto(reply.to_wire(), peer)

    def close(self) -> None:
        self._sock.close()


class DnsServer:
    """One dnsmasq process; ``serve()`` swaps its records on the same port."""

    def __init__(self, ttl: int = 1) -> None:
        self.executable = require("dnsmasq")
        self.workdir = tempfile.mkdtemp(prefix="chash-dns-")
        self.ttl = ttl
        self.port = self._pick_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._upstream: _ServfailUpstream | None = None

    @staticmethod
    def _pick_port() -> int:
        for _ in range(50):
            port = free_port()
            if _udp_port_free(port):
                return port
        raise RuntimeError("no port free for both TCP and UDP")

    @property
    def nameserver(self) -> str:
        """``127.0.0.1:PORT``, as ``--nameserver`` takes it."""
        return f"127.0.0.1:{self.port}"

    def serve(self, records: Iterable[Srv], hosts: Iterable[str] = (),
              failing: Iterable[str] = ()) -> None:
        """(Re)start dnsmasq answering with exactly ``records``, an A
        record 127.0.0.1 for each name of ``hosts`` (asked for SRV, such a
        name gives an empty answer), and SERVFAIL for every name under a
        domain of ``failing``."""
        self.stop()
        args = [self.executable, "--keep-in-foreground", f"--port={self.port}",
                "--listen-address=127.0.0.1", "--bind-interfaces", "--no-resolv",
                "--no-hosts", "--conf-file=/dev/null", "--local=/example/",
                f"--local-ttl={self.ttl}", f"--pid-file={self.workdir}/dnsmasq.pid",
                f"--log-facility={self.workdir}/dnsmasq.log"]
        if os.geteuid() == 0:
            args.append("--user=root")  # stay root rather than drop to nobody
        for name, target, port, priority, weight in records:
            args.append(f"--srv-host={name},{target},{port},{priority},{weight}")
        args += [f"--host-record={host},127.0.0.1" for host in hosts]
        failing = list(failing)
        if failing and self._upstream is None:
            self._upstream = _ServfailUpstream()
        for domain in failing:
            assert self._upstream is not None
            args.append(f"--server=/{domain}/127.0.0.1#{self._upstream.port}")
        deadline = time.monotonic() + 10.0
        process = self._process = self._launch(args)
        while not self._answers():
            if process.poll() is not None:
                stderr = process.stderr.read().decode() if process.stderr else ""
                if process.stderr is not None:
                    process.stderr.close()
                # The dnsmasq before it forks a child for each TCP query,
                # which holds the listening sockets until it exits: the
                # port is free again a moment later.
                if "Address already in use" in stderr and time.monotonic() < deadline:
                    time.sleep(0.1)
                    process = self._process = self._launch(args)
                    continue
                raise RuntimeError(f"dnsmasq exited with {process.returncode}: {stderr}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"dnsmasq did not listen on port {self.port}")
            time.sleep(0.02)

    @staticmethod
    def _launch(args: list[str]) -> subprocess.Popen[bytes]:
        # A session of its own: stop() ends its TCP children with it.
        return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env=program_env(), start_new_session=True)

    def _answers(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(
                ("127.0.0.1", self.port), timeout=0.5):
            return True
        return False

    def stop(self) -> None:
        """Stop dnsmasq: lookups then time out."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)  # with the TCP children
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
        if process.stderr is not None:
            process.stderr.close()

    def close(self) -> None:
        """Stop and remove the directory."""
        self.stop()
        if self._upstream is not None:
            self._upstream.close()
            self._upstream = None
        shutil.rmtree(self.workdir, ignore_errors=True)


def running_dns(ttl: int = 1) -> Iterator[DnsServer]:
    """A DnsServer (not serving yet), closed when the generator is closed."""
    server = DnsServer(ttl)
    try:
        yield server
    finally:
        server.close()
